//! Shelly: Gen1 REST (`/status`) and Gen2-and-later RPC (`Shelly.GetStatus`, or one
//! component's `X.GetStatus`).
//!
//! Units differ within one API: Gen1 `meters[].total` counts watt-minutes while
//! `emeters[].total` counts Wh; Gen2 `aenergy.total` counts Wh, and where `ret_aenergy` exists
//! `aenergy` counts both directions, so import is the difference. `EM`/`EM1` give power only:
//! their counters are the sibling `emdata`/`em1data`, with import and export apart.

use super::reading::{malformed, number, Channel, PlugReading, Vendor, JOULES_PER_WH};
use crate::error::Error;
use serde_json::{Map, Value};

const JOULES_PER_WATT_MINUTE: f64 = 60.0;

/// The Gen2 components that meter, and the sibling that holds an `em`'s counters.
const METERED: [&str; 5] = ["switch", "cover", "pm1", "em", "em1"];

pub(super) fn is_gen2(o: &Map<String, Value>) -> bool {
    let component = |k: &String| k.split_once(':').is_some_and(|(kind, _)| !kind.is_empty());
    o.keys().any(component)
        || [
            "apower",
            "aenergy",
            "act_power",
            "total_act_power",
            "total_act",
            "output",
        ]
        .iter()
        .any(|k| o.contains_key(*k))
        || (o.contains_key("code") && o.contains_key("message"))
        || o.get("error").is_some_and(|e| e.get("code").is_some())
}

pub(super) fn parse_gen1(v: &Value) -> Result<PlugReading, Error> {
    let (list, emeter) = match (v.get("emeters"), v.get("meters")) {
        (Some(list), _) => (list, true),
        (None, Some(list)) => (list, false),
        (None, None) => return Err(malformed("no meters[] or emeters[]")),
    };
    let list = list
        .as_array()
        .ok_or_else(|| malformed("meters is not a list"))?;
    let name = if emeter { "emeters" } else { "meters" };
    let mut channels = Vec::with_capacity(list.len());
    let mut declared = None;
    for (i, m) in list.iter().enumerate() {
        let valid = m.get("is_valid").and_then(Value::as_bool).unwrap_or(true);
        let total = number(m, "total");
        if !emeter && total.is_none() && number(m, "power").is_some() {
            // A Shelly 1 without a meter reports the load its owner declared, not a reading.
            declared = number(m, "power");
        }
        let channel = |watts, energy, returned| Channel {
            id: format!("{name}[{i}]"),
            watts,
            energy_joules: energy,
            returned_joules: returned,
        };
        channels.push(if !valid || total.is_none() {
            channel(None, None, None)
        } else if emeter {
            channel(
                number(m, "power"),
                total.map(|wh| wh * JOULES_PER_WH),
                number(m, "total_returned").map(|wh| wh * JOULES_PER_WH),
            )
        } else {
            channel(
                number(m, "power"),
                total.map(|wmin| wmin * JOULES_PER_WATT_MINUTE),
                None,
            )
        });
    }
    // `meters[].total` counts whole watt-minutes; `emeters[].total` Wh to a decimal.
    let resolution = if emeter {
        JOULES_PER_WH / 10.0
    } else {
        JOULES_PER_WATT_MINUTE
    };
    let mut reading =
        PlugReading::from_channels(Vendor::ShellyGen1, channels, || match declared {
            Some(w) => format!(
                "this Shelly has no meter: its {w} W is the load configured on the device, not a \
             measurement"
            ),
            None => "this Shelly answers with no valid meter".to_string(),
        })?;
    reading.energy_resolution_joules = Some(resolution);
    Ok(reading)
}

pub(super) fn parse_gen2(v: &Value) -> Result<PlugReading, Error> {
    rpc_error(v)?;
    let o = v
        .as_object()
        .ok_or_else(|| malformed("not a JSON object"))?;
    let components: Vec<(&str, &str, &Value)> = o
        .iter()
        .filter_map(|(k, c)| k.split_once(':').map(|(kind, id)| (kind, id, c)))
        .collect();
    let mut channels = Vec::new();
    let mut unmetered = Vec::new();
    if components.is_empty() {
        // One component's own answer (`Switch.GetStatus?id=0`, `EM1.GetStatus?id=1`, …).
        let id = v.get("id").and_then(Value::as_u64).unwrap_or(0).to_string();
        let kind = single_kind(v);
        match component(kind, &id, v, None) {
            Some(c) => channels.push(c),
            None => unmetered.push(format!("{kind}:{id}")),
        }
    } else {
        for (kind, id, c) in &components {
            if !METERED.contains(kind) {
                continue;
            }
            let data = match *kind {
                "em" => o.get(&format!("emdata:{id}")),
                "em1" => o.get(&format!("em1data:{id}")),
                _ => None,
            };
            match component(kind, id, c, data) {
                Some(channel) => channels.push(channel),
                None => unmetered.push(format!("{kind}:{id}")),
            }
        }
    }
    // Every Gen2 energy counter is Wh to three decimals.
    let mut reading = PlugReading::from_channels(Vendor::ShellyGen2, channels, || {
        if unmetered.is_empty() {
            "this Shelly has no metering component (switch, cover, pm1, em or em1)".to_string()
        } else {
            format!(
                "this Shelly does not meter: {} answer with no power or energy",
                unmetered.join(", ")
            )
        }
    })?;
    reading.energy_resolution_joules = Some(JOULES_PER_WH / 1000.0);
    Ok(reading)
}

/// A device's error answer: HTTP RPC's `{"code","message"}`, or RPC's `{"error":{…}}`.
fn rpc_error(v: &Value) -> Result<(), Error> {
    let error = v.get("error").unwrap_or(v);
    let (Some(code), Some(message)) = (
        error.get("code").and_then(Value::as_i64),
        error.get("message").and_then(Value::as_str),
    ) else {
        return Ok(());
    };
    Err(Error::Unavailable(match code {
        401 => {
            let realm = serde_json::from_str::<Value>(message)
                .ok()
                .and_then(|m| m.get("realm").and_then(Value::as_str).map(String::from));
            format!(
                "the Shelly{} asks for its password (digest authentication): give it in the \
                 wall meter's settings",
                realm.map(|r| format!(" {r}")).unwrap_or_default()
            )
        }
        404 => format!("the Shelly has no such component: {message}"),
        _ => format!("the Shelly answered error {code}: {message}"),
    }))
}

/// Which component a lone `X.GetStatus` answer is, by its fields.
fn single_kind(v: &Value) -> &'static str {
    if v.get("total_act_power").is_some() {
        "em"
    } else if v.get("total_act").is_some() {
        "emdata"
    } else if v.get("act_power").is_some() {
        "em1"
    } else if v.get("total_act_energy").is_some() {
        "em1data"
    } else if v.get("state").is_some() || v.get("current_pos").is_some() {
        "cover"
    } else {
        "switch"
    }
}

/// One component's channel; `None` where it measures nothing.
fn component(kind: &str, id: &str, c: &Value, data: Option<&Value>) -> Option<Channel> {
    let (watts, energy, returned) = match kind {
        "em" => (
            number(c, "total_act_power"),
            data.and_then(|d| number(d, "total_act")),
            data.and_then(|d| number(d, "total_act_ret")),
        ),
        "emdata" => (None, number(c, "total_act"), number(c, "total_act_ret")),
        "em1" => (
            number(c, "act_power"),
            data.and_then(|d| number(d, "total_act_energy")),
            data.and_then(|d| number(d, "total_act_ret_energy")),
        ),
        "em1data" => (
            None,
            number(c, "total_act_energy"),
            number(c, "total_act_ret_energy"),
        ),
        _ => {
            let both = c.get("aenergy").and_then(|a| number(a, "total"));
            let returned = c.get("ret_aenergy").and_then(|a| number(a, "total"));
            // With a returned register, `aenergy` counts both directions.
            let imported = both.map(|b| b - returned.unwrap_or(0.0));
            (number(c, "apower"), imported, returned)
        }
    };
    (watts.is_some() || energy.is_some()).then(|| Channel {
        id: format!("{kind}:{id}"),
        watts,
        energy_joules: energy.map(|wh| wh * JOULES_PER_WH),
        returned_joules: returned.map(|wh| wh * JOULES_PER_WH),
    })
}
