//! Home Assistant: one entity's state, `GET /api/states/<entity_id>` with a long-lived token.
//! This reads any plug Home Assistant knows (Zigbee, Z-Wave, Matter, a vendor's cloud).
//!
//! The state is a string (`"77.1"`, `"unavailable"`, `"unknown"`) and its unit is an
//! attribute: a power sensor in W or kW, an energy sensor (`total_increasing`) in Wh, kWh or
//! MWh.

use super::reading::{malformed, Channel, PlugReading, Vendor, JOULES_PER_KWH, JOULES_PER_WH};
use crate::error::Error;
use serde_json::Value;

pub(super) fn parse(v: &Value) -> Result<PlugReading, Error> {
    let entity = v
        .get("entity_id")
        .and_then(Value::as_str)
        .unwrap_or("the entity");
    let state = v
        .get("state")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("no state"))?;
    let Ok(value) = state.trim().parse::<f64>() else {
        return Err(Error::Unavailable(format!(
            "Home Assistant says {entity} is {state:?}"
        )));
    };
    if !value.is_finite() {
        return Err(malformed(format!("{entity} reads {state}")));
    }
    let unit = v
        .pointer("/attributes/unit_of_measurement")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (watts, energy) = match unit {
        "W" => (Some(value), None),
        "kW" => (Some(value * 1000.0), None),
        "MW" => (Some(value * 1e6), None),
        "Wh" => (None, Some(value * JOULES_PER_WH)),
        "kWh" => (None, Some(value * JOULES_PER_KWH)),
        "MWh" => (None, Some(value * 1000.0 * JOULES_PER_KWH)),
        other => {
            return Err(Error::Unavailable(format!(
                "{entity} is in {other:?}, neither power (W, kW) nor energy (Wh, kWh, MWh)"
            )))
        }
    };
    let channel = Channel {
        id: entity.to_string(),
        watts,
        energy_joules: energy,
        returned_joules: None,
    };
    PlugReading::from_channels(Vendor::HomeAssistant, vec![channel], || {
        format!("{entity} has no value")
    })
}
