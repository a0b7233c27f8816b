//! Opt-in: the operating system's power mode follows low-power mode.
//!
//! Linux: power-profiles-daemon, through its own command-line client `powerprofilesctl` (D-Bus
//! `net.hadess.PowerProfiles` underneath, with the daemon's polkit rules). Engaging remembers the
//! active profile and switches to `power-saver`; releasing restores the remembered profile, and
//! only if the profile is still `power-saver` (a change the user made meanwhile is kept).
//!
//! macOS: Low Power Mode is read in process (`NSProcessInfo.isLowPowerModeEnabled`, macOS 12 and
//! later; `pmset -g` before) and shown. Setting it needs admin rights
//! (`pmset -a lowpowermode 1`), so with the preference on, Wattbar asks through the system's own
//! administrator prompt (`osascript … with administrator privileges`) each time, and never
//! otherwise. Releasing restores Low Power Mode as it was.
//!
//! The switch runs on its own thread: a slow D-Bus never delays a sample.

use std::process::Command;

pub const POWER_SAVER: &str = "power-saver";

/// The profile `powerprofilesctl get` prints: one word such as `balanced`.
pub fn parse_profile(output: &str) -> Option<String> {
    let word = output.trim();
    let valid = !word.is_empty()
        && !word.contains(char::is_whitespace)
        && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
    valid.then(|| word.to_string())
}

/// The command-line client, run with `program` (normally `powerprofilesctl`).
#[derive(Debug, Clone)]
pub struct ProfilesCtl {
    program: String,
}

impl Default for ProfilesCtl {
    fn default() -> Self {
        ProfilesCtl {
            program: "powerprofilesctl".to_string(),
        }
    }
}

impl ProfilesCtl {
    pub fn with_program(program: impl Into<String>) -> Self {
        ProfilesCtl {
            program: program.into(),
        }
    }

    pub fn get(&self) -> Result<String, String> {
        let out = Command::new(&self.program)
            .arg("get")
            .output()
            .map_err(|e| {
                format!(
                    "power-profiles-daemon's {} is not available: {e}",
                    self.program
                )
            })?;
        if !out.status.success() {
            return Err(format!(
                "{} get failed: {}",
                self.program,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        parse_profile(&String::from_utf8_lossy(&out.stdout))
            .ok_or_else(|| format!("{} get printed no profile", self.program))
    }

    pub fn set(&self, profile: &str) -> Result<(), String> {
        let out = Command::new(&self.program)
            .args(["set", profile])
            .output()
            .map_err(|e| format!("{}: {e}", self.program))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} set {profile} failed: {}",
                self.program,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

/// macOS Low Power Mode now; `None` where the Mac does not report it. In process on macOS 12 and
/// later, where the system has it for apps; from `pmset -g` before.
#[cfg(target_os = "macos")]
pub fn macos_low_power_mode() -> Result<Option<bool>, String> {
    use objc2_foundation::{NSOperatingSystemVersion, NSProcessInfo};
    let info = NSProcessInfo::processInfo();
    let monterey = NSOperatingSystemVersion {
        majorVersion: 12,
        minorVersion: 0,
        patchVersion: 0,
    };
    if info.isOperatingSystemAtLeastVersion(monterey) {
        return Ok(Some(info.isLowPowerModeEnabled()));
    }
    pmset_low_power_mode()
}

#[cfg(not(target_os = "macos"))]
pub fn macos_low_power_mode() -> Result<Option<bool>, String> {
    Ok(None)
}

/// Low Power Mode as `pmset -g` prints it.
#[cfg(target_os = "macos")]
fn pmset_low_power_mode() -> Result<Option<bool>, String> {
    let text = wattbar_sources::macos::command::run_command("pmset", &["-g"])
        .map_err(|e| e.to_string())?;
    wattbar_sources::macos::pmset::parse_pmset_g(&text)
        .map(|s| s.current.low_power_mode)
        .map_err(|e| e.to_string())
}

/// Sets macOS Low Power Mode through the administrator prompt.
pub(crate) fn set_macos_low_power_mode(on: bool) -> Result<(), String> {
    let script = format!(
        "do shell script \"pmset -a lowpowermode {}\" with prompt \"Wattbar would like to change Low Power Mode.\" with administrator privileges",
        u8::from(on)
    );
    let out = Command::new("osascript")
        .args(["-e", &script])
        .output()
        .map_err(|e| format!("osascript: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "Low Power Mode unchanged: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Follows low-power mode with the OS profile, remembering what to restore.
#[derive(Debug, Default)]
pub struct OsPowerMode {
    ctl: ProfilesCtl,
    /// The profile active before Wattbar switched to power-saver.
    saved: Option<String>,
    /// macOS: Low Power Mode was off before Wattbar turned it on.
    macos_turned_on: bool,
}

impl OsPowerMode {
    pub fn new(ctl: ProfilesCtl) -> Self {
        OsPowerMode {
            ctl,
            saved: None,
            macos_turned_on: false,
        }
    }

    /// Low-power mode turned on or off. Returns what happened, for the log and the notice.
    pub fn follow(&mut self, low_power: bool) -> Result<String, String> {
        if cfg!(target_os = "macos") {
            self.follow_macos(low_power)
        } else {
            self.follow_profiles(low_power)
        }
    }

    fn follow_macos(&mut self, low_power: bool) -> Result<String, String> {
        let now = macos_low_power_mode()?;
        match (low_power, now) {
            (true, Some(true)) => Ok("Low Power Mode was already on".into()),
            (true, _) => {
                set_macos_low_power_mode(true)?;
                self.macos_turned_on = true;
                Ok("Low Power Mode on".into())
            }
            (false, Some(true)) if self.macos_turned_on => {
                set_macos_low_power_mode(false)?;
                self.macos_turned_on = false;
                Ok("Low Power Mode off, as it was".into())
            }
            (false, _) => {
                self.macos_turned_on = false;
                Ok("Low Power Mode left as it is".into())
            }
        }
    }

    fn follow_profiles(&mut self, low_power: bool) -> Result<String, String> {
        if low_power {
            let before = self.ctl.get()?;
            if before == POWER_SAVER {
                return Ok("the power profile was already power-saver".into());
            }
            self.ctl.set(POWER_SAVER)?;
            let message = format!("power profile {before} → {POWER_SAVER}");
            self.saved = Some(before);
            Ok(message)
        } else {
            let Some(saved) = self.saved.take() else {
                return Ok("no power profile to restore".into());
            };
            let now = self.ctl.get()?;
            if now != POWER_SAVER {
                return Ok(format!(
                    "the power profile was changed to {now} meanwhile; kept"
                ));
            }
            self.ctl.set(&saved)?;
            Ok(format!("power profile {POWER_SAVER} → {saved}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_one_lowercase_word() {
        assert_eq!(parse_profile("balanced\n").as_deref(), Some("balanced"));
        assert_eq!(parse_profile("power-saver").as_deref(), Some("power-saver"));
        assert_eq!(parse_profile(""), None);
        assert_eq!(parse_profile("Error: no daemon"), None);
    }

    /// power-profiles-daemon needs the system bus and polkit, which this test machine lacks; a
    /// small stand-in for its client keeps the profile in a file.
    fn stand_in(dir: &std::path::Path, profile: &str) -> (ProfilesCtl, std::path::PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let state = dir.join("profile");
        std::fs::write(&state, profile).unwrap_or_else(|e| panic!("{e}"));
        let script = dir.join("powerprofilesctl");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncase \"$1\" in get) cat {s};; set) printf %s \"$2\" > {s};; esac\n",
                s = state.display()
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        (
            ProfilesCtl::with_program(script.display().to_string()),
            state,
        )
    }

    #[cfg(unix)]
    #[test]
    fn engaging_saves_the_profile_and_releasing_restores_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (ctl, state) = stand_in(dir.path(), "performance");
        let read = || std::fs::read_to_string(&state).unwrap_or_default();
        let mut mode = OsPowerMode::new(ctl);
        assert_eq!(
            mode.follow_profiles(true).as_deref(),
            Ok("power profile performance → power-saver")
        );
        assert_eq!(read(), "power-saver");
        assert_eq!(
            mode.follow_profiles(false).as_deref(),
            Ok("power profile power-saver → performance")
        );
        assert_eq!(read(), "performance");
    }

    #[cfg(unix)]
    #[test]
    fn a_profile_the_user_chose_meanwhile_is_kept() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (ctl, state) = stand_in(dir.path(), "balanced");
        let mut mode = OsPowerMode::new(ctl);
        assert!(mode.follow_profiles(true).is_ok());
        std::fs::write(&state, "performance").unwrap_or_else(|e| panic!("{e}"));
        assert!(mode
            .follow_profiles(false)
            .is_ok_and(|m| m.contains("kept")));
        assert_eq!(
            std::fs::read_to_string(&state).unwrap_or_default(),
            "performance"
        );
    }

    #[test]
    fn a_missing_client_is_an_error_that_says_so() {
        let mut mode = OsPowerMode::new(ProfilesCtl::with_program("/nonexistent/powerprofilesctl"));
        let err = mode.follow_profiles(true).err().unwrap_or_default();
        assert!(err.contains("is not available"), "{err}");
    }
}
