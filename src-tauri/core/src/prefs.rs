//! The one validated preference schema, shared by the engine (which alone writes the file), the
//! app and the CLI.
//!
//! Every setter validates first and changes nothing when the value is refused, so a bad entry
//! never replaces a good one.

use crate::error::Error;
use crate::policy::{PolicyConfig, POLICY_KEYS};
use crate::tariff::{Price, TariffRule, Tariffs};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

pub mod feeds;
pub mod integrations;
pub mod server_metrics;
pub mod wall_meter;
pub use feeds::FeedPref;
pub use integrations::{MqttPref, OtlpPref};
pub use server_metrics::ServerMetricsPref;
pub use wall_meter::WallMeterPref;

/// An ISO 4217 currency code: three ASCII capital letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency(String);

impl Currency {
    pub fn parse(code: &str) -> Result<Self, Error> {
        let code = code.trim();
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Currency(code.to_string()))
        } else {
            Err(Error::Invalid {
                field: "currency",
                message: format!("{code:?} is not an ISO 4217 code such as EUR or USD"),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Currency {
    fn default() -> Self {
        Currency("EUR".to_string())
    }
}

impl TryFrom<String> for Currency {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        Currency::parse(&s)
    }
}

impl From<Currency> for String {
    fn from(c: Currency) -> String {
        c.0
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The pace while nobody looks and a counter keeps the energy exact.
pub const DEFAULT_REST_INTERVAL: Duration = Duration::from_secs(5);

/// [`Preferences::validate_interval`] for the pace at rest, named as such.
fn validate_rest_interval(ms: u64) -> Result<Duration, Error> {
    Preferences::validate_interval(ms).map_err(|e| match e {
        Error::Invalid { message, .. } => Error::Invalid {
            field: "rest_interval",
            message,
        },
        other => other,
    })
}

/// Everything a person can set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Preferences {
    pub price_per_kwh: Price,
    pub currency: Currency,
    /// When and how low-power mode engages. Its on/off state is not a preference: the engine
    /// keeps it in the store with the reason.
    #[serde(flatten)]
    pub low_power: PolicyConfig,
    /// Sampling interval in milliseconds, 100 ms – 60 s.
    pub interval_ms: u64,
    /// The slower interval while nobody looks and a counter keeps the energy exact, 100 ms –
    /// 60 s; no slower than `interval_ms` takes effect.
    pub rest_interval_ms: u64,
    /// Time-of-use rules over `price_per_kwh`.
    pub tariffs: Vec<TariffRule>,
    /// Grid carbon intensity, gCO₂ per kWh, when known; the carbon feed's fallback.
    pub carbon_g_per_kwh: Option<f64>,
    /// Prices by the slot ([`feeds`]); `None`: the fixed price and its rules alone, which are
    /// also the fallback where the feed has no price.
    pub price_feed: Option<FeedPref>,
    /// Grid intensity by the slot ([`feeds`]); `None`: `carbon_g_per_kwh` alone.
    pub carbon_feed: Option<FeedPref>,
    /// Notify when the price feed's price in force crosses this, per kWh (up and back).
    pub price_notify_above: Option<f64>,
    pub daily_budget_kwh: Option<f64>,
    pub daily_budget_cost: Option<f64>,
    pub monthly_budget_kwh: Option<f64>,
    pub monthly_budget_cost: Option<f64>,
    /// Show the watts in the menu bar only while the draw is above this; `None`: always.
    pub title_above_w: Option<f64>,
    /// Show the session cost next to the watts in the menu bar.
    pub cost_in_menu_bar: bool,
    pub launch_at_login: bool,
    /// Serve the local HTTP API from the tray app too.
    pub api_enabled: bool,
    /// Run the inference proxy in the tray app (clients point at `llm_proxy_listen`).
    pub llm_proxy_enabled: bool,
    /// Where the proxy listens, `host:port`.
    pub llm_proxy_listen: String,
    /// The model server, `http://host:port`; `None`: `OLLAMA_HOST`, else 127.0.0.1:11434.
    pub llm_upstream: Option<String>,
    /// The proxy answers 401 to a generation request without a key it issued
    /// ([`keys`](crate::keys)); `false`: a request without one goes as before.
    pub keys_required: bool,
    /// Tokens per second per watt that score 10.
    pub score_ceiling: f64,
    /// Days inference records are kept (the figures per model keep everything).
    pub inference_keep_days: u32,
    /// The smart plug the machine is plugged into ([`wall_meter`]); `None`: none.
    pub wall_meter: Option<WallMeterPref>,
    /// Where the signed release manifest is read to say whether a newer release exists, an
    /// `http(s)://` URL; `None` (the default): never asked.
    pub update_manifest_url: Option<String>,
    /// Publish to an MQTT broker with Home Assistant discovery ([`integrations`]); `None`: not.
    pub mqtt: Option<MqttPref>,
    /// Push OpenTelemetry metrics to a collector ([`integrations`]); `None`: not.
    pub otlp: Option<OtlpPref>,
    /// Model servers followed by their own `/metrics` ([`server_metrics`]).
    pub server_metrics: Vec<ServerMetricsPref>,
    /// Follow by themselves the model servers this machine runs: the loopback ports that
    /// processes named like one (`llama-server`, `vllm`, …) listen on are asked for `/metrics`.
    pub find_model_servers: bool,
}

/// Inference records are kept this many days by default, and at most [`MAX_KEEP_DAYS`].
pub const DEFAULT_INFERENCE_KEEP_DAYS: u32 = 90;
pub const MAX_KEEP_DAYS: u32 = 3650;

fn check_keep_days(days: u64) -> Result<u32, Error> {
    u32::try_from(days)
        .ok()
        .filter(|d| (1..=MAX_KEEP_DAYS).contains(d))
        .ok_or_else(|| Error::Invalid {
            field: "inference_keep_days",
            message: format!("{days} is not between 1 and {MAX_KEEP_DAYS} days"),
        })
}

/// A manifest URL is fetched over the network by `version --check` and the tray: only http(s).
fn check_manifest_url(url: Option<&str>) -> Result<(), Error> {
    match url {
        None => Ok(()),
        Some(u)
            if (u.starts_with("https://") || u.starts_with("http://"))
                && u.split("://").nth(1).is_some_and(|rest| !rest.is_empty())
                && !u.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        Some(u) => Err(Error::Invalid {
            field: "update_manifest_url",
            message: format!("{u:?} is not an http:// or https:// URL"),
        }),
    }
}

/// Tokens per second per watt that score 10 by default (0.2 J per token).
pub const DEFAULT_SCORE_CEILING: f64 = 5.0;
/// Where the tray app's inference proxy listens by default.
pub const DEFAULT_LLM_PROXY_LISTEN: &str = "127.0.0.1:11435";

/// The tray's proxy listens on this machine only (a loopback address), on a port clients can
/// be told: what it could not serve is refused here, not found out at start in a log.
fn check_listen(text: &str) -> Result<(), Error> {
    let invalid = |message: String| Error::Invalid {
        field: "llm_proxy_listen",
        message,
    };
    let addr = text.parse::<std::net::SocketAddr>().map_err(|_| {
        invalid(format!(
            "{text:?} is not an address such as 127.0.0.1:11435"
        ))
    })?;
    if !addr.ip().is_loopback() {
        return Err(invalid(format!(
            "{text:?} is not on this machine alone: the proxy listens on a loopback address \
             (127.0.0.1 or [::1]); `wattbar-cli serve --allow-remote` serves beyond it"
        )));
    }
    if addr.port() == 0 {
        return Err(invalid(format!(
            "{text:?} needs a port that clients can be told"
        )));
    }
    Ok(())
}

/// An `http://host[:port][/path]` the proxy can reach: a host, no spaces or control characters,
/// and a port from 1 to 65535.
fn check_upstream(text: Option<&str>) -> Result<(), Error> {
    let Some(t) = text else {
        return Ok(());
    };
    let invalid = || Error::Invalid {
        field: "llm_upstream",
        message: format!("{t:?} is not an http:// address such as http://127.0.0.1:11434"),
    };
    let rest = t.strip_prefix("http://").ok_or_else(invalid)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if t.chars().any(|c| c.is_whitespace() || c.is_control()) || authority.contains('@') {
        return Err(invalid());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && !p.contains(']') => (h, Some(p)),
        _ => (authority, None),
    };
    let host_ok = match host.strip_prefix('[') {
        Some(v6) => v6
            .strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
        None => {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        }
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(invalid())
    }
}

fn check_ceiling(v: f64) -> Result<(), Error> {
    if v.is_finite() && v > 0.0 && v <= 1000.0 {
        Ok(())
    } else {
        Err(Error::Invalid {
            field: "score_ceiling",
            message: format!("{v} is not between 0 and 1000 tokens/s per W"),
        })
    }
}

pub use crate::slots::MAX_CARBON_G_PER_KWH;

fn positive(field: &'static str, v: Option<f64>) -> Result<Option<f64>, Error> {
    match v {
        Some(x) if !x.is_finite() || x <= 0.0 => Err(Error::Invalid {
            field,
            message: format!("{x} must be a positive number"),
        }),
        other => Ok(other),
    }
}

impl Default for Preferences {
    fn default() -> Self {
        Preferences {
            price_per_kwh: Price::default(),
            currency: Currency::default(),
            low_power: PolicyConfig::default(),
            interval_ms: DEFAULT_INTERVAL.as_millis() as u64,
            rest_interval_ms: DEFAULT_REST_INTERVAL.as_millis() as u64,
            tariffs: Vec::new(),
            carbon_g_per_kwh: None,
            price_feed: None,
            carbon_feed: None,
            price_notify_above: None,
            daily_budget_kwh: None,
            daily_budget_cost: None,
            monthly_budget_kwh: None,
            monthly_budget_cost: None,
            title_above_w: None,
            cost_in_menu_bar: false,
            launch_at_login: false,
            api_enabled: true,
            llm_proxy_enabled: true,
            llm_proxy_listen: DEFAULT_LLM_PROXY_LISTEN.to_string(),
            llm_upstream: None,
            keys_required: false,
            score_ceiling: DEFAULT_SCORE_CEILING,
            inference_keep_days: DEFAULT_INFERENCE_KEEP_DAYS,
            wall_meter: None,
            update_manifest_url: None,
            mqtt: None,
            otlp: None,
            server_metrics: Vec::new(),
            find_model_servers: true,
        }
    }
}

impl Preferences {
    /// The stored keys besides the low-power ones ([`POLICY_KEYS`]).
    const OWN_KEYS: [&'static str; 29] = [
        "price_per_kwh",
        "currency",
        "interval_ms",
        "rest_interval_ms",
        "tariffs",
        "carbon_g_per_kwh",
        "price_feed",
        "carbon_feed",
        "price_notify_above",
        "daily_budget_kwh",
        "daily_budget_cost",
        "monthly_budget_kwh",
        "monthly_budget_cost",
        "title_above_w",
        "cost_in_menu_bar",
        "launch_at_login",
        "api_enabled",
        "llm_proxy_enabled",
        "llm_proxy_listen",
        "llm_upstream",
        "keys_required",
        "score_ceiling",
        "inference_keep_days",
        "wall_meter",
        "update_manifest_url",
        "mqtt",
        "otlp",
        "server_metrics",
        "find_model_servers",
    ];

    /// Every stored key, as [`Preferences::set_field`] takes it and serde writes it.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        Self::OWN_KEYS.into_iter().chain(POLICY_KEYS)
    }

    pub fn is_key(key: &str) -> bool {
        Self::keys().any(|k| k == key)
    }

    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The pace at rest: `rest_interval_ms`, never faster than [`Preferences::interval`].
    pub fn rest_interval(&self) -> Duration {
        Duration::from_millis(self.rest_interval_ms).max(self.interval())
    }

    pub fn validate_interval(ms: u64) -> Result<Duration, Error> {
        let d = Duration::from_millis(ms);
        if d < MIN_INTERVAL || d > MAX_INTERVAL {
            return Err(Error::Invalid {
                field: "interval",
                message: format!("{ms} ms is outside 100 ms – 60 s"),
            });
        }
        Ok(d)
    }

    /// Checks every field; returns the first problem.
    pub fn validate(&self) -> Result<(), Error> {
        Preferences::validate_interval(self.interval_ms)?;
        validate_rest_interval(self.rest_interval_ms)?;
        self.tariff_schedule()?;
        Preferences::validate_carbon(self.carbon_g_per_kwh)?;
        positive("daily_budget_kwh", self.daily_budget_kwh)?;
        positive("daily_budget_cost", self.daily_budget_cost)?;
        positive("monthly_budget_kwh", self.monthly_budget_kwh)?;
        positive("monthly_budget_cost", self.monthly_budget_cost)?;
        positive("title_above_w", self.title_above_w)?;
        self.low_power.validate()?;
        check_listen(&self.llm_proxy_listen)?;
        check_upstream(self.llm_upstream.as_deref())?;
        check_ceiling(self.score_ceiling)?;
        check_keep_days(u64::from(self.inference_keep_days))?;
        check_manifest_url(self.update_manifest_url.as_deref())?;
        Ok(())
    }

    /// The price schedule: the default price with the time-of-use rules over it.
    pub fn tariff_schedule(&self) -> Result<Tariffs, Error> {
        Tariffs::new(self.price_per_kwh, self.tariffs.clone())
    }

    pub fn validate_carbon(v: Option<f64>) -> Result<Option<f64>, Error> {
        match v {
            Some(x) if !x.is_finite() || !(0.0..=MAX_CARBON_G_PER_KWH).contains(&x) => {
                Err(Error::Invalid {
                    field: "carbon_g_per_kwh",
                    message: format!("{x} is not between 0 and {MAX_CARBON_G_PER_KWH} g/kWh"),
                })
            }
            other => Ok(other),
        }
    }

    /// Sets one stored field after validating it. Unknown keys are ignored (a newer version may
    /// have written them); a refused value leaves the field as it was.
    pub fn set_field(&mut self, key: &str, value: &serde_json::Value) -> Result<(), Error> {
        fn wrong(field: &'static str, want: &str, value: &serde_json::Value) -> Error {
            Error::Invalid {
                field,
                message: format!("{value} is not {want}"),
            }
        }
        match key {
            "price_per_kwh" => {
                let v = value
                    .as_f64()
                    .ok_or_else(|| wrong("price", "a number", value))?;
                self.price_per_kwh = Price::new(v)?;
            }
            "currency" => {
                let v = value
                    .as_str()
                    .ok_or_else(|| wrong("currency", "a string", value))?;
                self.currency = Currency::parse(v)?;
            }
            k if POLICY_KEYS.contains(&k) => {
                let field = POLICY_KEYS
                    .iter()
                    .find(|f| **f == k)
                    .copied()
                    .unwrap_or("low_power");
                let mut all =
                    serde_json::to_value(&self.low_power).map_err(|e| Error::Invalid {
                        field,
                        message: e.to_string(),
                    })?;
                if let Some(map) = all.as_object_mut() {
                    map.insert(k.to_string(), value.clone());
                }
                let next: PolicyConfig =
                    serde_json::from_value(all).map_err(|_| wrong(field, kind_of(k), value))?;
                next.validate()?;
                self.low_power = next;
            }
            "title_above_w" => {
                self.title_above_w =
                    positive("title_above_w", optional_number("title_above_w", value)?)?;
            }
            "cost_in_menu_bar" | "launch_at_login" | "api_enabled" | "llm_proxy_enabled"
            | "find_model_servers" | "keys_required" => {
                let field = match key {
                    "keys_required" => "keys_required",
                    "cost_in_menu_bar" => "cost_in_menu_bar",
                    "launch_at_login" => "launch_at_login",
                    "llm_proxy_enabled" => "llm_proxy_enabled",
                    "find_model_servers" => "find_model_servers",
                    _ => "api_enabled",
                };
                let v = value
                    .as_bool()
                    .ok_or_else(|| wrong(field, "true or false", value))?;
                match key {
                    "cost_in_menu_bar" => self.cost_in_menu_bar = v,
                    "launch_at_login" => self.launch_at_login = v,
                    "llm_proxy_enabled" => self.llm_proxy_enabled = v,
                    "find_model_servers" => self.find_model_servers = v,
                    "keys_required" => self.keys_required = v,
                    _ => self.api_enabled = v,
                }
            }
            "llm_proxy_listen" => {
                let v = value
                    .as_str()
                    .ok_or_else(|| wrong("llm_proxy_listen", "a string", value))?
                    .trim();
                check_listen(v)?;
                self.llm_proxy_listen = v.to_string();
            }
            "llm_upstream" => {
                let v = match value {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) if s.trim().is_empty() => None,
                    serde_json::Value::String(s) => {
                        Some(s.trim().trim_end_matches('/').to_string())
                    }
                    _ => return Err(wrong("llm_upstream", "a string or null", value)),
                };
                check_upstream(v.as_deref())?;
                self.llm_upstream = v;
            }
            "wall_meter" => {
                self.wall_meter = WallMeterPref::parse(value, self.wall_meter.as_ref())?;
            }
            "mqtt" => {
                self.mqtt = MqttPref::parse(value, self.mqtt.as_ref())?;
            }
            "price_feed" => {
                self.price_feed = FeedPref::parse_price(value, self.price_feed.as_ref())?;
            }
            "carbon_feed" => {
                self.carbon_feed = FeedPref::parse_carbon(value, self.carbon_feed.as_ref())?;
            }
            "price_notify_above" => {
                let v = optional_number("price_notify_above", value)?;
                let max = crate::tariff::MAX_PRICE_PER_KWH;
                if let Some(p) = v.filter(|p| !(p.is_finite() && (-max..=max).contains(p))) {
                    return Err(Error::Invalid {
                        field: "price_notify_above",
                        message: format!("{p} per kWh is not a price of one kWh"),
                    });
                }
                self.price_notify_above = v;
            }
            "otlp" => {
                self.otlp = OtlpPref::parse(value, self.otlp.as_ref())?;
            }
            "server_metrics" => {
                self.server_metrics = ServerMetricsPref::parse(value, &self.server_metrics)?;
            }
            "update_manifest_url" => {
                let v = match value {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) if s.trim().is_empty() => None,
                    serde_json::Value::String(s) => Some(s.trim().to_string()),
                    _ => return Err(wrong("update_manifest_url", "a URL or null", value)),
                };
                check_manifest_url(v.as_deref())?;
                self.update_manifest_url = v;
            }
            "score_ceiling" => {
                let v = value
                    .as_f64()
                    .ok_or_else(|| wrong("score_ceiling", "a number", value))?;
                check_ceiling(v)?;
                self.score_ceiling = v;
            }
            "inference_keep_days" => {
                let days = value
                    .as_u64()
                    .ok_or_else(|| wrong("inference_keep_days", "a whole number of days", value))?;
                self.inference_keep_days = check_keep_days(days)?;
            }
            "interval_ms" => {
                let ms = value
                    .as_u64()
                    .ok_or_else(|| wrong("interval", "a whole number of ms", value))?;
                Preferences::validate_interval(ms)?;
                self.interval_ms = ms;
            }
            "rest_interval_ms" => {
                let ms = value
                    .as_u64()
                    .ok_or_else(|| wrong("rest_interval", "a whole number of ms", value))?;
                validate_rest_interval(ms)?;
                self.rest_interval_ms = ms;
            }
            "tariffs" => {
                let rules: Vec<TariffRule> =
                    serde_json::from_value(value.clone()).map_err(|e| Error::Invalid {
                        field: "tariffs",
                        message: e.to_string(),
                    })?;
                Tariffs::new(self.price_per_kwh, rules.clone())?;
                self.tariffs = rules;
            }
            "carbon_g_per_kwh" => {
                let v = optional_number("carbon_g_per_kwh", value)?;
                self.carbon_g_per_kwh = Preferences::validate_carbon(v)?;
            }
            "daily_budget_kwh" => {
                self.daily_budget_kwh = positive(
                    "daily_budget_kwh",
                    optional_number("daily_budget_kwh", value)?,
                )?;
            }
            "daily_budget_cost" => {
                self.daily_budget_cost = positive(
                    "daily_budget_cost",
                    optional_number("daily_budget_cost", value)?,
                )?;
            }
            "monthly_budget_kwh" => {
                self.monthly_budget_kwh = positive(
                    "monthly_budget_kwh",
                    optional_number("monthly_budget_kwh", value)?,
                )?;
            }
            "monthly_budget_cost" => {
                self.monthly_budget_cost = positive(
                    "monthly_budget_cost",
                    optional_number("monthly_budget_cost", value)?,
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Builds preferences from stored key/value pairs one field at a time, so a bad value costs
    /// only itself: it keeps its default and is returned as a problem to show.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a serde_json::Value)>,
    ) -> (Preferences, Vec<Error>) {
        let mut prefs = Preferences::default();
        let problems = entries
            .into_iter()
            .filter_map(|(k, v)| prefs.set_field(k, v).err())
            .collect();
        (prefs, problems)
    }
}

/// What a policy key takes, for the message when a value has the wrong type.
fn kind_of(key: &str) -> &'static str {
    match key {
        "low_power_auto"
        | "low_power_on_battery"
        | "os_power_mode"
        | "unload_idle_models_in_low_power" => "true or false",
        "low_power_model" => "a model name",
        "low_power_action" => "\"advise\" or \"route\"",
        "low_power_routes" => "an object mapping model names to model names",
        "low_power_max_tokens" => "a whole number of tokens or null",
        "low_power_battery_below_percent" => "a percentage or null",
        "low_power_above_price" => "a price per kWh or null",
        "low_power_min_accuracy" => "a fraction between 0 and 1",
        "low_power_max_itl_ms" => "a number of milliseconds or null",
        _ => "a number",
    }
}

fn optional_number(field: &'static str, value: &serde_json::Value) -> Result<Option<f64>, Error> {
    if value.is_null() {
        return Ok(None);
    }
    value.as_f64().map(Some).ok_or_else(|| Error::Invalid {
        field,
        message: format!("{value} is not a number"),
    })
}

/// Parses a duration: a bare number is seconds (`5` is 5 s, `0.25` is 250 ms), anything else
/// is `humantime`'s notation (`500ms`, `1s`, `2m`, `1h 30m`, `7d`). Zero, negative and
/// non-finite durations are refused.
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let t = text.trim();
    let bad = |why: String| Error::Invalid {
        field: "duration",
        message: format!("{t:?} is not a duration such as 5 (seconds), 500ms, 2m or 1h 30m: {why}"),
    };
    if t.starts_with('-') {
        return Err(bad(
            "it is negative; a span counts forward and must be above zero".into(),
        ));
    }
    let d = match t.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|e| bad(e.to_string()))?
        }
        Ok(_) => return Err(bad("it must be above zero".into())),
        Err(_) => humantime::parse_duration(t).map_err(|e| bad(e.to_string()))?,
    };
    if d.is_zero() {
        return Err(bad("it must be above zero".into()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_field_accepts_dots_commas_and_spaces() {
        assert_eq!(Price::parse_input("0.25").map(Price::per_kwh), Ok(0.25));
        assert_eq!(Price::parse_input(" 0,40 ").map(Price::per_kwh), Ok(0.40));
        assert_eq!(Price::parse_input("0").map(Price::per_kwh), Ok(0.0));
    }

    #[test]
    fn negative_empty_and_non_numeric_prices_are_refused_with_a_message() {
        for bad in ["-0.1", "", "  ", "abc", "NaN", "inf", "1e9"] {
            let err = Price::parse_input(bad).err();
            assert!(
                matches!(err, Some(Error::Invalid { field: "price", .. })),
                "{bad:?} gave {err:?}"
            );
        }
        let msg = Price::parse_input("-1").err().map(|e| e.to_string());
        assert_eq!(msg.as_deref(), Some("price: cannot be negative"));
    }

    #[test]
    fn only_addresses_the_tray_can_use_are_taken_for_the_proxy() {
        let mut p = Preferences::default();
        for ok in [
            "http://127.0.0.1:11434",
            "http://localhost:8080/v1",
            "http://[::1]:9000",
            "http://gpu-box.lan",
        ] {
            assert!(
                p.set_field("llm_upstream", &serde_json::json!(ok)).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://a b",
            "http://127.0.0.1:99999",
            "http://127.0.0.1:0",
            "http://",
            "http://:8080",
            "https://127.0.0.1:11434",
            "http://user@host:1",
            "http://[::1:80",
        ] {
            let err = p.set_field("llm_upstream", &serde_json::json!(bad)).err();
            assert!(
                matches!(
                    err,
                    Some(Error::Invalid {
                        field: "llm_upstream",
                        ..
                    })
                ),
                "{bad:?} gave {err:?}"
            );
        }
        assert!(p
            .set_field("llm_proxy_listen", &serde_json::json!("[::1]:11435"))
            .is_ok());
        for bad in [
            "0.0.0.0:11435",
            "192.168.1.2:11435",
            "127.0.0.1:0",
            "localhost",
        ] {
            let err = p
                .set_field("llm_proxy_listen", &serde_json::json!(bad))
                .err();
            assert!(
                matches!(
                    err,
                    Some(Error::Invalid {
                        field: "llm_proxy_listen",
                        ..
                    })
                ),
                "{bad:?} gave {err:?}"
            );
        }
    }

    #[test]
    fn inference_records_are_kept_between_a_day_and_ten_years() {
        let mut p = Preferences::default();
        assert_eq!(p.inference_keep_days, 90);
        for bad in [
            serde_json::json!(0),
            serde_json::json!(3651),
            serde_json::json!(-5),
            serde_json::json!(7.5),
            serde_json::json!("30"),
        ] {
            let err = p.set_field("inference_keep_days", &bad).err();
            assert!(
                matches!(
                    err,
                    Some(Error::Invalid {
                        field: "inference_keep_days",
                        ..
                    })
                ),
                "{bad} gave {err:?}"
            );
        }
        assert_eq!(p.inference_keep_days, 90, "a refused value changes nothing");
        p.set_field("inference_keep_days", &serde_json::json!(365))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.inference_keep_days, 365);
        assert!(Preferences::is_key("inference_keep_days"));
    }

    #[test]
    fn stored_preferences_with_a_bad_price_do_not_load() {
        let bad = serde_json::from_str::<Preferences>(r#"{"price_per_kwh": -2}"#);
        assert!(bad.is_err());
        let ok: Preferences =
            serde_json::from_str(r#"{"price_per_kwh": 0.5}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.price_per_kwh.per_kwh(), 0.5);
        assert_eq!(ok.currency.as_str(), "EUR");
    }

    #[test]
    fn one_bad_stored_value_costs_only_itself() {
        let stored = serde_json::json!({
            "price_per_kwh": -3.0,
            "low_power_threshold_w": 25,
            "interval_ms": 500,
            "currency": "usd",
            "from_the_future": 1
        });
        let map = stored.as_object().cloned().unwrap_or_default();
        let (prefs, problems) = Preferences::from_entries(map.iter().map(|(k, v)| (k.as_str(), v)));
        assert_eq!(prefs.low_power.threshold_w, Some(25.0));
        assert_eq!(prefs.interval_ms, 500);
        assert_eq!(prefs.price_per_kwh, Price::default());
        assert_eq!(prefs.currency, Currency::default());
        assert_eq!(problems.len(), 2, "{problems:?}");
    }

    #[test]
    fn tariffs_carbon_and_budgets_are_validated_as_they_are_set() {
        let mut p = Preferences::default();
        let overlapping = serde_json::json!([
            {"weekdays": ["mon"], "from": "07:00", "to": "09:00", "price": 0.4},
            {"weekdays": ["mon"], "from": "08:00", "to": "10:00", "price": 0.5}
        ]);
        let err = p
            .set_field("tariffs", &overlapping)
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("tariffs: tariff 2 overlaps tariff 1"));
        assert!(p.tariffs.is_empty());
        let ok = serde_json::json!([{"weekdays": ["sat", "sun"], "from": "00:00", "to": "24:00", "price": 0.1}]);
        assert!(p.set_field("tariffs", &ok).is_ok());
        assert_eq!(p.tariffs.len(), 1);
        assert!(p
            .set_field("carbon_g_per_kwh", &serde_json::json!(-5))
            .is_err());
        assert!(p
            .set_field("carbon_g_per_kwh", &serde_json::json!(350))
            .is_ok());
        assert_eq!(p.carbon_g_per_kwh, Some(350.0));
        assert!(p
            .set_field("daily_budget_kwh", &serde_json::json!(0))
            .is_err());
        assert!(p
            .set_field("daily_budget_kwh", &serde_json::json!(2.5))
            .is_ok());
        assert!(p
            .set_field("daily_budget_kwh", &serde_json::Value::Null)
            .is_ok());
        assert_eq!(p.daily_budget_kwh, None);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn low_power_settings_are_set_one_key_at_a_time_and_checked_together() {
        let mut p = Preferences::default();
        assert!(p
            .set_field("low_power_threshold_w", &serde_json::json!(40))
            .is_ok());
        assert!(p
            .set_field("low_power_hysteresis_w", &serde_json::json!(5))
            .is_ok());
        let err = p
            .set_field("low_power_hysteresis_w", &serde_json::json!(45))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("low_power_hysteresis_w: 45 W must be at least 0 and below the threshold (40 W)")
        );
        assert_eq!(
            p.low_power.hysteresis_w, 5.0,
            "the refused value changed nothing"
        );
        let err = p
            .set_field("low_power_auto", &serde_json::json!("yes"))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("low_power_auto: \"yes\" is not true or false")
        );
        assert!(p
            .set_field("low_power_model", &serde_json::json!("llama3.2:1b"))
            .is_ok());
        let json = serde_json::to_value(&p).unwrap_or_default();
        assert_eq!(json["low_power_model"], "llama3.2:1b");
        assert_eq!(json["low_power_threshold_w"], 40.0);
    }

    #[test]
    fn routing_settings_are_checked_as_they_are_set() {
        let mut p = Preferences::default();
        assert_eq!(p.low_power.action, crate::LowPowerAction::Advise);
        let err = |p: &mut Preferences, key: &str, v: serde_json::Value| {
            p.set_field(key, &v).err().map(|e| e.to_string())
        };
        assert_eq!(
            err(&mut p, "low_power_action", serde_json::json!("route")),
            None
        );
        assert_eq!(p.low_power.action, crate::LowPowerAction::Route);
        assert_eq!(
            err(&mut p, "low_power_action", serde_json::json!("fast")).as_deref(),
            Some("low_power_action: \"fast\" is not \"advise\" or \"route\"")
        );
        let routes = serde_json::json!({"llama3.1:70b": "llama3.2:3b", "*": "qwen3:1b"});
        assert_eq!(err(&mut p, "low_power_routes", routes), None);
        assert_eq!(p.low_power.routes.len(), 2);
        assert!(
            err(&mut p, "low_power_routes", serde_json::json!({"big": ""}))
                .is_some_and(|m| m.starts_with("low_power_routes: \"big\" → \"\""))
        );
        assert!(err(&mut p, "low_power_routes", serde_json::json!(["big"])).is_some());
        assert_eq!(
            p.low_power.routes.len(),
            2,
            "a refused value changed nothing"
        );
        assert_eq!(
            err(&mut p, "low_power_max_tokens", serde_json::json!(256)),
            None
        );
        assert_eq!(
            err(&mut p, "low_power_max_tokens", serde_json::json!(0)).as_deref(),
            Some("low_power_max_tokens: 0 is not between 1 and 1000000 tokens")
        );
        assert_eq!(
            err(&mut p, "low_power_max_tokens", serde_json::Value::Null),
            None
        );
        assert_eq!(p.low_power.max_tokens, None);
    }

    #[test]
    fn every_key_is_what_serde_writes_and_set_field_takes_back() {
        let p = Preferences {
            carbon_g_per_kwh: Some(300.0),
            title_above_w: Some(5.0),
            ..Preferences::default()
        };
        let json = serde_json::to_value(&p).unwrap_or_default();
        let written: Vec<&str> = json
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let mut keys: Vec<&str> = Preferences::keys().collect();
        keys.sort_unstable();
        let mut written_sorted = written.clone();
        written_sorted.sort_unstable();
        assert_eq!(keys, written_sorted);
        let mut round = Preferences::default();
        for key in Preferences::keys() {
            round
                .set_field(key, &json[key])
                .unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        assert_eq!(round, p);
    }

    #[test]
    fn currencies_are_iso_codes() {
        assert!(Currency::parse("USD").is_ok());
        assert!(Currency::parse("usd").is_err());
        assert!(Currency::parse("EURO").is_err());
    }

    #[test]
    fn sampling_interval_stays_between_100_ms_and_60_s() {
        assert!(Preferences::validate_interval(99).is_err());
        assert!(Preferences::validate_interval(100).is_ok());
        assert!(Preferences::validate_interval(60_000).is_ok());
        assert!(Preferences::validate_interval(60_001).is_err());
    }

    #[test]
    fn durations_read_like_a_person_writes_them() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        for bad in ["fast", "-1s", "0", "0s", "NaN", "inf", "", "5 parsecs"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was taken");
        }
    }
    #[test]
    fn the_update_manifest_url_is_off_by_default_and_only_http_or_https() {
        let mut p = Preferences::default();
        assert_eq!(p.update_manifest_url, None);
        for bad in [
            "file:///etc/passwd",
            "ftp://x/m.json",
            "https://",
            "https://a b/m.json",
            "42",
        ] {
            let err = p.set_field("update_manifest_url", &serde_json::json!(bad));
            assert!(err.is_err(), "{bad}");
        }
        assert!(p
            .set_field("update_manifest_url", &serde_json::json!(7))
            .is_err());
        assert_eq!(p.update_manifest_url, None);
        p.set_field(
            "update_manifest_url",
            &serde_json::json!(" https://wattbar.dev/latest.json "),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.update_manifest_url.as_deref(),
            Some("https://wattbar.dev/latest.json")
        );
        p.set_field("update_manifest_url", &serde_json::json!(null))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.update_manifest_url, None);
    }
}
