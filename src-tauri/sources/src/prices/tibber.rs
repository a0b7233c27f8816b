//! Tibber's GraphQL API (`POST https://api.tibber.com/v1-beta/gql`, a personal token as
//! `Authorization: Bearer`): `{"data": {"viewer": {"homes": [{"currentSubscription":
//! {"priceInfo": {"today": [{"total", "startsAt", "currency"}], "tomorrow": […]}}}]}}}`.
//! `total` is the retail price per kWh, taxes included; `tomorrow` is empty until published.
//! GraphQL errors arrive as `{"errors": [{"message"}]}`, often with status 200.
//!
//! No genuine Tibber answer is in the captures: this follows the vendor's documented shape.

use super::{bad, checked, ends_of, room, unix_of};
use crate::Error;
use serde_json::Value;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Tibber price info";

/// The query sent: today's and tomorrow's prices of every home.
pub const QUERY: &str = "{ viewer { homes { currentSubscription { priceInfo { \
    today { total startsAt currency } tomorrow { total startsAt currency } } } } } }";

/// The first home's prices today and tomorrow.
pub fn parse_price_info(bytes: &[u8]) -> Result<Series, Error> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    if let Some(message) = v["errors"][0]["message"].as_str() {
        return Err(Error::Unavailable(format!("Tibber: {message}")));
    }
    let info = &v["data"]["viewer"]["homes"][0]["currentSubscription"]["priceInfo"];
    if info.is_null() {
        return Err(Error::Unavailable(
            "Tibber: no home with a current subscription".into(),
        ));
    }
    let mut entries = Vec::new();
    for day in ["today", "tomorrow"] {
        match &info[day] {
            Value::Array(a) => entries.extend(a.iter()),
            Value::Null => {}
            other => return Err(bad(WHAT, format!("{day} is {other}, not a list"))),
        }
    }
    room(WHAT, entries.len())?;
    let mut starts = Vec::with_capacity(entries.len());
    let mut values = Vec::with_capacity(entries.len());
    let mut currency = None;
    for e in &entries {
        let start = e["startsAt"]
            .as_str()
            .and_then(unix_of)
            .ok_or_else(|| bad(WHAT, format!("startsAt {}", e["startsAt"])))?;
        let total = e["total"]
            .as_f64()
            .ok_or_else(|| bad(WHAT, format!("total {}", e["total"])))?;
        currency = currency.or_else(|| e["currency"].as_str().map(str::to_string));
        starts.push(start);
        values.push(total);
    }
    let slots = starts
        .iter()
        .zip(ends_of(&starts))
        .zip(values)
        .map(|((start, end), value)| Slot {
            start: *start,
            end,
            value,
        })
        .collect();
    checked(
        WHAT,
        Series::from_answer(Quantity::PricePerKwh, currency, slots),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_answer_gives_each_hour_and_an_error_is_said() {
        // The shape of Tibber's API reference (priceInfo of the first home), two hours today
        // and one tomorrow, in SEK, with an offset as Tibber writes it.
        let answer = br#"{"data":{"viewer":{"homes":[{"currentSubscription":{"priceInfo":{
            "today":[{"total":0.4556,"startsAt":"2021-05-11T00:00:00.000+02:00","currency":"SEK"},
                     {"total":0.4399,"startsAt":"2021-05-11T01:00:00.000+02:00","currency":"SEK"}],
            "tomorrow":[{"total":-0.0123,"startsAt":"2021-05-12T00:00:00.000+02:00","currency":"SEK"}]}}}]}}}"#;
        let s = parse_price_info(answer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.slots.len(), 3);
        assert_eq!(s.currency.as_deref(), Some("SEK"));
        // 2021-05-11T00:00+02:00 = 2021-05-10T22:00Z = 1,620,684,000.
        assert_eq!(
            (s.slots[0].start, s.slots[0].end),
            (1_620_684_000.0, 1_620_687_600.0)
        );
        assert_eq!(s.slots[2].value, -0.0123);
        let err = parse_price_info(br#"{"errors":[{"message":"Unauthorized"}],"data":null}"#);
        assert_eq!(
            err.err().map(|e| e.to_string()),
            Some("unavailable: Tibber: Unauthorized".to_string())
        );
        assert!(parse_price_info(b"<html>").is_err());
    }
}
