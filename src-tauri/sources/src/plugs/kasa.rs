//! TP-Link: the legacy Kasa emeter (`{"emeter":{"get_realtime":{}}}`) and Tapo's SMART
//! `get_energy_usage`.
//!
//! Kasa keys its units by field name, not by model: v1 firmware writes floats in base units
//! (`power` W, `total` kWh), v2 integer milli-units (`power_mw`, `total_wh`). An `err_code`
//! other than 0 is the device saying why (a plug with no meter: "module not support"). Tapo has
//! no lifetime counter, only the day's and the month's, so it gives power alone.

use super::reading::{
    malformed, number, Channel, PlugReading, Vendor, JOULES_PER_KWH, JOULES_PER_WH,
};
use crate::error::Error;
use serde_json::Value;

pub(super) fn parse(v: &Value) -> Result<PlugReading, Error> {
    if let Some(usage) = v.get("get_energy_usage") {
        return tapo(
            usage
                .get("current_power")
                .and_then(Value::as_f64)
                .map(|mw| mw / 1000.0),
        );
    }
    if let Some(now) = v.get("get_current_power") {
        return tapo(number(now, "current_power"));
    }
    let realtime = v
        .get("emeter")
        .unwrap_or(v)
        .get("get_realtime")
        .ok_or_else(|| malformed("no emeter.get_realtime"))?;
    if let Some(code) = realtime.get("err_code").and_then(Value::as_i64) {
        if code != 0 {
            let message = realtime
                .get("err_msg")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(Error::Unavailable(format!(
                "this Kasa has no energy meter: it answered error {code}, {message:?}"
            )));
        }
    }
    let watts = number(realtime, "power_mw")
        .map(|mw| mw / 1000.0)
        .or_else(|| number(realtime, "power"));
    let energy = number(realtime, "total_wh")
        .map(|wh| wh * JOULES_PER_WH)
        .or_else(|| number(realtime, "total").map(|kwh| kwh * JOULES_PER_KWH));
    let id = match realtime.get("slot_id").and_then(Value::as_u64) {
        Some(slot) => format!("slot:{slot}"),
        None => "emeter".to_string(),
    };
    let channel = Channel {
        id,
        watts,
        energy_joules: energy,
        returned_joules: None,
    };
    let mut reading = PlugReading::from_channels(Vendor::Kasa, vec![channel], || {
        "this Kasa's emeter answered with no power or energy".to_string()
    })?;
    // Whole Wh in `total_wh`; `total` is kWh to three decimals, the same step.
    reading.energy_resolution_joules = Some(JOULES_PER_WH);
    Ok(reading)
}

fn tapo(watts: Option<f64>) -> Result<PlugReading, Error> {
    let channel = Channel {
        id: "current_power".to_string(),
        watts: watts.filter(|w| w.is_finite()),
        energy_joules: None,
        returned_joules: None,
    };
    PlugReading::from_channels(Vendor::Tapo, vec![channel], || {
        "this Tapo answered with no current power".to_string()
    })
}
