//! Price and carbon feeds: each feed's answer, as bytes, to a [`Series`] of slots, by a pure
//! `parse_*` per feed. Fetching, caching and pricing with them is the caller's.
//!
//! Rules:
//! - Spot prices arrive per MWh and leave per kWh (÷ 1,000); Octopus's pence leave as pounds
//!   (÷ 100). A unit string a feed is known to misspell ("No Unit") is not relied on.
//! - A slot ends where the feed says, else where the next begins, else one step (the feed's
//!   spacing) after it starts.
//! - Every answer is within [`wattbar_core::slots`]' limits for one answer (slots, their length,
//!   span and values), checked by [`Series::from_answer`], and its count before its slots are
//!   built ([`room`]); a parser that reads a feed's own currency or unit checks it against what
//!   it converts from. Bytes arrive capped by the outbound policy (8 MiB).
//! - An answer that says there is no data (ENTSO-E's acknowledgement) is
//!   [`Error::Unavailable`] with the feed's reason; bytes that are not the feed's shape are
//!   [`Error::Parse`], naming what is wrong. Neither is ever a price of 0.

pub mod awattar;
pub mod carbon_intensity;
pub mod electricity_maps;
pub mod energy_charts;
pub mod entsoe;
pub mod fetch;
pub mod homeassistant;
pub mod octopus;
pub mod tibber;

use crate::Error;
use wattbar_core::slots::{answer_room, BadSlot, Series};

/// A parse error of feed `what`.
fn bad(what: &'static str, message: impl Into<String>) -> Error {
    Error::Parse {
        what,
        line: None,
        message: message.into(),
    }
}

/// [`Series::from_answer`]'s refusal, as feed `what`'s parse error.
fn checked(what: &'static str, series: Result<Series, BadSlot>) -> Result<Series, Error> {
    series.map_err(|e| bad(what, e.0))
}

/// [`answer_room`]'s refusal of `count` slots, as feed `what`'s parse error.
fn room(what: &'static str, count: usize) -> Result<(), Error> {
    answer_room(count).map_err(|e| bad(what, e.0))
}

/// Refuses a unit that says it is not EUR per MWh (`EUR/MWh`, `EUR / MWh`, `Eur/MWh` and
/// `EUR / megawatt_hour` are all seen); no unit, or "No Unit", says nothing.
fn eur_per_mwh(what: &'static str, unit: Option<&str>) -> Result<(), Error> {
    let Some(unit) = unit.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(());
    };
    if unit.eq_ignore_ascii_case("no unit") {
        return Ok(());
    }
    let (money, energy) = unit.split_once('/').unwrap_or((unit, ""));
    let energy = energy.trim().to_ascii_lowercase();
    if money.trim().eq_ignore_ascii_case("eur")
        && matches!(energy.as_str(), "mwh" | "megawatt_hour")
    {
        return Ok(());
    }
    Err(bad(what, format!("prices in {unit:?}, not EUR per MWh")))
}

/// Unix seconds of `2024-05-07T21:30:00Z`, `2025-10-30T23:00Z` (no seconds, as ENTSO-E and the
/// GB Carbon Intensity API write them) or any RFC 3339 time with an offset.
fn unix_of(text: &str) -> Option<f64> {
    let t = text.trim();
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(d.timestamp() as f64);
    }
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%MZ")
        .ok()
        .map(|d| d.and_utc().timestamp() as f64)
}

/// Ends for slots given by their starts only: each the next start, the last one `step` after
/// its own, `step` being the smallest spacing seen (one hour for a single slot).
fn ends_of(starts: &[f64]) -> Vec<f64> {
    let step = starts
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d > 0.0)
        .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.min(d))))
        .unwrap_or(3600.0);
    starts
        .iter()
        .enumerate()
        .map(|(i, s)| starts.get(i + 1).copied().unwrap_or(s + step))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_with_and_without_seconds_are_read_as_utc() {
        assert_eq!(unix_of("2024-05-07T21:30:00Z"), Some(1_715_117_400.0));
        assert_eq!(unix_of("2025-10-30T23:00Z"), Some(1_761_865_200.0));
        assert_eq!(unix_of("2024-06-14T00:00:00+02:00"), Some(1_718_316_000.0));
        assert_eq!(unix_of("yesterday"), None);
        assert_eq!(ends_of(&[0.0, 900.0, 1800.0]), [900.0, 1800.0, 2700.0]);
        assert_eq!(ends_of(&[0.0]), [3600.0]);
    }
}
