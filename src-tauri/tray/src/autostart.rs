//! Launch at login (auto-launch): an XDG autostart `Wattbar.desktop` entry on Linux
//! (`~/.config/autostart`), a LaunchAgent on macOS. The entry starts this executable, the tray.
//!
//! The entry follows the engine's published preference, however it was changed (the
//! preferences window, the local API): [`Entry`] remembers what it last made the entry be, so
//! each change is applied once and a state published again costs nothing.

use auto_launch::AutoLaunchBuilder;

/// What the system's entry was last made to be (`None`: not yet).
#[derive(Default)]
pub struct Entry(Option<bool>);

impl Entry {
    /// Makes the system's entry match `enabled`, unless this already tried. A failure is
    /// reported once, not at every published state; the next change tries again.
    pub fn follow(&mut self, enabled: bool) -> Result<(), String> {
        if self.0 == Some(enabled) {
            return Ok(());
        }
        self.0 = Some(enabled);
        apply(enabled)
    }
}

/// Makes the system's entry match the preference.
fn apply(enabled: bool) -> Result<(), String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("launch at login: where is this program? {e}"))?;
    let launcher = AutoLaunchBuilder::new()
        .set_app_name("Wattbar")
        .set_app_path(&exe.display().to_string())
        .set_macos_launch_mode(auto_launch::MacOSLaunchMode::LaunchAgent)
        .build()
        .map_err(|e| format!("launch at login: {e}"))?;
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
