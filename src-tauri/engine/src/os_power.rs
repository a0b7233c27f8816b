//! Opt-in: the operating system's power mode follows low-power mode.
//!
//! Linux: power-profiles-daemon, spoken over its own D-Bus interface ([`PowerMode`], the same
//! client a sweep's `powermode` knob uses). Engaging remembers the active profile and switches to
//! `power-saver`; releasing restores the remembered profile, and only if the profile is still
//! `power-saver` (a change the user made meanwhile is kept).
//!
//! macOS: Low Power Mode is read in process (`NSProcessInfo.isLowPowerModeEnabled`, macOS 12 and
//! later; `pmset -g` before) and shown. Setting it needs admin rights
//! (`pmset -a lowpowermode 1`), so with the preference on, Wattbar asks through the system's own
//! administrator prompt (`osascript … with administrator privileges`) each time, and never
//! otherwise. Releasing restores Low Power Mode as it was.
//!
//! The switch runs on its own thread: a slow D-Bus never delays a sample.

mod mode;

pub use mode::{macos_low_power_mode, parse_profile, set_macos_low_power_mode, PowerMode};

pub const POWER_SAVER: &str = "power-saver";

/// Follows low-power mode with the OS profile, remembering what to restore.
#[derive(Debug, Default)]
pub struct OsPowerMode {
    /// The bus power-profiles-daemon is on; `None`: the system bus.
    bus: Option<String>,
    /// The profile active before Wattbar switched to power-saver.
    saved: Option<String>,
    /// macOS: Low Power Mode was off before Wattbar turned it on.
    macos_turned_on: bool,
}

impl OsPowerMode {
    pub fn new(bus: Option<String>) -> Self {
        OsPowerMode {
            bus,
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
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(self.follow_daemon(low_power))
    }

    async fn follow_daemon(&mut self, low_power: bool) -> Result<String, String> {
        let said = |e: crate::Error| e.to_string();
        if !low_power && self.saved.is_none() {
            return Ok("no power profile to restore".into());
        }
        let daemon = PowerMode::connect(self.bus.as_deref())
            .await
            .map_err(said)?;
        if low_power {
            let before = daemon.current().await.map_err(said)?;
            if before == POWER_SAVER {
                return Ok("the power profile was already power-saver".into());
            }
            daemon.set(POWER_SAVER).await.map_err(said)?;
            let message = format!("power profile {before} → {POWER_SAVER}");
            self.saved = Some(before);
            Ok(message)
        } else {
            let Some(saved) = self.saved.take() else {
                return Ok("no power profile to restore".into());
            };
            let now = daemon.current().await.map_err(said)?;
            if now != POWER_SAVER {
                return Ok(format!(
                    "the power profile was changed to {now} meanwhile; kept"
                ));
            }
            daemon.set(&saved).await.map_err(said)?;
            Ok(format!("power profile {POWER_SAVER} → {saved}"))
        }
    }
}
