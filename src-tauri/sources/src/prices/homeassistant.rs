//! A Home Assistant price entity, `GET /api/states/<entity>` (a long-lived token as `Bearer`):
//! `{"state", "attributes": {"unit_of_measurement", …}}`.
//!
//! Slots come from the attributes price integrations publish: Nord Pool's `raw_today` and
//! `raw_tomorrow` (`[{"start", "end", "value"}]`) or EPEX Spot's `data` (`[{"start_time",
//! "end_time", "price_per_kwh"}]`). An entity with neither gives its state alone, the price of
//! the hour it was asked in. The unit says the scale: per MWh ÷ 1,000; cents, pence or öre
//! (`ct/kWh`, `p/kWh`, `öre/kWh`) ÷ 100.
//!
//! No genuine answer of such an entity is in the captures: this follows the integrations'
//! documented attributes.

use super::{bad, checked, room, unix_of};
use crate::Error;
use serde_json::Value;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Home Assistant price entity";

/// The entity's prices, per kWh; `now_unix` places a bare state in its hour.
pub fn parse_entity(bytes: &[u8], now_unix: f64) -> Result<Series, Error> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    let attrs = &v["attributes"];
    let unit = attrs["unit_of_measurement"].as_str().unwrap_or_default();
    let scale = scale_of(unit);
    let mut slots = Vec::new();
    let lists = [
        (&attrs["raw_today"], "start", "end", "value"),
        (&attrs["raw_tomorrow"], "start", "end", "value"),
        (&attrs["data"], "start_time", "end_time", "price_per_kwh"),
    ];
    room(
        WHAT,
        lists
            .iter()
            .filter_map(|(list, ..)| list.as_array().map(Vec::len))
            .sum(),
    )?;
    for (list, from, to, value) in lists {
        let Some(entries) = list.as_array() else {
            continue;
        };
        for e in entries {
            let time = |k: &str| {
                e[k].as_str()
                    .and_then(unix_of)
                    .ok_or_else(|| bad(WHAT, format!("{k} {}", e[k])))
            };
            let Some(price) = e[value].as_f64() else {
                continue;
            };
            slots.push(Slot {
                start: time(from)?,
                end: time(to)?,
                value: price * scale,
            });
        }
    }
    if slots.is_empty() {
        let state = v["state"].as_str().unwrap_or_default();
        let price: f64 = state.trim().parse().map_err(|_| {
            Error::Unavailable(format!(
                "Home Assistant: the entity's state is {state:?}, not a price"
            ))
        })?;
        let hour = (now_unix / 3600.0).floor() * 3600.0;
        slots.push(Slot {
            start: hour,
            end: hour + 3600.0,
            value: price * scale,
        });
    }
    let currency = unit
        .split('/')
        .next()
        .filter(|c| c.len() == 3 && c.chars().all(|c| c.is_ascii_alphabetic()))
        .map(str::to_ascii_uppercase);
    checked(
        WHAT,
        Series::from_answer(Quantity::PricePerKwh, currency, slots),
    )
}

/// What turns the unit's figures into a price per kWh.
fn scale_of(unit: &str) -> f64 {
    let u = unit.to_ascii_lowercase();
    let per_mwh = if u.contains("mwh") { 0.001 } else { 1.0 };
    let minor = ["ct", "c/", "cent", "p/", "pence", "öre", "ore"]
        .iter()
        .any(|m| u.starts_with(m));
    per_mwh * if minor { 0.01 } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nord_pool_attributes_give_slots_and_a_bare_state_its_hour() {
        let nordpool = br#"{"entity_id":"sensor.nordpool","state":"12.5",
            "attributes":{"unit_of_measurement":"c/kWh","raw_today":[
              {"start":"2024-06-14T00:00:00+02:00","end":"2024-06-14T01:00:00+02:00","value":12.5},
              {"start":"2024-06-14T01:00:00+02:00","end":"2024-06-14T02:00:00+02:00","value":-1.0}],
              "raw_tomorrow":[]}}"#;
        let s = parse_entity(nordpool, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.slots.len(), 2);
        assert_eq!(s.at(1_718_316_000.0), Some(0.125));
        assert_eq!(s.at(1_718_319_600.0), Some(-0.01));
        let bare = br#"{"state":"0.2841","attributes":{"unit_of_measurement":"EUR/kWh"}}"#;
        let s = parse_entity(bare, 7_250.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.slots[0].start, s.slots[0].end, s.slots[0].value),
            (7200.0, 10_800.0, 0.2841)
        );
        assert_eq!(s.currency.as_deref(), Some("EUR"));
        let gone = parse_entity(br#"{"state":"unavailable","attributes":{}}"#, 0.0);
        assert!(matches!(gone, Err(Error::Unavailable(_))), "{gone:?}");
        assert_eq!(scale_of("EUR/MWh"), 0.001);
    }
}
