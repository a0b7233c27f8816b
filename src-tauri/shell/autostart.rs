//! Launch at login through tauri-plugin-autostart: an XDG autostart `.desktop` entry on Linux
//! (`$XDG_CONFIG_HOME/autostart`), a LaunchAgent on macOS.

use tauri::AppHandle;
use tauri_plugin_autostart::ManagerExt;

/// Makes the system's entry match the preference.
pub fn apply(app: &AppHandle, enabled: bool) -> Result<(), String> {
    let launcher = app.autolaunch();
    let now = launcher
        .is_enabled()
        .map_err(|e| format!("could not read launch at login: {e}"))?;
    if now == enabled {
        return Ok(());
    }
    if enabled {
        launcher.enable()
    } else {
        launcher.disable()
    }
    .map_err(|e| format!("could not change launch at login: {e}"))
}
