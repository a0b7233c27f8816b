//! One answer to one reading: the vendor told from the answer's shape, or given.

use super::reading::{malformed, PlugReading, Vendor};
use super::{homeassistant, kasa, shelly, tasmota};
use crate::error::Error;
use serde_json::Value;

/// Reads a device's answer, telling the vendor from its shape.
pub fn parse_plug(text: &str) -> Result<PlugReading, Error> {
    let value = json(text)?;
    let vendor = detect(&value).ok_or_else(|| {
        malformed("not an answer of a plug Wattbar knows (Shelly, Tasmota, Kasa, Home Assistant)")
    })?;
    parse_value(vendor, &value)
}

/// Reads an answer of a known vendor.
pub fn parse_plug_as(vendor: Vendor, text: &str) -> Result<PlugReading, Error> {
    parse_value(vendor, &json(text)?)
}

fn parse_value(vendor: Vendor, value: &Value) -> Result<PlugReading, Error> {
    let reading = match vendor {
        Vendor::ShellyGen1 => shelly::parse_gen1(value),
        Vendor::ShellyGen2 => shelly::parse_gen2(value),
        Vendor::Tasmota => tasmota::parse(value),
        Vendor::Kasa | Vendor::Tapo => kasa::parse(value),
        Vendor::HomeAssistant => homeassistant::parse(value),
    }?;
    Ok(reading.believable())
}

/// The vendor whose answers have this shape.
pub fn detect(value: &Value) -> Option<Vendor> {
    let o = value.as_object()?;
    let has = |k: &str| o.contains_key(k);
    if has("entity_id") && has("state") {
        Some(Vendor::HomeAssistant)
    } else if has("StatusSNS") || has("ENERGY") {
        Some(Vendor::Tasmota)
    } else if has("get_energy_usage") || has("get_current_power") {
        Some(Vendor::Tapo)
    } else if has("emeter") || has("get_realtime") {
        Some(Vendor::Kasa)
    } else if has("meters") || has("emeters") {
        Some(Vendor::ShellyGen1)
    } else if shelly::is_gen2(o) {
        Some(Vendor::ShellyGen2)
    } else {
        None
    }
}

fn json(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Parse {
        what: "plug answer",
        line: Some(e.line()),
        message: e.to_string(),
    })
}
