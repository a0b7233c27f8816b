//! Low-power mode as the engine runs it: the policy (core), the advice routers read, the OS power
//! profile that follows it, and macOS Low Power Mode as the system reports it.
//!
//! Rule: the advice is derived only when the policy's settings or state change. Anything that
//! talks to the operating system (powerprofilesctl over D-Bus, `pmset`) runs on its own thread,
//! never on the sampling path.

use crate::os_power::{OsPowerMode, ProfilesCtl};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_core::policy::{advice, Advice, Measured};
use wattbar_core::{Battery, LowPowerState, Policy, PolicyConfig, Stamp, Transition, Watts};

pub struct LowPower {
    policy: Policy,
    advice: Advice,
    measured: Measured,
    event: Option<String>,
    seq: u64,
    os_power: Arc<Mutex<OsPowerMode>>,
    os_low_power_mode: Arc<Mutex<Option<bool>>>,
}

impl LowPower {
    /// Starts from `restored`, the last state the store recorded.
    pub fn new(config: PolicyConfig, restored: LowPowerState, os_power: ProfilesCtl) -> Self {
        let policy = Policy::new(config.clone(), restored);
        let low_power = LowPower {
            advice: advice(&config, policy.state(), &Measured::default()),
            measured: Measured::default(),
            policy,
            event: None,
            seq: 0,
            os_power: Arc::new(Mutex::new(OsPowerMode::new(os_power))),
            os_low_power_mode: Arc::new(Mutex::new(None)),
        };
        watch_macos_low_power_mode(&low_power.os_low_power_mode);
        low_power
    }

    /// Follows the draw; a change of mode comes back to be recorded.
    pub fn observe(
        &mut self,
        at: Stamp,
        watts: Option<Watts>,
        battery: Option<Battery>,
    ) -> Option<Transition> {
        self.policy.observe(at, watts, battery)
    }

    pub fn set_manual(&mut self, on: bool, at: Stamp) -> Option<Transition> {
        self.policy.set_manual(on, at)
    }

    pub fn set_config(&mut self, config: PolicyConfig) {
        self.policy.set_config(config.clone());
        self.advice = advice(&config, self.policy.state(), &self.measured);
    }

    /// What inference measured changed: the advice follows.
    pub fn set_measured(&mut self, measured: Measured) {
        if measured != self.measured {
            self.measured = measured;
            self.advice = advice(self.policy.config(), self.policy.state(), &self.measured);
        }
    }

    /// Announces a change; with `follow_os` the OS power profile follows it, off this thread.
    pub fn changed(&mut self, t: &Transition, config: &PolicyConfig, follow_os: bool) {
        self.advice = advice(config, self.policy.state(), &self.measured);
        tracing::info!("{}", t.message);
        if follow_os {
            let os_power = self.os_power.clone();
            let enabled = t.state.enabled;
            std::thread::spawn(move || {
                let mut mode = os_power.lock().unwrap_or_else(|e| e.into_inner());
                match mode.follow(enabled) {
                    Ok(done) => tracing::info!("{done}"),
                    Err(e) => tracing::warn!("the OS power mode was not changed: {e}"),
                }
            });
        }
        self.event = Some(t.message.clone());
        self.seq += 1;
    }

    /// Says something low-power mode did (an unload), once, as its next event.
    pub fn announce(&mut self, message: String) {
        tracing::info!("{message}");
        self.event = Some(message);
        self.seq += 1;
    }

    pub fn state(&self) -> &LowPowerState {
        self.policy.state()
    }

    pub fn advice(&self) -> &Advice {
        &self.advice
    }

    pub fn event(&self) -> Option<&String> {
        self.event.as_ref()
    }

    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn os_low_power_mode(&self) -> Option<bool> {
        *self
            .os_low_power_mode
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads macOS Low Power Mode once a minute on its own thread, until the engine is gone.
fn watch_macos_low_power_mode(slot: &Arc<Mutex<Option<bool>>>) {
    if !cfg!(target_os = "macos") {
        return;
    }
    let weak = Arc::downgrade(slot);
    std::thread::spawn(move || {
        while let Some(slot) = weak.upgrade() {
            let now = match crate::os_power::macos_low_power_mode() {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!("Low Power Mode: {e}");
                    None
                }
            };
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = now;
            drop(slot);
            std::thread::sleep(Duration::from_secs(60));
        }
    });
}
