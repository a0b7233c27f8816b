//! Low-power mode: when it is on, why, and what to run instead.
//!
//! Rules, in the order they are checked at each sample:
//! 1. **Manual wins.** A choice the user made (on or off) stays until the user changes it. A
//!    manual "off" also disarms auto-engage until the draw has fallen below the release level
//!    once, so the mode does not spring back on a few seconds after being switched off.
//! 2. **Battery.** With the battery rule set, running on battery (or below the charge percent)
//!    engages at once; it releases when the condition ends, if the battery rule engaged it.
//! 3. **Threshold.** Headline watts above `threshold` for `engage_after` engage it; below
//!    `threshold − hysteresis` for `release_after` release it, only when the threshold engaged it.
//!    A sample with no headline is no evidence either way: it restarts both timers. Without
//!    watts set, the threshold is the machine's own rest + 50 % ([`rest`]), unknown (and nothing
//!    engaged by it) until a rest is learned.
//!
//! Time is the caller's monotonic clock ([`Stamp`]); nothing here reads a clock.
//!
//! Non-goals: acting on the operating system's power mode (the engine does that, opt-in), and
//! estimating inference speed (the advice takes tokens/s per watt as given).

mod advice;
mod config;
pub mod rest;

pub use advice::*;
pub use config::*;

use crate::error::Error;
use crate::reading::{Battery, Stamp};
use crate::units::Watts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why low-power mode is in its current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Manual,
    AutoThreshold,
    Battery,
    /// The price in force was above `low_power_above_price`.
    Price,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Manual => "manual",
            Reason::AutoThreshold => "auto-threshold",
            Reason::Battery => "battery",
            Reason::Price => "price",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        match s {
            "manual" => Some(Reason::Manual),
            "auto-threshold" => Some(Reason::AutoThreshold),
            "battery" => Some(Reason::Battery),
            "price" => Some(Reason::Price),
            _ => None,
        }
    }
}

/// The release level below `threshold`: the hysteresis, at most half the threshold (a learned
/// threshold may be lower than the watts of hysteresis set).
fn release_level(threshold: f64, hysteresis: f64) -> f64 {
    threshold - hysteresis.min(threshold / 2.0)
}

/// The mode as everyone reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LowPowerState {
    pub enabled: bool,
    /// Wall-clock time of the last change, seconds since the Unix epoch; `None` if never changed.
    pub since: Option<f64>,
    /// Why it is in this state; `None` if it never changed.
    pub reason: Option<Reason>,
}

impl LowPowerState {
    pub fn off() -> Self {
        LowPowerState {
            enabled: false,
            since: None,
            reason: None,
        }
    }
}

/// A change of the mode, with a sentence for the notification.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    pub state: LowPowerState,
    pub message: String,
}

/// The policy state machine. Feed it every sample with [`Policy::observe`].
#[derive(Debug, Clone)]
pub struct Policy {
    config: PolicyConfig,
    state: LowPowerState,
    above_since: Option<Duration>,
    below_since: Option<Duration>,
    /// False after a manual "off" until the draw falls below the release level.
    armed: bool,
    /// The machine's rest, for a threshold not set in watts.
    rest: rest::Rest,
}

impl Policy {
    /// Starts from a restored state (the last one recorded in the store).
    pub fn new(config: PolicyConfig, restored: LowPowerState) -> Self {
        let armed = restored.reason != Some(Reason::Manual) || restored.enabled;
        Policy {
            config,
            state: restored,
            above_since: None,
            below_since: None,
            armed,
            rest: rest::Rest::default(),
        }
    }

    /// The threshold in force, watts: the one set, else the machine's rest + 50 %; `None` while
    /// the rest is not yet known.
    pub fn threshold_w(&self) -> Option<f64> {
        self.config.threshold_w.or_else(|| self.rest.threshold())
    }

    /// The machine's draw at rest as learned, watts; `None` until known.
    pub fn rest_w(&self) -> Option<f64> {
        self.rest.watts()
    }

    /// How the threshold in force was set, for messages: "150 W (the machine's rest of 100 W +
    /// 50 %)" or "15 W".
    fn threshold_said(&self, threshold: f64) -> String {
        match (self.config.threshold_w, self.rest.watts()) {
            (None, Some(rest)) => format!(
                "{} W (the machine's rest of {} W, + 50 % or 5 W)",
                trim(threshold),
                trim(rest)
            ),
            _ => format!("{} W", trim(threshold)),
        }
    }

    pub fn state(&self) -> &LowPowerState {
        &self.state
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    pub fn set_config(&mut self, config: PolicyConfig) {
        if config != self.config {
            self.above_since = None;
            self.below_since = None;
        }
        self.config = config;
    }

    /// The user's choice. Returns a transition when it changes anything, including the reason
    /// (turning "on" an auto-engaged mode makes it manual, so it no longer auto-releases).
    pub fn set_manual(&mut self, enabled: bool, at: Stamp) -> Option<Transition> {
        self.armed = enabled;
        self.above_since = None;
        self.below_since = None;
        if self.state.enabled == enabled && self.state.reason == Some(Reason::Manual) {
            return None;
        }
        let was = self.state.enabled;
        self.state = LowPowerState {
            enabled,
            since: if was == enabled {
                self.state.since
            } else {
                Some(at.unix_seconds)
            },
            reason: Some(Reason::Manual),
        };
        let message = if enabled {
            "Low-power mode on: switched on by hand".to_string()
        } else {
            "Low-power mode off: switched off by hand".to_string()
        };
        Some(Transition {
            state: self.state.clone(),
            message,
        })
    }

    /// One sample, when a kWh cost `price_per_kwh` (`None`: not known). Returns a transition
    /// when the mode changes.
    pub fn observe(
        &mut self,
        at: Stamp,
        watts: Option<Watts>,
        battery: Option<Battery>,
        price_per_kwh: Option<f64>,
    ) -> Option<Transition> {
        if let Some(t) = self.battery_rule(at, battery) {
            return Some(t);
        }
        if let Some(t) = self.price_rule(at, price_per_kwh) {
            return Some(t);
        }
        self.threshold_rule(at, watts)
    }

    /// On while the price is above `above_price`, off once it is not; a price not known
    /// decides nothing, and a mode switched by hand is left alone.
    fn price_rule(&mut self, at: Stamp, price: Option<f64>) -> Option<Transition> {
        let (limit, price) = (self.config.above_price, price.filter(|p| p.is_finite()));
        if self.state.reason == Some(Reason::Manual) {
            return None;
        }
        let (Some(limit), Some(price)) = (limit, price) else {
            // Without the rule, a mode it engaged is released.
            return (limit.is_none()
                && self.state.enabled
                && self.state.reason == Some(Reason::Price))
            .then(|| {
                self.change(
                    false,
                    Reason::Price,
                    at,
                    "Low-power mode off: no price rule".into(),
                )
            });
        };
        if price > limit && !self.state.enabled {
            return Some(self.change(
                true,
                Reason::Price,
                at,
                format!(
                    "Low-power mode on: a kWh costs {}, above {}",
                    per_kwh(price),
                    per_kwh(limit)
                ),
            ));
        }
        if price <= limit && self.state.enabled && self.state.reason == Some(Reason::Price) {
            return Some(self.change(
                false,
                Reason::Price,
                at,
                format!(
                    "Low-power mode off: a kWh costs {}, at or below {}",
                    per_kwh(price),
                    per_kwh(limit)
                ),
            ));
        }
        None
    }

    /// `Some(true)`: the battery rule wants the mode on; `Some(false)`: off; `None`: no
    /// battery known, or the charge is inside the release band.
    fn battery_trigger(&self, battery: Option<Battery>) -> Option<bool> {
        let b = battery?;
        let limit = self.config.battery_below_percent;
        let low = matches!((limit, b.percent), (Some(l), Some(p)) if b.on_battery && p < l);
        let recovered = match (limit, b.percent) {
            (Some(l), Some(p)) if b.on_battery => p >= l + BATTERY_HYSTERESIS_PERCENT,
            _ => true,
        };
        if (self.config.on_battery && b.on_battery) || low {
            Some(true)
        } else if recovered {
            Some(false)
        } else {
            None
        }
    }

    fn battery_rule(&mut self, at: Stamp, battery: Option<Battery>) -> Option<Transition> {
        if self.state.reason == Some(Reason::Manual) {
            return None;
        }
        let engage = self.battery_trigger(battery)?;
        if engage && !self.state.enabled {
            let why = match battery {
                Some(Battery {
                    percent: Some(p), ..
                }) if self
                    .config
                    .battery_below_percent
                    .is_some_and(|limit| p < limit) =>
                {
                    format!("battery at {p:.0} %")
                }
                _ => "running on battery".to_string(),
            };
            return Some(self.change(
                true,
                Reason::Battery,
                at,
                format!("Low-power mode on: {why}"),
            ));
        }
        if !engage && self.state.enabled && self.state.reason == Some(Reason::Battery) {
            return Some(self.change(
                false,
                Reason::Battery,
                at,
                "Low-power mode off: back on mains power".to_string(),
            ));
        }
        None
    }

    fn threshold_rule(&mut self, at: Stamp, watts: Option<Watts>) -> Option<Transition> {
        let Some(w) = watts.map(|w| w.0).filter(|w| w.is_finite()) else {
            self.above_since = None;
            self.below_since = None;
            return None;
        };
        let now = at.monotonic;
        self.rest.observe(now, w);
        let Some(threshold) = self.threshold_w() else {
            self.above_since = None;
            self.below_since = None;
            return None;
        };
        let release = release_level(threshold, self.config.hysteresis_w);
        if w > threshold {
            self.above_since.get_or_insert(now);
        } else {
            self.above_since = None;
        }
        if w < release {
            self.below_since.get_or_insert(now);
            self.armed = true;
        } else {
            self.below_since = None;
        }
        if !self.config.auto || self.state.reason == Some(Reason::Manual) && self.state.enabled {
            return None;
        }
        let held = |since: Option<Duration>| since.map(|s| now.saturating_sub(s).as_secs_f64());
        if !self.state.enabled && self.armed {
            if let Some(d) = held(self.above_since) {
                if d >= self.config.engage_after_s {
                    let msg = format!(
                        "Low-power mode on: above {} for {}",
                        self.threshold_said(threshold),
                        seconds(self.config.engage_after_s)
                    );
                    return Some(self.change(true, Reason::AutoThreshold, at, msg));
                }
            }
        }
        if self.state.enabled && self.state.reason == Some(Reason::AutoThreshold) {
            if let Some(d) = held(self.below_since) {
                if d >= self.config.release_after_s {
                    let msg = format!(
                        "Low-power mode off: below {} W for {}",
                        trim(release),
                        seconds(self.config.release_after_s)
                    );
                    return Some(self.change(false, Reason::AutoThreshold, at, msg));
                }
            }
        }
        None
    }

    fn change(&mut self, enabled: bool, reason: Reason, at: Stamp, message: String) -> Transition {
        self.above_since = None;
        self.below_since = None;
        self.state = LowPowerState {
            enabled,
            since: Some(at.unix_seconds),
            reason: Some(reason),
        };
        Transition {
            state: self.state.clone(),
            message,
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

fn seconds(s: f64) -> String {
    if s >= 120.0 && s % 60.0 == 0.0 {
        format!("{} min", trim(s / 60.0))
    } else {
        format!("{} s", trim(s))
    }
}

/// A price per kWh to four places, without trailing zeros: `0.42`, `0.3512`.
fn per_kwh(p: f64) -> String {
    let text = format!("{p:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
