//! The low-power settings a person chooses, their defaults and bounds, and the check that
//! refuses a value outside them.

use super::*;

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
