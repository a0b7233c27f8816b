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

pub mod rest;

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

/// The low-power settings a person chooses; part of [`crate::Preferences`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// Auto-engage on sustained high draw.
    #[serde(rename = "low_power_auto")]
    pub auto: bool,
    /// Watts; `None`: the machine's rest + 50 % ([`rest`]).
    #[serde(rename = "low_power_threshold_w")]
    pub threshold_w: Option<f64>,
    #[serde(rename = "low_power_hysteresis_w")]
    pub hysteresis_w: f64,
    #[serde(rename = "low_power_engage_after_s")]
    pub engage_after_s: f64,
    #[serde(rename = "low_power_release_after_s")]
    pub release_after_s: f64,
    /// Engage whenever the machine runs on battery.
    #[serde(rename = "low_power_on_battery")]
    pub on_battery: bool,
    /// Engage when the charge falls below this percent.
    #[serde(rename = "low_power_battery_below_percent")]
    pub battery_below_percent: Option<f64>,
    /// Engage while the price in force (the price feed's slot, else the tariffs') is above this
    /// per kWh; released once it is at or below it again.
    #[serde(rename = "low_power_above_price")]
    pub above_price: Option<f64>,
    /// The model a local router should switch to while the mode is on; [`AUTO_MODEL`]: the
    /// cheapest model good enough by the profiles kept ([`crate::eval::best`]).
    #[serde(rename = "low_power_model")]
    pub model: String,
    /// With [`AUTO_MODEL`], the accuracy the chosen model must have reached, a fraction.
    #[serde(rename = "low_power_min_accuracy")]
    pub min_accuracy: f64,
    /// With [`AUTO_MODEL`], the highest median inter-token latency it may have, ms; `None`:
    /// any.
    #[serde(rename = "low_power_max_itl_ms")]
    pub max_itl_ms: Option<f64>,
    /// Also switch the operating system's power mode (power-profiles-daemon, macOS Low Power Mode).
    pub os_power_mode: bool,
    /// What the inference proxy does while the mode is on.
    #[serde(rename = "low_power_action")]
    pub action: LowPowerAction,
    /// The model to serve instead of each requested one while routing; `"*"` for any other.
    /// Models it does not name, with no `"*"`, go to [`model`](Self::model).
    #[serde(rename = "low_power_routes")]
    pub routes: BTreeMap<String, String>,
    /// While routing, the most tokens a request may ask to generate; `None`: no cap.
    #[serde(rename = "low_power_max_tokens")]
    pub max_tokens: Option<u64>,
    /// When the mode engages, unload each model the server holds with no request in flight.
    #[serde(rename = "unload_idle_models_in_low_power")]
    pub unload_idle: bool,
}

/// What the inference proxy does while low-power mode is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LowPowerAction {
    /// Name the low-power model (`/v1/low-power`, `low-power.json`) for a router to read.
    #[default]
    Advise,
    /// Send measured requests to the low-power model, and cap their tokens when asked.
    Route,
}

/// The preference keys of [`PolicyConfig`], as stored.
pub const POLICY_KEYS: [&str; 16] = [
    "low_power_auto",
    "low_power_threshold_w",
    "low_power_hysteresis_w",
    "low_power_engage_after_s",
    "low_power_release_after_s",
    "low_power_on_battery",
    "low_power_battery_below_percent",
    "low_power_above_price",
    "low_power_model",
    "low_power_min_accuracy",
    "low_power_max_itl_ms",
    "os_power_mode",
    "low_power_action",
    "low_power_routes",
    "low_power_max_tokens",
    "unload_idle_models_in_low_power",
];

pub const DEFAULT_HYSTERESIS_W: f64 = 3.0;
pub const DEFAULT_ENGAGE_AFTER_S: f64 = 30.0;
pub const DEFAULT_RELEASE_AFTER_S: f64 = 30.0;
pub const DEFAULT_MODEL: &str = "qwen3:1b";
/// `low_power_model` for the cheapest model good enough by the profiles kept.
pub const AUTO_MODEL: &str = "auto";
/// Longest engage or release delay a person may choose: one day.
pub const MAX_DELAY_S: f64 = 86_400.0;
/// Highest threshold: anything above is a unit mistake (kW typed as W is caught the other way).
pub const MAX_THRESHOLD_W: f64 = 100_000.0;
/// Most tokens a cap may allow: above it a cap caps nothing a local model would generate.
pub const MAX_TOKENS_CAP: u64 = 1_000_000;
/// Most entries in `low_power_routes`.
pub const MAX_ROUTES: usize = 200;
/// Charge that must be regained above `battery_below_percent` before the battery rule releases.
pub const BATTERY_HYSTERESIS_PERCENT: f64 = 5.0;

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            auto: true,
            threshold_w: None,
            hysteresis_w: DEFAULT_HYSTERESIS_W,
            engage_after_s: DEFAULT_ENGAGE_AFTER_S,
            release_after_s: DEFAULT_RELEASE_AFTER_S,
            on_battery: false,
            battery_below_percent: None,
            above_price: None,
            model: DEFAULT_MODEL.to_string(),
            min_accuracy: crate::eval::best::DEFAULT_MIN_ACCURACY,
            max_itl_ms: None,
            os_power_mode: false,
            action: LowPowerAction::Advise,
            routes: BTreeMap::new(),
            max_tokens: None,
            unload_idle: false,
        }
    }
}

/// A model name as servers take it: not blank, no control characters, at most 200 bytes.
fn is_model_name(name: &str) -> bool {
    !name.trim().is_empty() && name.len() <= 200 && !name.chars().any(char::is_control)
}

fn invalid(field: &'static str, message: String) -> Error {
    Error::Invalid { field, message }
}

impl PolicyConfig {
    /// Checks every field; returns the first problem, named by its preference key.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(t) = self.threshold_w {
            if !t.is_finite() || t <= 0.0 || t > MAX_THRESHOLD_W {
                return Err(invalid(
                    "low_power_threshold_w",
                    format!("{t} W is not between 0 and {MAX_THRESHOLD_W} W (or null: the machine's rest + 50 %)"),
                ));
            }
        }
        let h = self.hysteresis_w;
        if !h.is_finite() || h < 0.0 || self.threshold_w.is_some_and(|t| h >= t) {
            return Err(invalid(
                "low_power_hysteresis_w",
                format!(
                    "{h} W must be at least 0 and below the threshold ({} W)",
                    self.threshold_w.unwrap_or(f64::NAN)
                ),
            ));
        }
        for (field, v) in [
            ("low_power_engage_after_s", self.engage_after_s),
            ("low_power_release_after_s", self.release_after_s),
        ] {
            if !v.is_finite() || !(0.0..=MAX_DELAY_S).contains(&v) {
                return Err(invalid(
                    field,
                    format!("{v} s is not between 0 s and one day"),
                ));
            }
        }
        if let Some(p) = self.battery_below_percent {
            if !p.is_finite() || !(1.0..=99.0).contains(&p) {
                return Err(invalid(
                    "low_power_battery_below_percent",
                    format!("{p} % is not between 1 and 99 %"),
                ));
            }
        }
        if let Some(p) = self.above_price {
            let max = crate::tariff::MAX_PRICE_PER_KWH;
            if !(p.is_finite() && (-max..=max).contains(&p)) {
                return Err(invalid(
                    "low_power_above_price",
                    format!("{p} per kWh is not a price of one kWh"),
                ));
            }
        }
        if !is_model_name(&self.model) {
            return Err(invalid(
                "low_power_model",
                "enter a model name such as qwen3:1b".to_string(),
            ));
        }
        if !(self.min_accuracy.is_finite() && (0.0..=1.0).contains(&self.min_accuracy)) {
            return Err(invalid(
                "low_power_min_accuracy",
                format!("{} is not a fraction between 0 and 1", self.min_accuracy),
            ));
        }
        if let Some(ms) = self.max_itl_ms {
            if !(ms.is_finite() && ms > 0.0 && ms <= 60_000.0) {
                return Err(invalid(
                    "low_power_max_itl_ms",
                    format!("{ms} ms is not between 0 and 60000 ms"),
                ));
            }
        }
        if self.routes.len() > MAX_ROUTES {
            return Err(invalid(
                "low_power_routes",
                format!("{} routes; at most {MAX_ROUTES}", self.routes.len()),
            ));
        }
        for (from, to) in &self.routes {
            if !(from == "*" || is_model_name(from)) || !is_model_name(to) {
                return Err(invalid(
                    "low_power_routes",
                    format!(
                        "{from:?} → {to:?}: map model names to model names, such as \
                         {{\"llama3.1:70b\": \"llama3.2:3b\", \"*\": \"qwen3:1b\"}}"
                    ),
                ));
            }
        }
        if let Some(n) = self.max_tokens {
            if !(1..=MAX_TOKENS_CAP).contains(&n) {
                return Err(invalid(
                    "low_power_max_tokens",
                    format!("{n} is not between 1 and {MAX_TOKENS_CAP} tokens"),
                ));
            }
        }
        Ok(())
    }

    /// Whether the low-power model is chosen from the profiles kept ([`AUTO_MODEL`]).
    pub fn auto_model(&self) -> bool {
        self.model.trim() == AUTO_MODEL
    }

    /// What a model chosen for `low_power_model: "auto"` must meet.
    pub fn targets(&self) -> crate::eval::best::Targets {
        crate::eval::best::Targets {
            min_accuracy: self.min_accuracy,
            by_lower_bound: true,
            max_itl_seconds: self.max_itl_ms.map(|ms| ms / 1000.0),
            eval: None,
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

/// What a router should do, as one sentence per score band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The model to switch to; `None` while `low_power_model` is `auto` and no profiled model is
    /// good enough (routers then keep the model asked for).
    pub recommended_model: Option<String>,
    /// Mean score 0–10 of the last records; `None` until inference data arrives.
    pub score: Option<f64>,
    /// The raw figure the score is made from, always given beside it.
    pub tokens_per_second_per_watt: Option<f64>,
    /// The model with the most tokens/s per W measured on this machine.
    pub most_efficient_model: Option<String>,
    pub recommendation: String,
}

/// What the inference ledger measured, for the advice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub score: Option<f64>,
    pub tokens_per_second_per_watt: Option<f64>,
    pub most_efficient_model: Option<String>,
    /// The cheapest model good enough by the profiles kept, for [`AUTO_MODEL`]: the model, and
    /// the evaluation it was profiled on; `None` where none meets the targets.
    pub good_enough: Option<(String, String)>,
}

pub const NO_INFERENCE_DATA: &str = "No inference data yet.";

/// Advice for the current state and what inference measured. The bands use the mean score of
/// the last records; the model to switch to is the configured low-power model, or with
/// [`AUTO_MODEL`] the one the profiles chose (none, and a sentence saying why, while none is
/// good enough).
pub fn advice(config: &PolicyConfig, state: &LowPowerState, measured: &Measured) -> Advice {
    let score = measured.score.filter(|s| s.is_finite());
    let model = match (config.auto_model(), &measured.good_enough) {
        (false, _) => config.model.trim().to_string(),
        (true, Some((model, _))) => model.clone(),
        (true, None) => {
            return Advice {
                recommended_model: None,
                score,
                tokens_per_second_per_watt: measured.tokens_per_second_per_watt,
                most_efficient_model: measured.most_efficient_model.clone(),
                recommendation: format!(
                    "No profiled model is good enough yet (accuracy at least {:.0} %): profile \
                     your models with `wattbar-cli profile`, and see `wattbar-cli models --best`.",
                    config.min_accuracy * 100.0
                ),
            }
        }
    };
    let chosen = match &measured.good_enough {
        Some((_, eval)) if config.auto_model() => {
            format!(" ({model} is the cheapest model good enough on {eval})")
        }
        _ => String::new(),
    };
    let recommendation = match score {
        None if state.enabled => {
            format!("Low-power mode is on: route requests to {model}. {NO_INFERENCE_DATA}")
        }
        None => NO_INFERENCE_DATA.to_string(),
        Some(s) if s >= 8.0 => format!(
            "Efficiency {s:.1}/10: excellent; the current model is a good use of power."
        ),
        Some(s) if s >= 5.0 => {
            format!("Efficiency {s:.1}/10: good; switch to {model} only when power matters more than quality.")
        }
        Some(s) if s >= 2.0 => format!(
            "Efficiency {s:.1}/10: fair; {model} would answer for less energy per token."
        ),
        Some(s) => format!(
            "Efficiency {s:.1}/10: poor; switch to {model}, the current model spends a lot of power per token."
        ),
    };
    Advice {
        recommendation: format!("{recommendation}{chosen}"),
        recommended_model: Some(model),
        score,
        tokens_per_second_per_watt: measured.tokens_per_second_per_watt,
        most_efficient_model: measured.most_efficient_model.clone(),
    }
}

/// A price per kWh to four places, without trailing zeros: `0.42`, `0.3512`.
fn per_kwh(p: f64) -> String {
    let text = format!("{p:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Stamp {
        Stamp::new(Duration::from_secs(s), 1_700_000_000.0 + s as f64)
    }

    /// The settings with the threshold set at 15 W.
    fn fifteen() -> PolicyConfig {
        PolicyConfig {
            threshold_w: Some(15.0),
            ..PolicyConfig::default()
        }
    }

    fn policy() -> Policy {
        Policy::new(fifteen(), LowPowerState::off())
    }

    #[test]
    fn with_no_watts_set_a_desktop_at_100_w_engages_at_its_rest_plus_half_not_15_w() {
        let mut p = Policy::new(PolicyConfig::default(), LowPowerState::off());
        // Ten minutes at rest: learning, nothing engaged (15 W would have at 30 s).
        assert!(feed(&mut p, 0, 659, 100.0).is_empty());
        assert_eq!(p.rest_w(), Some(100.0));
        assert_eq!(p.threshold_w(), Some(150.0));
        // 140 W for a minute is below 150 W.
        assert!(feed(&mut p, 660, 720, 140.0).is_empty());
        // 200 W for 30 s engages, and says where the threshold came from.
        let on = feed(&mut p, 721, 760, 200.0);
        assert_eq!(on.len(), 1, "{on:?}");
        assert_eq!(on[0].0, 751);
        assert!(
            on[0]
                .1
                .message
                .contains("above 150 W (the machine's rest of 100 W"),
            "{}",
            on[0].1.message
        );
        // Released below 150 − 3 W for 30 s.
        let off = feed(&mut p, 761, 800, 100.0);
        assert_eq!(off.len(), 1, "{off:?}");
        assert!(
            off[0].1.message.contains("below 147 W"),
            "{}",
            off[0].1.message
        );
    }

    /// Feeds `watts` once a second from `from` to `to` inclusive; returns the transitions.
    fn feed(p: &mut Policy, from: u64, to: u64, watts: f64) -> Vec<(u64, Transition)> {
        (from..=to)
            .filter_map(|s| {
                p.observe(at(s), Some(Watts(watts)), None, None)
                    .map(|t| (s, t))
            })
            .collect()
    }

    #[test]
    fn sustained_draw_above_threshold_engages_after_the_duration() {
        let mut p = policy();
        let t = feed(&mut p, 0, 40, 20.0);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, 30, "engages once 30 s have passed above 15 W");
        assert_eq!(t[0].1.state.reason, Some(Reason::AutoThreshold));
        assert_eq!(t[0].1.message, "Low-power mode on: above 15 W for 30 s");
        assert_eq!(p.state().since, Some(1_700_000_030.0));
    }

    #[test]
    fn a_dip_below_threshold_restarts_the_engage_timer() {
        let mut p = policy();
        assert!(feed(&mut p, 0, 20, 20.0).is_empty());
        assert!(feed(&mut p, 21, 21, 14.0).is_empty());
        let t = feed(&mut p, 22, 60, 20.0);
        assert_eq!(t[0].0, 52);
    }

    #[test]
    fn release_needs_the_hysteresis_band_and_the_duration() {
        let mut p = policy();
        feed(&mut p, 0, 30, 20.0);
        assert!(p.state().enabled);
        // 13 W is under the threshold but not under 15 − 3 = 12 W: it stays on.
        assert!(feed(&mut p, 31, 200, 13.0).is_empty());
        let t = feed(&mut p, 201, 300, 10.0);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].0, 231);
        assert!(!t[0].1.state.enabled);
        assert_eq!(t[0].1.message, "Low-power mode off: below 12 W for 30 s");
    }

    #[test]
    fn manual_engage_survives_a_low_trace() {
        let mut p = policy();
        let t = p.set_manual(true, at(0)).map(|t| t.state);
        assert_eq!(
            t,
            Some(LowPowerState {
                enabled: true,
                since: Some(1_700_000_000.0),
                reason: Some(Reason::Manual)
            })
        );
        assert!(feed(&mut p, 1, 600, 2.0).is_empty());
        assert!(p.state().enabled);
    }

    #[test]
    fn manual_on_while_auto_engaged_makes_it_stay() {
        let mut p = policy();
        feed(&mut p, 0, 30, 20.0);
        let t = p.set_manual(true, at(31)).map(|t| t.state);
        assert_eq!(t.as_ref().map(|s| s.since), Some(Some(1_700_000_030.0)));
        assert!(feed(&mut p, 32, 600, 2.0).is_empty());
    }

    #[test]
    fn manual_off_is_not_undone_by_the_same_high_draw() {
        let mut p = policy();
        feed(&mut p, 0, 30, 20.0);
        assert!(p.set_manual(false, at(31)).is_some());
        assert!(feed(&mut p, 32, 600, 20.0).is_empty(), "stays off");
        // Once the draw has been low, a new high period engages again.
        feed(&mut p, 601, 610, 5.0);
        let t = feed(&mut p, 611, 700, 20.0);
        assert_eq!(t[0].0, 641);
    }

    #[test]
    fn missing_watts_is_no_evidence() {
        let mut p = policy();
        feed(&mut p, 0, 20, 20.0);
        assert!(p.observe(at(21), None, None, None).is_none());
        let t = feed(&mut p, 22, 60, 20.0);
        assert_eq!(t[0].0, 52, "the hole restarted the timer");
        assert!(p
            .observe(at(61), Some(Watts(f64::NAN)), None, None)
            .is_none());
    }

    #[test]
    fn auto_off_never_engages() {
        let mut p = Policy::new(
            PolicyConfig {
                auto: false,
                ..fifteen()
            },
            LowPowerState::off(),
        );
        assert!(feed(&mut p, 0, 600, 100.0).is_empty());
    }

    #[test]
    fn battery_rule_engages_at_once_and_releases_on_mains() {
        let mut p = Policy::new(
            PolicyConfig {
                on_battery: true,
                ..fifteen()
            },
            LowPowerState::off(),
        );
        let on_batt = Some(Battery {
            on_battery: true,
            percent: Some(80.0),
        });
        let t = p.observe(at(0), Some(Watts(5.0)), on_batt, None);
        assert_eq!(
            t.map(|t| (t.state.reason, t.message)),
            Some((
                Some(Reason::Battery),
                "Low-power mode on: running on battery".to_string()
            ))
        );
        assert!(p.observe(at(1), Some(Watts(5.0)), on_batt, None).is_none());
        // The low draw does not release a battery engagement.
        assert!(feed(&mut p, 2, 100, 1.0).is_empty());
        let mains = Some(Battery {
            on_battery: false,
            percent: Some(80.0),
        });
        let t = p.observe(at(101), Some(Watts(5.0)), mains, None);
        assert_eq!(t.map(|t| t.state.enabled), Some(false));
    }

    #[test]
    fn a_price_above_the_limit_engages_until_it_falls_back_and_a_manual_choice_stands() {
        // Above 0.35 per kWh: 0.30 leaves it off, 0.42 turns it on, 0.35 turns it off again.
        let mut p = Policy::new(
            PolicyConfig {
                above_price: Some(0.35),
                ..fifteen()
            },
            LowPowerState::off(),
        );
        assert!(p.observe(at(0), None, None, Some(0.30)).is_none());
        let on = p.observe(at(1), None, None, Some(0.42));
        assert_eq!(
            on.as_ref().map(|t| (t.state.enabled, t.state.reason)),
            Some((true, Some(Reason::Price)))
        );
        assert_eq!(
            on.map(|t| t.message).as_deref(),
            Some("Low-power mode on: a kWh costs 0.42, above 0.35")
        );
        assert!(
            p.observe(at(2), None, None, None).is_none(),
            "unknown decides nothing"
        );
        assert!(p.observe(at(3), None, None, Some(0.50)).is_none());
        let off = p.observe(at(4), None, None, Some(0.35));
        assert_eq!(off.map(|t| t.state.enabled), Some(false));
        // Switched on by hand, a cheap slot does not switch it off.
        p.set_manual(true, at(5));
        assert!(p.observe(at(6), None, None, Some(0.10)).is_none());
        assert!(PolicyConfig {
            above_price: Some(f64::NAN),
            ..fifteen()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn battery_below_percent_engages_and_needs_five_points_to_release() {
        let mut p = Policy::new(
            PolicyConfig {
                battery_below_percent: Some(20.0),
                ..fifteen()
            },
            LowPowerState::off(),
        );
        let b = |pct| {
            Some(Battery {
                on_battery: true,
                percent: Some(pct),
            })
        };
        assert!(p.observe(at(0), None, b(25.0), None).is_none());
        let t = p.observe(at(1), None, b(19.0), None);
        assert_eq!(
            t.map(|t| t.message),
            Some("Low-power mode on: battery at 19 %".to_string())
        );
        assert!(
            p.observe(at(2), None, b(22.0), None).is_none(),
            "inside the band"
        );
        assert_eq!(
            p.observe(at(3), None, b(25.0), None)
                .map(|t| t.state.enabled),
            Some(false)
        );
    }

    #[test]
    fn restored_manual_state_is_kept() {
        let restored = LowPowerState {
            enabled: true,
            since: Some(1.0),
            reason: Some(Reason::Manual),
        };
        let mut p = Policy::new(fifteen(), restored.clone());
        assert!(feed(&mut p, 0, 100, 1.0).is_empty());
        assert_eq!(p.state(), &restored);
    }

    #[test]
    fn validation_names_the_field() {
        let bad = |c: PolicyConfig| match c.validate() {
            Err(Error::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let d = fifteen;
        assert_eq!(
            bad(PolicyConfig {
                threshold_w: Some(f64::NAN),
                ..d()
            }),
            "low_power_threshold_w"
        );
        assert_eq!(
            bad(PolicyConfig {
                hysteresis_w: 15.0,
                ..d()
            }),
            "low_power_hysteresis_w"
        );
        assert_eq!(
            bad(PolicyConfig {
                engage_after_s: -1.0,
                ..d()
            }),
            "low_power_engage_after_s"
        );
        assert_eq!(
            bad(PolicyConfig {
                battery_below_percent: Some(0.0),
                ..d()
            }),
            "low_power_battery_below_percent"
        );
        assert_eq!(
            bad(PolicyConfig {
                model: " ".into(),
                ..d()
            }),
            "low_power_model"
        );
        assert!(d().validate().is_ok());
    }

    #[test]
    fn auto_advises_the_model_the_profiles_chose_and_says_why_none_when_none() {
        let c = PolicyConfig {
            model: AUTO_MODEL.into(),
            min_accuracy: 0.7,
            ..fifteen()
        };
        assert!(c.validate().is_ok());
        let off = LowPowerState::off();
        let none = advice(&c, &off, &Measured::default());
        assert_eq!(
            none.recommended_model, None,
            "never \"auto\" as a model's name"
        );
        assert!(
            none.recommendation
                .starts_with("No profiled model is good enough yet (accuracy at least 70 %)"),
            "{}",
            none.recommendation
        );
        let chosen = Measured {
            score: Some(3.0),
            good_enough: Some(("smollm2".into(), "gsm8k".into())),
            ..Measured::default()
        };
        let a = advice(&c, &off, &chosen);
        assert_eq!(a.recommended_model.as_deref(), Some("smollm2"));
        assert_eq!(
            a.recommendation,
            "Efficiency 3.0/10: fair; smollm2 would answer for less energy per token. (smollm2 \
             is the cheapest model good enough on gsm8k)"
        );
        // A named model is advised as it is, whatever the profiles chose.
        let named = advice(&fifteen(), &off, &chosen);
        assert_eq!(named.recommended_model.as_deref(), Some(DEFAULT_MODEL));
        assert!(!named.recommendation.contains("cheapest"));
        // Targets out of range are refused with the field.
        for bad in [-0.1, 1.5, f64::NAN] {
            let c = PolicyConfig {
                min_accuracy: bad,
                ..fifteen()
            };
            assert!(c.validate().is_err(), "{bad}");
        }
        let slow = PolicyConfig {
            max_itl_ms: Some(0.0),
            ..fifteen()
        };
        assert!(slow.validate().is_err());
        assert_eq!(c.targets().min_accuracy, 0.7);
    }

    #[test]
    fn advice_follows_the_score_bands() {
        let c = fifteen();
        let off = LowPowerState::off();
        let none = Measured::default();
        let score = |s: f64| Measured {
            score: Some(s),
            ..Measured::default()
        };
        assert_eq!(advice(&c, &off, &none).recommendation, NO_INFERENCE_DATA);
        assert_eq!(
            advice(&c, &off, &none).recommended_model.as_deref(),
            Some("qwen3:1b")
        );
        assert!(advice(&c, &off, &score(9.0))
            .recommendation
            .starts_with("Efficiency 9.0/10: excellent"));
        assert!(advice(&c, &off, &score(1.0))
            .recommendation
            .contains("poor; switch to qwen3:1b"));
        assert!(advice(&c, &off, &score(3.0))
            .recommendation
            .starts_with("Efficiency 3.0/10: fair"));
    }
}
