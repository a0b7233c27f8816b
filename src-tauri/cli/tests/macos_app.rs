//! What can be checked here of Wattbar.app, with no Mac: the Info.plist the bundler merges is a
//! property list that hides the Dock icon, and the bundling names the tray as the main program.

use crate::common::repo_root;

#[test]
fn the_app_is_a_menu_bar_app_whose_main_program_is_the_tray() {
    let path = repo_root().join("packaging/macos/Info.plist");
    let value = plist::Value::from_file(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let dict = value
        .as_dictionary()
        .unwrap_or_else(|| panic!("{path:?} is not a dictionary"));
    assert_eq!(
        dict.get("LSUIElement").and_then(|v| v.as_boolean()),
        Some(true)
    );
    let script = std::fs::read_to_string(repo_root().join("scripts/package"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mac = script
        .split("if [[ \"$(uname -s)\" == Darwin ]]; then")
        .nth(2)
        .unwrap_or_else(|| panic!("no macOS branch"));
    let config = mac
        .split("<<JSON\n")
        .nth(1)
        .and_then(|rest| rest.split("\nJSON").next())
        .unwrap_or_else(|| panic!("no bundle config"));
    let config: serde_json::Value =
        serde_json::from_str(config).unwrap_or_else(|e| panic!("{config}: {e}"));
    assert_eq!(config["mainBinaryName"], "wattbar");
    assert_eq!(
        config["bundle"]["externalBin"],
        serde_json::json!(["target/package/sidecars/wattbar-window"])
    );
    assert_eq!(
        config["bundle"]["macOS"]["infoPlist"],
        "packaging/macos/Info.plist"
    );
}
