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

mod currency;
pub mod feeds;
mod set;
pub use currency::Currency;
pub mod integrations;
pub mod server_metrics;
pub mod wall_meter;
pub use feeds::FeedPref;
pub use integrations::{MqttPref, OtlpPref};
pub use server_metrics::ServerMetricsPref;
pub use wall_meter::WallMeterPref;

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
    /// What a new battery costs, in `currency`; `None`: wear is not priced.
    pub battery_price: Option<f64>,
    /// The full cycles the battery is rated for ([`DEFAULT_BATTERY_RATED_CYCLES`]).
    pub battery_rated_cycles: u32,
    /// A price and rating of its own for a battery the gauge names (`BAT1`), where a machine's
    /// batteries differ; those not named share `battery_price`
    /// ([`wear_per_kwh`](crate::battery::wear_per_kwh)). At most [`MAX_PRICED_BATTERIES`].
    pub battery_prices: std::collections::BTreeMap<String, crate::battery::BatteryPricing>,
    /// The cost budgets count the battery's wear beside the grid's cost (off: the grid's bill
    /// alone).
    pub budgets_count_wear: bool,
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
            battery_price: None,
            battery_rated_cycles: DEFAULT_BATTERY_RATED_CYCLES,
            battery_prices: std::collections::BTreeMap::new(),
            budgets_count_wear: false,
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
    const OWN_KEYS: [&'static str; 33] = [
        "price_per_kwh",
        "currency",
        "interval_ms",
        "rest_interval_ms",
        "tariffs",
        "carbon_g_per_kwh",
        "price_feed",
        "carbon_feed",
        "price_notify_above",
        "battery_price",
        "battery_rated_cycles",
        "battery_prices",
        "budgets_count_wear",
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
        positive("battery_price", self.battery_price)?;
        check_rated_cycles(u64::from(self.battery_rated_cycles))?;
        check_battery_prices(&self.battery_prices)?;
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
}

/// The cycles a laptop battery is rated for where the user says nothing: Apple rates every
/// MacBook battery since 2009 for 1,000 full cycles (its "Mac notebook battery cycle count"
/// page), and the gauges in `tests/fixtures/macos` say so themselves (`DesignCycleCount9C` =
/// 1000). Others rate theirs for 300–1,000; a lower figure prices wear higher.
pub const DEFAULT_BATTERY_RATED_CYCLES: u32 = 1000;
/// The most rated cycles taken: LFP cells reach a few thousand; past this is a typo.
pub const MAX_BATTERY_RATED_CYCLES: u64 = 20_000;

pub(crate) fn check_rated_cycles(cycles: u64) -> Result<u32, Error> {
    match u32::try_from(cycles) {
        Ok(c) if (1..=MAX_BATTERY_RATED_CYCLES).contains(&cycles) => Ok(c),
        _ => Err(Error::Invalid {
            field: "battery_rated_cycles",
            message: format!("{cycles} is not between 1 and {MAX_BATTERY_RATED_CYCLES} cycles"),
        }),
    }
}

/// The most batteries `battery_prices` names: laptops have one or two, a few handhelds three.
pub const MAX_PRICED_BATTERIES: usize = 8;
/// The longest battery name taken (`BAT0`, `CMB1`, `InternalBattery-0`).
pub const MAX_BATTERY_NAME_CHARS: usize = 32;

pub(crate) fn check_battery_prices(
    prices: &std::collections::BTreeMap<String, crate::battery::BatteryPricing>,
) -> Result<(), Error> {
    let bad = |message: String| Error::Invalid {
        field: "battery_prices",
        message,
    };
    if prices.len() > MAX_PRICED_BATTERIES {
        return Err(bad(format!(
            "{} batteries named, at most {MAX_PRICED_BATTERIES}",
            prices.len()
        )));
    }
    for (name, p) in prices {
        let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty()
            || name.chars().count() > MAX_BATTERY_NAME_CHARS
            || !name.chars().all(fine)
        {
            return Err(bad(format!(
                "{name:?} is not a battery's name (1–{MAX_BATTERY_NAME_CHARS} letters, digits, _ - .)"
            )));
        }
        if !p.price.is_finite() || p.price <= 0.0 {
            return Err(bad(format!("{name}: {} must be a positive price", p.price)));
        }
        if let Some(c) = p.rated_cycles {
            check_rated_cycles(u64::from(c)).map_err(|e| match e {
                Error::Invalid { message, .. } => bad(format!("{name}: {message}")),
                other => other,
            })?;
        }
    }
    Ok(())
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
mod tests;
