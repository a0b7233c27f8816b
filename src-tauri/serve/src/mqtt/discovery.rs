//! What Wattbar publishes over MQTT, as pure functions of the published state: Home Assistant's
//! discovery documents, the state document and its attributes.
//!
//! Rules:
//! - One state document per publish (`<prefix>/state`); every entity reads its field with a
//!   template. A field that is unknown is `null`, and each entity's availability also follows its
//!   own field: Home Assistant shows it unavailable, never 0.
//! - Energy is the headline's lifetime counter (every scope it was recorded in, each joule once):
//!   it never goes down across restarts and session resets, as `total_increasing` requires.
//! - The scope and what it covers travel as attributes (`<prefix>/attributes`).
//! - A number is finite and never `-0.0` ([`number`]): an empty sum in Rust is `-0.0`, and
//!   Home Assistant would show a cost of "-0.00".

use serde_json::{json, Value};
use wattbar_core::{Coverage, Scope, JOULES_PER_KWH};
use wattbar_engine::PublishedState;

/// Where everything is published.
#[derive(Debug, Clone, PartialEq)]
pub struct Topics {
    /// `wattbar/<hostname>` by default.
    pub prefix: String,
    /// Home Assistant's discovery prefix.
    pub discovery: String,
    /// The device's id in discovery topics and unique ids: `[A-Za-z0-9_-]` only.
    pub node: String,
}

impl Topics {
    pub fn new(prefix: &str, discovery: &str, node: &str) -> Topics {
        Topics {
            prefix: prefix.trim_end_matches('/').to_string(),
            discovery: discovery.trim_end_matches('/').to_string(),
            node: node_id(node),
        }
    }
    /// `online` / `offline`, retained; `offline` is the last will.
    pub fn availability(&self) -> String {
        format!("{}/availability", self.prefix)
    }
    pub fn state(&self) -> String {
        format!("{}/state", self.prefix)
    }
    pub fn attributes(&self) -> String {
        format!("{}/attributes", self.prefix)
    }
    /// Budget alerts as they are given (not retained): `{"alerts": [...]}`.
    pub fn alert(&self) -> String {
        format!("{}/alert", self.prefix)
    }
    /// `ON` / `OFF` from Home Assistant.
    pub fn low_power_set(&self) -> String {
        format!("{}/low_power/set", self.prefix)
    }
    fn config(&self, component: &str, object: &str) -> String {
        format!(
            "{}/{component}/{}/{object}/config",
            self.discovery, self.node
        )
    }
}

/// `name` with every character Home Assistant refuses in a node id replaced by `_`.
pub fn node_id(name: &str) -> String {
    let id: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    if id.is_empty() {
        "wattbar".to_string()
    } else {
        id
    }
}

/// The state document's fields that entities read.
pub const POWER: &str = "power_w";
pub const ENERGY: &str = "energy_kwh";
pub const COST: &str = "cost";
pub const LOW_POWER: &str = "low_power";
pub const PRICE: &str = "price_per_kwh";

/// The retained discovery documents, topic first: power, energy, cost, the price in force (from
/// the price feed; unavailable without one) and the low-power switch.
/// `currency` is the cost's unit; `version` this program's.
pub fn documents(
    topics: &Topics,
    host: &str,
    currency: &str,
    version: &str,
) -> Vec<(String, Value)> {
    let device = json!({
        "identifiers": [topics.node],
        "name": format!("Wattbar {host}"),
        "manufacturer": "Wattbar",
        "model": "power monitor",
        "sw_version": version,
    });
    // The broker's availability and the field's own: both must be online.
    let availability = |field: &str| {
        json!({
            "availability": [
                {"topic": topics.availability()},
                {
                    "topic": topics.state(),
                    "value_template":
                        format!("{{{{ 'online' if value_json.{field} is not none else 'offline' }}}}"),
                },
            ],
            "availability_mode": "all",
        })
    };
    let entity = |object: &str, name: &str, field: &str, extra: Value| {
        let mut doc = json!({
            "name": name,
            "object_id": format!("{}_{object}", topics.node),
            "unique_id": format!("{}_{object}", topics.node),
            "state_topic": topics.state(),
            "value_template": format!("{{{{ value_json.{field} }}}}"),
            "json_attributes_topic": topics.attributes(),
            "device": device,
        });
        merge(&mut doc, availability(field));
        merge(&mut doc, extra);
        doc
    };
    vec![
        (
            topics.config("sensor", "power"),
            entity(
                "power",
                "Power",
                POWER,
                json!({
                    "device_class": "power",
                    "state_class": "measurement",
                    "unit_of_measurement": "W",
                    "suggested_display_precision": 1,
                }),
            ),
        ),
        (
            topics.config("sensor", "energy"),
            entity(
                "energy",
                "Energy",
                ENERGY,
                json!({
                    "device_class": "energy",
                    "state_class": "total_increasing",
                    "unit_of_measurement": "kWh",
                    "suggested_display_precision": 3,
                }),
            ),
        ),
        (
            topics.config("sensor", "cost"),
            entity(
                "cost",
                "Energy cost",
                COST,
                json!({
                    "device_class": "monetary",
                    "state_class": "total",
                    "unit_of_measurement": currency,
                    "suggested_display_precision": 2,
                }),
            ),
        ),
        (
            topics.config("sensor", "price"),
            entity(
                "price",
                "Electricity price",
                PRICE,
                json!({
                    "state_class": "measurement",
                    "unit_of_measurement": format!("{currency}/kWh"),
                    "suggested_display_precision": 4,
                    "icon": "mdi:cash-clock",
                }),
            ),
        ),
        (
            topics.config("switch", "low_power"),
            entity(
                "low_power",
                "Low-power mode",
                LOW_POWER,
                json!({
                    "command_topic": topics.low_power_set(),
                    "payload_on": "ON",
                    "payload_off": "OFF",
                    "state_on": "ON",
                    "state_off": "OFF",
                    "icon": "mdi:leaf",
                }),
            ),
        ),
    ]
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// The state document: `{"at", "power_w", "energy_kwh", "cost", "currency", "price_per_kwh",
/// "low_power"}`, `at` the sample's time (Unix seconds) the figures are of; `price_per_kwh` the
/// price feed's slot in force, null without one.
pub fn state(p: &PublishedState) -> Value {
    let watts = p
        .snapshot
        .as_ref()
        .and_then(|s| s.headline.as_ref())
        .and_then(|h| h.watts)
        .map(|w| w.0);
    let currency = p.energy.session.currency.as_str();
    json!({
        "at": p.snapshot.as_ref().map(|s| s.at.unix_seconds),
        POWER: number(watts),
        ENERGY: number(crate::summary::lifetime_joules(p).map(|j| j / JOULES_PER_KWH)),
        COST: number(p.kept.committed.cost_in(currency)),
        "currency": currency,
        PRICE: number(
            p.prices
                .price
                .as_ref()
                .filter(|f| f.currency.as_deref().is_none_or(|c| c == currency))
                .and_then(|f| f.now)
        ),
        LOW_POWER: if p.low_power.state.enabled { "ON" } else { "OFF" },
    })
}

/// A figure as published: `None` unless finite, and `-0.0` as `0.0` (adding `+0.0` is the
/// IEEE 754 way: `-0.0 + 0.0 = +0.0`, every other value unchanged).
pub fn number(x: Option<f64>) -> Option<f64> {
    x.filter(|x| x.is_finite()).map(|x| x + 0.0)
}

/// The attributes every entity carries: what the headline covers and where it comes from.
pub fn attributes(p: &PublishedState) -> Value {
    let snapshot = p.snapshot.as_ref();
    let head = snapshot.and_then(|s| s.headline.as_ref());
    let coverage = snapshot.and_then(|s| s.coverage());
    let energy_by_scope: serde_json::Map<String, Value> = p
        .kept
        .committed
        .by_scope
        .iter()
        .map(|(scope, j)| {
            let kwh = number(Some(j / JOULES_PER_KWH));
            (Scope::shown(*scope).to_string(), json!(kwh))
        })
        .collect();
    json!({
        "scope": coverage.as_ref().map(|c| c.scope),
        "covers": coverage.as_ref().map(|c| c.covers.clone()).unwrap_or_default(),
        "scope_text": coverage.as_ref().map(Coverage::describe),
        "quality": head.map(|h| h.quality),
        "source": head.map(|h| h.source.clone()),
        "energy_kwh_by_scope": energy_by_scope,
    })
}
