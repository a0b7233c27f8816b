//! Energy-Charts (Fraunhofer ISE) `GET /price?bzn=…`: `{"unix_seconds": […], "price": […],
//! "unit": …}`, EUR per MWh whatever `unit` says ("No Unit" in one genuine answer), hourly
//! before October 2025 and 15-minute since. A `null` price is a missing slot.
//!
//! Rule: the unit is read where it says something. "No Unit" (as in one genuine answer) is taken
//! as EUR per MWh; a unit naming another currency or another energy (`USD / MWh`, `EUR/kWh`) is
//! refused, never read as EUR per MWh.

use super::{bad, checked, ends_of, eur_per_mwh, room};
use crate::Error;
use serde::Deserialize;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Energy-Charts price";

#[derive(Deserialize)]
struct Answer {
    unix_seconds: Vec<f64>,
    price: Vec<Option<f64>>,
    #[serde(default)]
    unit: Option<String>,
}

/// The day-ahead prices of an Energy-Charts `/price` answer, EUR per kWh.
pub fn parse_price(bytes: &[u8]) -> Result<Series, Error> {
    let a: Answer = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    eur_per_mwh(WHAT, a.unit.as_deref())?;
    room(WHAT, a.unix_seconds.len())?;
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
        Series::from_answer(Quantity::PricePerKwh, Some("EUR".into()), slots),
    )
}

const WHAT_CO2: &str = "Energy-Charts co2eq";

#[derive(Deserialize)]
struct Co2Answer {
    unix_seconds: Vec<f64>,
    #[serde(default)]
    co2eq: Vec<Option<f64>>,
    #[serde(default)]
    co2eq_forecast: Vec<Option<f64>>,
}

/// The grid intensity of an Energy-Charts `/co2eq?country=…` answer, gCO₂eq per kWh: each
/// slot's measured value where there is one, else its forecast.
///
/// No genuine `/co2eq` answer is in the captures: this follows the documented shape
/// (`unix_seconds`, `co2eq`, `co2eq_forecast`).
pub fn parse_co2eq(bytes: &[u8]) -> Result<Series, Error> {
    let a: Co2Answer = serde_json::from_slice(bytes).map_err(|e| bad(WHAT_CO2, e.to_string()))?;
    let n = a.unix_seconds.len();
    room(WHAT_CO2, n)?;
    if (!a.co2eq.is_empty() && a.co2eq.len() != n)
        || (!a.co2eq_forecast.is_empty() && a.co2eq_forecast.len() != n)
    {
        return Err(bad(WHAT_CO2, "the lists are not of one length"));
    }
    let ends = ends_of(&a.unix_seconds);
    let slots = (0..n)
        .filter_map(|i| {
            let value = a
                .co2eq
                .get(i)
                .copied()
                .flatten()
                .or_else(|| a.co2eq_forecast.get(i).copied().flatten())?;
            Some(Slot {
                start: a.unix_seconds[i],
                end: ends[i],
                value,
            })
        })
        .collect();
    checked(
        WHAT_CO2,
        Series::from_answer(Quantity::GramsPerKwh, None, slots),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn co2eq_takes_the_measured_value_then_the_forecast() {
        // The documented shape: measured values until now, forecast after; 15-minute steps.
        let answer = br#"{"unix_seconds":[1734649200,1734650100,1734651000],
            "co2eq":[402.5,null,null],"co2eq_forecast":[null,398.0,null]}"#;
        let s = parse_co2eq(answer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.slots.len(), 2, "the third slot has neither");
        assert_eq!(s.at(1_734_649_200.0), Some(402.5));
        assert_eq!(s.at(1_734_650_100.0 + 899.0), Some(398.0));
        assert!(parse_co2eq(br#"{"unix_seconds":[1],"co2eq":[1,2]}"#).is_err());
    }

    #[test]
    fn a_price_in_another_currency_is_refused_not_read_as_eur() {
        let with_unit = |unit: &str| {
            let answer = format!(
                r#"{{"unix_seconds":[1733612400,1733616000],"price":[95.5,-3.2],"unit":"{unit}"}}"#
            );
            parse_price(answer.as_bytes()).map(|s| s.slots.len())
        };
        for seen in ["EUR/MWh", "EUR / MWh", "EUR / megawatt_hour", "No Unit"] {
            assert_eq!(with_unit(seen).ok(), Some(2), "{seen}");
        }
        for other in ["USD / MWh", "EUR / kWh", "GBP/MWh"] {
            let why = with_unit(other)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(why.contains("not EUR per MWh"), "{other}: {why}");
        }
    }

    #[test]
    fn four_hundred_thousand_one_second_slots_are_refused_by_their_count() {
        let n = 400_000;
        let mut answer = String::from(r#"{"unix_seconds":["#);
        answer.extend((0..n).map(|i| format!("{},", 1_733_612_400 + i)));
        answer.pop();
        answer.push_str(r#"],"price":["#);
        answer.extend((0..n).map(|_| "1,"));
        answer.pop();
        answer.push_str("]}");
        assert!(answer.len() < 8 << 20, "within the byte cap");
        let why = parse_price(answer.as_bytes())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(why.contains("400000 slots"), "{why}");
    }
}
