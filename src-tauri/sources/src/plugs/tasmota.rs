//! Tasmota: `GET /cm?cmnd=Status%208` answers `{"StatusSNS":{"ENERGY":{…}}}` (Status 10 and the
//! MQTT `SENSOR` telemetry carry the same `ENERGY` object).
//!
//! `Total` counts kWh to `EnergyRes` decimals (3 by default: 1 Wh steps), and is lost on a power
//! cut or an `EnergyReset`: `TotalStartTime` says when the count began. With several relays
//! `Power` is a list, and `Total` stays one number unless per-channel energy is on.

use super::reading::{Channel, PlugReading, Vendor, JOULES_PER_KWH};
use crate::error::Error;
use serde_json::Value;

pub(super) fn parse(v: &Value) -> Result<PlugReading, Error> {
    let sensors = v.get("StatusSNS").unwrap_or(v);
    let Some(energy) = sensors.get("ENERGY") else {
        return Err(Error::Unavailable(
            "this Tasmota has no energy sensor: its status holds no ENERGY".to_string(),
        ));
    };
    let power = list(energy.get("Power"));
    let total = list(energy.get("Total"));
    let per_channel_total = total.len() > 1 && total.len() == power.len();
    let channels: Vec<Channel> = power
        .iter()
        .enumerate()
        .map(|(i, watts)| Channel {
            id: format!("Power[{i}]"),
            watts: *watts,
            energy_joules: per_channel_total
                .then(|| total[i].map(|kwh| kwh * JOULES_PER_KWH))
                .flatten(),
            returned_joules: None,
        })
        .collect();
    let counter = total
        .iter()
        .copied()
        .sum::<Option<f64>>()
        .map(|kwh| kwh * JOULES_PER_KWH);
    let mut reading = PlugReading::from_channels(Vendor::Tasmota, channels, || {
        "this Tasmota's ENERGY has no Power".to_string()
    })?;
    if !per_channel_total {
        reading.energy_joules = counter;
    }
    reading.energy_resolution_joules = total
        .iter()
        .flatten()
        .map(|kwh| step_kwh(*kwh) * JOULES_PER_KWH)
        .reduce(f64::max);
    reading.counter_since = energy
        .get("TotalStartTime")
        .and_then(Value::as_str)
        .map(String::from);
    Ok(reading)
}

/// A number or a list of numbers, as the list.
fn list(v: Option<&Value>) -> Vec<Option<f64>> {
    let number = |x: &Value| x.as_f64().filter(|x| x.is_finite());
    match v {
        Some(Value::Array(items)) => items.iter().map(number).collect(),
        Some(x) => vec![number(x)],
        None => Vec::new(),
    }
}

/// The step of a kWh counter: the finest of 3, 4 or 5 decimals the value is written to (a
/// whole number of Wh at least; Tasmota's `EnergyRes` is 3 unless set higher).
fn step_kwh(kwh: f64) -> f64 {
    [1e-3, 1e-4, 1e-5]
        .into_iter()
        .find(|step| {
            let steps = kwh / step;
            (steps - steps.round()).abs() < 1e-6
        })
        .unwrap_or(1e-5)
}
