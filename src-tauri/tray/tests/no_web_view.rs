//! The tray is light at rest because it never loads a web view: its executable must not link
//! WebKit, JavaScriptCore or anything that pulls in GL, whatever a later change adds to it.

#[cfg(target_os = "linux")]
#[test]
fn the_tray_links_no_web_view_library() {
    let out = std::process::Command::new("readelf")
        .args(["--dynamic", "--wide", env!("CARGO_BIN_EXE_wattbar")])
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dynamic = String::from_utf8_lossy(&out.stdout);
    let needed: Vec<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(
        needed.iter().any(|l| l.starts_with("libgtk-3")),
        "the tray draws its menu with GTK 3: {needed:?}"
    );
    for heavy in [
        "libwebkit2gtk",
        "libjavascriptcoregtk",
        "libsoup",
        "libGL",
        "libEGL",
    ] {
        assert!(
            !needed.iter().any(|l| l.starts_with(heavy)),
            "the tray links {heavy}: {needed:?}"
        );
    }
}
