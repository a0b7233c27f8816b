//! Launch at login through tauri-plugin-autostart: an XDG autostart `.desktop` entry on Linux
//! (`$XDG_CONFIG_HOME/autostart`), a LaunchAgent on macOS.
//!
//! The entry follows the engine's preference: the window's change applies it at once (and shows
//! a failure by the field), and every published state is followed too, so a change made through
//! the local API reaches it as well. [`Entry`] remembers what it was last made to be, so each
//! change is applied once and a state published twice costs nothing.

use std::sync::Mutex;
use tauri::AppHandle;
use tauri_plugin_autostart::ManagerExt;

/// What the system's entry was last made to be (`None`: not yet).
#[derive(Default)]
pub struct Entry(Mutex<Option<bool>>);

impl Entry {
    /// Makes the system's entry match `enabled`, unless this already tried. A failure is
    /// reported once, not at every published state; the next change tries again.
    pub fn follow(&self, app: &AppHandle, enabled: bool) -> Result<(), String> {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if *last == Some(enabled) {
            return Ok(());
        }
        *last = Some(enabled);
        apply(app, enabled)
    }
}

/// Makes the system's entry match the preference.
fn apply(app: &AppHandle, enabled: bool) -> Result<(), String> {
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
