//! Octopus Energy `GET /v1/products/{product}/electricity-tariffs/{tariff}/standard-unit-rates/`
//! (Agile): `{"count", "next", "previous", "results": [{"value_exc_vat", "value_inc_vat",
//! "valid_from", "valid_to"}]}`, pence per kWh, newest first, 100 a page. The price a customer
//! pays is `value_inc_vat`.

use super::{bad, checked, room, unix_of};
use crate::Error;
use serde::Deserialize;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Octopus unit rates";

#[derive(Deserialize)]
struct Answer {
    next: Option<String>,
    results: Vec<Rate>,
}

#[derive(Deserialize)]
struct Rate {
    value_inc_vat: f64,
    valid_from: String,
    valid_to: Option<String>,
}

/// One page of unit rates: the slots, GBP per kWh with VAT, and the next page's address.
pub fn parse_unit_rates(bytes: &[u8]) -> Result<(Series, Option<String>), Error> {
    let a: Answer = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    room(WHAT, a.results.len())?;
    let mut slots = Vec::with_capacity(a.results.len());
    for r in &a.results {
        let start = unix_of(&r.valid_from)
            .ok_or_else(|| bad(WHAT, format!("valid_from {:?}", r.valid_from)))?;
        // An open-ended rate (a fixed tariff's) has no slot to price by: left out.
        let Some(to) = &r.valid_to else { continue };
        let end = unix_of(to).ok_or_else(|| bad(WHAT, format!("valid_to {to:?}")))?;
        slots.push(Slot {
            start,
            end,
            value: r.value_inc_vat / 100.0,
        });
    }
    let series = checked(
        WHAT,
        Series::from_answer(Quantity::PricePerKwh, Some("GBP".into()), slots),
    )?;
    Ok((series, a.next))
}
