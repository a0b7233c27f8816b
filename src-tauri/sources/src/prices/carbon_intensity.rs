//! The GB Carbon Intensity API (National Grid ESO): `/intensity…` gives `{"data": [{"from",
//! "to", "intensity": {"forecast", "actual"?, "index"}}]}`; the regional answers for a region or
//! a postcode nest that array inside the region: `{"data": {"regionid", …, "data": […]}}`.
//! Each half-hour's `actual` where given, else its `forecast`, gCO₂ per kWh.

use super::{bad, checked, room, unix_of};
use crate::Error;
use serde_json::Value;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "GB carbon intensity";

/// The half-hours of a GB Carbon Intensity answer, national or regional.
pub fn parse_intensity(bytes: &[u8]) -> Result<Series, Error> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    let periods = match &v["data"] {
        Value::Array(a) => a,
        Value::Object(region) => region
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(WHAT, "a region without its data"))?,
        _ => return Err(bad(WHAT, "no data")),
    };
    room(WHAT, periods.len())?;
    let mut slots = Vec::with_capacity(periods.len());
    for p in periods {
        let time = |key: &str| {
            p[key]
                .as_str()
                .and_then(unix_of)
                .ok_or_else(|| bad(WHAT, format!("{key} {}", p[key])))
        };
        let i = &p["intensity"];
        let Some(value) = i["actual"].as_f64().or_else(|| i["forecast"].as_f64()) else {
            continue;
        };
        slots.push(Slot {
            start: time("from")?,
            end: time("to")?,
            value,
        });
    }
    checked(
        WHAT,
        Series::from_answer(Quantity::GramsPerKwh, None, slots),
    )
}
