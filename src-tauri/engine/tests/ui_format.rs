//! The dashboard's number formats (`ui/js/format.js`, which the engine serves) in two locales:
//! `tests/ui/format.test.mjs` under Node's own test runner.

use std::path::Path;

#[test]
fn the_dashboards_money_and_energy_formats_hold_in_two_locales() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new("node")
        .args(["--test", "tests/ui/format.test.mjs"])
        .current_dir(&repo)
        .output()
        .unwrap_or_else(|e| panic!("node (scripts/setup installs it): {e}"));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("# pass 3"), "{said}");
}
