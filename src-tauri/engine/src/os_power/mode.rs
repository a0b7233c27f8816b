//! The OS power mode, read and set: what low-power mode's switch and a sweep's `powermode` knob
//! both turn.
//!
//! Linux: power-profiles-daemon over the system bus, in its own interface
//! (`net.hadess.PowerProfiles` at `/net/hadess/PowerProfiles`: the `ActiveProfile` property read
//! and written, `Profiles` listing what this machine offers), as `powerprofilesctl` speaks it;
//! `DBUS_SYSTEM_BUS_ADDRESS` (or [`PowerMode::connect`]'s `bus`) names another bus. Changing it is the daemon's polkit rule
//! (`org.freedesktop.UPower.PowerProfiles.switch-profile`), which lets an active local session.
//! Limits on what the daemon answers: at most 16 profiles, each one lowercase word
//! (`power-saver`) of at most 64 bytes, checked before any is used (the bus bounds a message).
//!
//! macOS: Low Power Mode, `off` and `on`, set through the administrator prompt as low-power
//! mode's own switch does ([`super`]).

use crate::error::Error;
use std::process::Command;

/// A profile name as the daemon gives it (and `powerprofilesctl get` prints): one word such as
/// `balanced`.
pub fn parse_profile(output: &str) -> Option<String> {
    let word = output.trim();
    let valid = !word.is_empty()
        && !word.contains(char::is_whitespace)
        && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
    valid.then(|| word.to_string())
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
pub fn set_macos_low_power_mode(on: bool) -> Result<(), String> {
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

#[cfg(target_os = "linux")]
pub use linux::PowerMode;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::collections::HashMap;
    use zbus::zvariant::OwnedValue;

    /// The most profiles a daemon's answer may list.
    pub(super) const MAX_PROFILES: usize = 16;
    /// The longest profile name taken.
    pub(super) const MAX_NAME_BYTES: usize = 64;

    /// The order a sweep takes profiles in: the most power first; others after, as listed.
    fn rank(profile: &str) -> usize {
        match profile {
            "performance" => 0,
            "balanced" => 1,
            "power-saver" => 2,
            _ => 3,
        }
    }

    /// A profile name as the daemon gives it, checked.
    fn profile_name(name: &str) -> Result<String, Error> {
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::Setting(format!(
                "power-profiles-daemon named a profile of {} bytes (at most {MAX_NAME_BYTES})",
                name.len()
            )));
        }
        parse_profile(name).ok_or_else(|| {
            Error::Setting(format!(
                "power-profiles-daemon named a profile {name:?}, which is not one lowercase word"
            ))
        })
    }

    /// The profiles in sweep order, checked.
    pub(super) fn in_sweep_order(names: Vec<String>) -> Result<Vec<String>, Error> {
        if names.len() > MAX_PROFILES {
            return Err(Error::Setting(format!(
                "power-profiles-daemon listed {} profiles (at most {MAX_PROFILES})",
                names.len()
            )));
        }
        let mut names = names
            .iter()
            .map(|n| profile_name(n))
            .collect::<Result<Vec<_>, _>>()?;
        names.sort_by_key(|n| rank(n));
        names.dedup();
        if names.is_empty() {
            return Err(Error::Setting(
                "power-profiles-daemon lists no profile".into(),
            ));
        }
        Ok(names)
    }

    const SERVICE: &str = "net.hadess.PowerProfiles";
    const PATH: &str = "/net/hadess/PowerProfiles";
    const INTERFACE: &str = "net.hadess.PowerProfiles";

    /// power-profiles-daemon, reached.
    #[derive(Debug, Clone)]
    pub struct PowerMode {
        proxy: zbus::Proxy<'static>,
    }

    /// The daemon's refusal in words, with what it needs.
    fn said(doing: &str, e: zbus::Error) -> Error {
        let text = e.to_string();
        let why = if text.contains("ServiceUnknown") || text.contains("NameHasNoOwner") {
            "power-profiles-daemon is not running (nobody owns net.hadess.PowerProfiles on the \
             system bus): install and start it"
                .to_string()
        } else if text.contains("AccessDenied") || text.contains("NotAuthorized") {
            format!(
                "power-profiles-daemon refused ({text}): its polkit rule \
                 org.freedesktop.UPower.PowerProfiles.switch-profile allows an active local \
                 session, or root"
            )
        } else {
            text
        };
        Error::Setting(format!("cannot {doing} the power profile: {why}"))
    }

    impl PowerMode {
        /// The daemon on the system bus, or on the bus at `bus`.
        pub async fn connect(bus: Option<&str>) -> Result<PowerMode, Error> {
            let bus = match bus {
                None => zbus::Connection::system().await,
                Some(address) => match zbus::connection::Builder::address(address) {
                    Ok(b) => b.build().await,
                    Err(e) => Err(e),
                },
            }
            .map_err(|e| {
                Error::Setting(format!(
                    "cannot reach the power profile: no system bus to find \
                     power-profiles-daemon on ({e})"
                ))
            })?;
            let proxy = zbus::proxy::Builder::new(&bus)
                .destination(SERVICE)
                .and_then(|b| b.path(PATH))
                .and_then(|b| b.interface(INTERFACE))
                .map_err(|e| said("reach", e))?
                .cache_properties(zbus::proxy::CacheProperties::No)
                .build()
                .await
                .map_err(|e| said("reach", e))?;
            let mode = PowerMode { proxy };
            mode.current().await?;
            Ok(mode)
        }

        pub async fn current(&self) -> Result<String, Error> {
            let active: String = self
                .proxy
                .get_property("ActiveProfile")
                .await
                .map_err(|e| said("read", e))?;
            profile_name(&active)
        }

        pub async fn steps(&self) -> Result<Vec<String>, Error> {
            let listed: Vec<HashMap<String, OwnedValue>> = self
                .proxy
                .get_property("Profiles")
                .await
                .map_err(|e| said("list", e))?;
            if listed.len() > MAX_PROFILES {
                return in_sweep_order(vec![String::new(); listed.len()]);
            }
            let names = listed
                .iter()
                .map(|p| {
                    p.get("Profile")
                        .and_then(|v| <&str>::try_from(&**v).ok())
                        .map(str::to_string)
                        .ok_or_else(|| {
                            Error::Setting(
                                "power-profiles-daemon listed a profile with no name".into(),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            in_sweep_order(names)
        }

        pub async fn set(&self, profile: &str) -> Result<(), Error> {
            self.proxy
                .set_property("ActiveProfile", profile)
                .await
                .map_err(|e| said("change", e.into()))?;
            let now = self.current().await?;
            if now == profile {
                Ok(())
            } else {
                Err(Error::Setting(format!(
                    "power-profiles-daemon was asked for {profile} and kept {now}"
                )))
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub use other::PowerMode;

#[cfg(not(target_os = "linux"))]
mod other {
    use super::*;

    /// macOS Low Power Mode.
    #[derive(Debug, Clone)]
    pub struct PowerMode;

    fn word(on: bool) -> String {
        if on { "on" } else { "off" }.to_string()
    }

    impl PowerMode {
        /// Low Power Mode; `bus` is Linux's alone.
        pub async fn connect(_bus: Option<&str>) -> Result<PowerMode, Error> {
            let mode = PowerMode;
            mode.current().await?;
            Ok(mode)
        }

        pub async fn current(&self) -> Result<String, Error> {
            let now = tokio::task::spawn_blocking(macos_low_power_mode)
                .await
                .map_err(|e| Error::Setting(e.to_string()))?
                .map_err(Error::Setting)?;
            now.map(word)
                .ok_or_else(|| Error::Setting("this Mac does not report Low Power Mode".into()))
        }

        pub async fn steps(&self) -> Result<Vec<String>, Error> {
            Ok(vec![word(false), word(true)])
        }

        pub async fn set(&self, value: &str) -> Result<(), Error> {
            let on = match value {
                "on" => true,
                "off" => false,
                other => {
                    return Err(Error::Setting(format!(
                        "Low Power Mode is on or off, not {other:?}"
                    )))
                }
            };
            tokio::task::spawn_blocking(move || set_macos_low_power_mode(on))
                .await
                .map_err(|e| Error::Setting(e.to_string()))?
                .map_err(Error::Setting)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_profile_is_one_lowercase_word() {
        use super::parse_profile;
        assert_eq!(parse_profile("balanced\n").as_deref(), Some("balanced"));
        assert_eq!(parse_profile("power-saver").as_deref(), Some("power-saver"));
        assert_eq!(parse_profile(""), None);
        assert_eq!(parse_profile("Error: no daemon"), None);
    }

    #[cfg(target_os = "linux")]
    use super::linux::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn profiles_are_swept_from_the_most_power_down_and_bad_names_refused() {
        let listed = ["power-saver", "balanced", "performance"].map(String::from);
        assert_eq!(
            in_sweep_order(listed.to_vec()).ok(),
            Some(
                ["performance", "balanced", "power-saver"]
                    .map(String::from)
                    .to_vec()
            )
        );
        // A machine without a performance driver lists two.
        assert_eq!(
            in_sweep_order(vec!["balanced".into(), "power-saver".into()]).ok(),
            Some(vec!["balanced".to_string(), "power-saver".to_string()])
        );
        assert!(in_sweep_order(vec![]).is_err());
        assert!(in_sweep_order(vec!["Balanced; rm -rf".into()]).is_err());
        assert!(in_sweep_order(vec!["a".repeat(MAX_NAME_BYTES + 1)]).is_err());
        assert!(in_sweep_order(vec!["balanced".into(); MAX_PROFILES + 1]).is_err());
    }
}
