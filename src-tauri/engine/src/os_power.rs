//! Opt-in: the operating system's power mode follows low-power mode.
//!
//! Linux: power-profiles-daemon, through its own command-line client `powerprofilesctl` (D-Bus
//! `net.hadess.PowerProfiles` underneath, with the daemon's polkit rules). Engaging remembers the
//! active profile and switches to `power-saver`; releasing restores the remembered profile, and
//! only if the profile is still `power-saver` (a change the user made meanwhile is kept).
//!
//! macOS: Low Power Mode needs admin rights (`pmset -a lowpowermode 1`), so Wattbar does not set
//! it; it is shown from `pmset -g` instead.
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

/// Follows low-power mode with the OS profile, remembering what to restore.
#[derive(Debug, Default)]
pub struct OsPowerMode {
    ctl: ProfilesCtl,
    /// The profile active before Wattbar switched to power-saver.
    saved: Option<String>,
}

impl OsPowerMode {
    pub fn new(ctl: ProfilesCtl) -> Self {
        OsPowerMode { ctl, saved: None }
    }

    /// Low-power mode turned on or off. Returns what happened, for the log and the notice.
    pub fn follow(&mut self, low_power: bool) -> Result<String, String> {
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
            mode.follow(true).as_deref(),
            Ok("power profile performance → power-saver")
        );
        assert_eq!(read(), "power-saver");
        assert_eq!(
            mode.follow(false).as_deref(),
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
        assert!(mode.follow(true).is_ok());
        std::fs::write(&state, "performance").unwrap_or_else(|e| panic!("{e}"));
        assert!(mode.follow(false).is_ok_and(|m| m.contains("kept")));
        assert_eq!(
            std::fs::read_to_string(&state).unwrap_or_default(),
            "performance"
        );
    }

    #[test]
    fn a_missing_client_is_an_error_that_says_so() {
        let mut mode = OsPowerMode::new(ProfilesCtl::with_program("/nonexistent/powerprofilesctl"));
        let err = mode.follow(true).err().unwrap_or_default();
        assert!(err.contains("is not available"), "{err}");
    }
}
