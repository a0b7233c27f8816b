//! Energy-Charts (Fraunhofer ISE) `GET /price?bzn=…`: `{"unix_seconds": […], "price": […],
//! "unit": …}`, EUR per MWh whatever `unit` says ("No Unit" in one genuine answer), hourly
//! before October 2025 and 15-minute since. A `null` price is a missing slot.

use super::{bad, checked, ends_of};
use crate::Error;
use serde::Deserialize;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Energy-Charts price";

#[derive(Deserialize)]
struct Answer {
    unix_seconds: Vec<f64>,
    price: Vec<Option<f64>>,
}

/// The day-ahead prices of an Energy-Charts `/price` answer, EUR per kWh.
pub fn parse_price(bytes: &[u8]) -> Result<Series, Error> {
    let a: Answer = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    if a.unix_seconds.len() != a.price.len() {
        return Err(bad(
            WHAT,
            format!(
                "{} times for {} prices",
                a.unix_seconds.len(),
                a.price.len()
            ),
        ));
    }
    let ends = ends_of(&a.unix_seconds);
    let slots = a
        .unix_seconds
        .iter()
        .zip(ends)
        .zip(&a.price)
        .filter_map(|((start, end), price)| {
            price.map(|p| Slot {
                start: *start,
                end,
                value: p / 1000.0,
            })
        })
        .collect();
    checked(
        WHAT,
        Series::new(Quantity::PricePerKwh, Some("EUR".into()), slots),
    )
}
