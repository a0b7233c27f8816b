//! The tray is light at rest because of what it never loads: `wattbar`, the StatusNotifierItem,
//! links no toolkit at all, and its libappindicator fallback `wattbar-appindicator` links GTK 3
//! but no web view (WebKit, JavaScriptCore) and nothing that pulls in GL, whatever a later change
//! adds to either.

#[cfg(target_os = "linux")]
fn needed(program: &str) -> Vec<String> {
    let out = std::process::Command::new("readelf")
        .args(["--dynamic", "--wide", program])
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils) is needed: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split('[').nth(1)?.split(']').next()?.to_string()))
        .collect()
}

#[cfg(target_os = "linux")]
const WEB_VIEW_AND_GL: [&str; 5] = [
    "libwebkit2gtk",
    "libjavascriptcoregtk",
    "libsoup",
    "libGL",
    "libEGL",
];

#[cfg(target_os = "linux")]
#[test]
fn the_status_notifier_tray_links_no_toolkit_and_no_web_view() {
    let needed = needed(env!("CARGO_BIN_EXE_wattbar"));
    for toolkit in [
        "libgtk",
        "libgdk",
        "libcairo",
        "libpango",
        "libglib",
        "libgobject",
        "libayatana",
        "libappindicator",
        "libxdo",
    ]
    .iter()
    .chain(&WEB_VIEW_AND_GL)
    {
        assert!(
            !needed.iter().any(|l| l.starts_with(toolkit)),
            "the StatusNotifierItem tray links {toolkit}: {needed:?}"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_fallback_links_gtk_and_no_web_view() {
    let needed = needed(env!("CARGO_BIN_EXE_wattbar-appindicator"));
    assert!(
        needed.iter().any(|l| l.starts_with("libgtk-3")),
        "the fallback draws its menu with GTK 3: {needed:?}"
    );
    for heavy in WEB_VIEW_AND_GL {
        assert!(
            !needed.iter().any(|l| l.starts_with(heavy)),
            "the fallback links {heavy}: {needed:?}"
        );
    }
}
