//! aWATTar `GET /v1/marketdata` (Germany and Austria): `{"object": "list", "data":
//! [{"start_timestamp", "end_timestamp" (ms), "marketprice", "unit": "Eur/MWh"}]}`. Negative
//! prices, and prices of exactly 0, are genuine.

use super::{bad, checked, eur_per_mwh, room};
use crate::Error;
use serde::Deserialize;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "aWATTar marketdata";

#[derive(Deserialize)]
struct Answer {
    data: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    start_timestamp: f64,
    end_timestamp: f64,
    marketprice: f64,
    #[serde(default)]
    unit: Option<String>,
}

/// The market prices of an aWATTar answer, EUR per kWh.
pub fn parse_marketdata(bytes: &[u8]) -> Result<Series, Error> {
    let a: Answer = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    room(WHAT, a.data.len())?;
    for e in &a.data {
        eur_per_mwh(WHAT, e.unit.as_deref())?;
    }
    let slots = a
        .data
        .iter()
        .map(|e| Slot {
            start: e.start_timestamp / 1000.0,
            end: e.end_timestamp / 1000.0,
            value: e.marketprice / 1000.0,
        })
        .collect();
    checked(
        WHAT,
        Series::from_answer(Quantity::PricePerKwh, Some("EUR".into()), slots),
    )
}
