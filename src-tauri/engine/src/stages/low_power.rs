//! Low-power mode as the engine runs it: the policy (core), the advice routers read, the OS power
//! profile that follows it, and macOS Low Power Mode as the system reports it.
//!
//! Rule: the advice is derived only when the policy's settings or state change. Anything that
//! talks to the operating system (power-profiles-daemon over D-Bus, `pmset`) runs on its own thread,
//! never on the sampling path.

use crate::os_power::OsPowerMode;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_core::policy::{advice, Advice, Measured};
use wattbar_core::{Battery, LowPowerState, Policy, PolicyConfig, Stamp, Transition, Watts};

/// Events kept for readers that look now and then.
pub const RECENT_EVENTS: usize = 8;
/// Events a subscriber may fall behind by before it is told it missed some.
pub const EVENTS_BUFFERED: usize = 64;

/// One thing low-power mode did, numbered from 1 in this run, as a sentence.
pub type LowPowerEvent = (u64, String);

/// Low-power mode now, its advice and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct LowPowerNow {
    /// On or off, since when and why.
    pub state: LowPowerState,
    /// The model to run and a sentence for routers.
    pub advice: Advice,
    /// The last change of low-power mode, as a sentence; `seq` increases with each.
    pub event: Option<String>,
    pub seq: u64,
    /// The last few events with their `seq`, oldest first, so that one reading shows every
    /// event since the last.
    pub events: Arc<[(u64, String)]>,
    /// macOS Low Power Mode as the system last said (read once a minute); `None` elsewhere.
    pub os_mode: Option<bool>,
    /// The threshold in force, watts: the one set, else the machine's rest + 50 %; `None`
    /// while that rest is being learned.
    pub threshold_w: Option<f64>,
    /// The machine's draw at rest as learned, watts.
    pub rest_w: Option<f64>,
}

pub struct LowPower {
    policy: Policy,
    advice: Advice,
    measured: Measured,
    /// The last [`RECENT_EVENTS`] events, oldest first, each with its number: a reader that
    /// looks once a second misses none of a burst (a switch and the unload it causes).
    recent: Arc<[(u64, String)]>,
    seq: u64,
    os_power: Arc<Mutex<OsPowerMode>>,
    os_low_power_mode: Arc<Mutex<Option<bool>>>,
    /// Counts the times the mode switched on: what acts on it waits here, woken only then.
    engaged: tokio::sync::watch::Sender<u64>,
    /// Every event, as it happens, for those that say them (the tray's notifications).
    events: tokio::sync::broadcast::Sender<LowPowerEvent>,
}

impl LowPower {
    /// Starts from `restored`, the last state the store recorded.
    /// `os_power_bus`: where power-profiles-daemon is, where not on the system bus.
    pub fn new(
        config: PolicyConfig,
        restored: LowPowerState,
        os_power_bus: Option<String>,
    ) -> Self {
        let policy = Policy::new(config.clone(), restored);
        let low_power = LowPower {
            advice: advice(&config, policy.state(), &Measured::default()),
            measured: Measured::default(),
            policy,
            recent: Arc::from([]),
            seq: 0,
            os_power: Arc::new(Mutex::new(OsPowerMode::new(os_power_bus))),
            os_low_power_mode: Arc::new(Mutex::new(None)),
            engaged: tokio::sync::watch::Sender::new(0),
            events: tokio::sync::broadcast::Sender::new(EVENTS_BUFFERED),
        };
        watch_macos_low_power_mode(&low_power.os_low_power_mode);
        low_power
    }

    /// Follows the draw, the battery and the price of a kWh in force; a change of mode comes
    /// back to be recorded.
    pub fn observe(
        &mut self,
        at: Stamp,
        watts: Option<Watts>,
        battery: Option<Battery>,
        price_per_kwh: Option<f64>,
    ) -> Option<Transition> {
        self.policy.observe(at, watts, battery, price_per_kwh)
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
        self.push(t.message.clone());
        if t.state.enabled {
            self.engaged.send_modify(|n| *n += 1);
        }
    }

    /// Changes each time the mode switches on, and only then.
    pub fn engagements(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engaged.subscribe()
    }

    /// Where each event is sent as it happens.
    pub fn events(&self) -> tokio::sync::broadcast::Sender<LowPowerEvent> {
        self.events.clone()
    }

    /// Says something low-power mode did (an unload), once, as its next event.
    pub fn announce(&mut self, message: String) {
        tracing::info!("{message}");
        self.push(message);
    }

    fn push(&mut self, message: String) {
        self.seq += 1;
        // Nobody listening is fine: the recent events are published all the same.
        let _ = self.events.send((self.seq, message.clone()));
        let skip = (self.recent.len() + 1).saturating_sub(RECENT_EVENTS);
        self.recent = self
            .recent
            .iter()
            .skip(skip)
            .cloned()
            .chain(std::iter::once((self.seq, message)))
            .collect();
    }

    pub fn state(&self) -> &LowPowerState {
        self.policy.state()
    }

    pub fn advice(&self) -> &Advice {
        &self.advice
    }

    /// The last event.
    pub fn event(&self) -> Option<&String> {
        self.recent.last().map(|(_, m)| m)
    }

    /// The recent events with their numbers, oldest first.
    pub fn recent(&self) -> Arc<[(u64, String)]> {
        Arc::clone(&self.recent)
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

    /// What readers see of the mode now.
    pub fn now(&self) -> LowPowerNow {
        LowPowerNow {
            state: self.state().clone(),
            advice: self.advice.clone(),
            event: self.event().cloned(),
            seq: self.seq,
            events: self.recent(),
            os_mode: self.os_low_power_mode(),
            threshold_w: self.policy.threshold_w(),
            rest_w: self.policy.rest_w(),
        }
    }

    /// The threshold in force and the rest learned, watts ([`LowPowerNow`]).
    pub fn threshold(&self) -> (Option<f64>, Option<f64>) {
        (self.policy.threshold_w(), self.policy.rest_w())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_events_is_kept_for_a_reader_that_looks_later() {
        let mut lp = LowPower::new(PolicyConfig::default(), LowPowerState::off(), None);
        lp.announce("Low-power mode on: manual".into());
        lp.announce("Low-power mode unloaded gemma3:latest".into());
        // One reading after both: both are there, in order, with their numbers.
        let seen: Vec<(u64, String)> = lp.recent().to_vec();
        assert_eq!(
            seen,
            vec![
                (1, "Low-power mode on: manual".to_string()),
                (2, "Low-power mode unloaded gemma3:latest".to_string())
            ]
        );
        for i in 0..10 {
            lp.announce(format!("event {i}"));
        }
        let recent = lp.recent();
        assert_eq!(recent.len(), RECENT_EVENTS);
        assert_eq!(
            recent.first().map(|(s, _)| *s),
            Some(12 - RECENT_EVENTS as u64 + 1)
        );
        assert_eq!(lp.event().map(String::as_str), Some("event 9"));
        assert_eq!(lp.seq(), 12);
    }

    #[test]
    fn a_subscriber_hears_every_event_as_it_happens_in_order_however_close_together() {
        let mut lp = LowPower::new(PolicyConfig::default(), LowPowerState::off(), None);
        let mut heard = lp.events().subscribe();
        lp.announce("Low-power mode on: manual".into());
        lp.announce("Low-power mode unloaded gemma3:latest".into());
        // Past the recent events a state keeps: a stream misses none of them.
        for i in 0..(RECENT_EVENTS + 2) {
            lp.announce(format!("event {i}"));
        }
        let mut got = Vec::new();
        while let Ok(event) = heard.try_recv() {
            got.push(event);
        }
        assert_eq!(got.len(), RECENT_EVENTS + 4);
        assert_eq!(got[0], (1, "Low-power mode on: manual".to_string()));
        assert_eq!(
            got[1],
            (2, "Low-power mode unloaded gemma3:latest".to_string())
        );
        assert!(got.windows(2).all(|w| w[1].0 == w[0].0 + 1));
    }
}
