//! ENTSO-E Transparency, day-ahead prices (documentType A44): an XML
//! `Publication_MarketDocument` of `TimeSeries`, each with its currency, unit (per MWh) and
//! `Period`s (`timeInterval`, `resolution` PT15M or PT60M, `Point`s of `position` and
//! `price.amount`). "No data" is an `Acknowledgement_MarketDocument` with a reason.
//!
//! Rules:
//! - Curve type A03: a position that is absent carries the price of the one before it. A first
//!   position that is absent stays a gap.
//! - Several sequences may price one day (`classificationSequence…position`: since October 2025
//!   SDAC and the EXAA auction; before, PT60M and PT15M of one market). One is taken, never two
//!   merged: sequence 1 where there is one, else the lowest.
//!
//! Limits, each checked before anything is built from it: elements nest at most [`MAX_DEPTH`]
//! deep; a DOCTYPE is refused (market documents have none, and entities are never expanded);
//! points are counted as read; a Period is filled only when its resolution is at least
//! [`MIN_SLOT_SECONDS`] and its slots fit [`answer_room`] (a Period to 9999-12-31, or one of
//! `PT0.0001M`, is an error, not 6.5 GB). A market document that yields no slot is an error.

use super::{bad, checked, room, unix_of};
use crate::Error;
use quick_xml::events::Event;
use quick_xml::Reader;
use wattbar_core::slots::{Quantity, Series, Slot, MAX_ANSWER_SLOTS, MIN_SLOT_SECONDS};

const WHAT: &str = "ENTSO-E A44";

/// How deep elements may nest: a genuine A44 answer nests 5 deep.
pub const MAX_DEPTH: usize = 16;

#[derive(Debug, Default)]
struct Period {
    start: Option<f64>,
    end: Option<f64>,
    step: Option<f64>,
    points: Vec<(u32, f64)>,
}

#[derive(Debug, Default)]
struct TimeSeries {
    sequence: Option<u32>,
    currency: Option<String>,
    unit: Option<String>,
    periods: Vec<Period>,
}

/// Seconds of an ISO 8601 resolution: `PT15M`, `PT60M`, `PT1H`, `P1D`.
fn step_of(text: &str) -> Option<f64> {
    let t = text.trim();
    let (number, unit) = t.strip_prefix("PT").map_or_else(
        || {
            t.strip_prefix('P')
                .map(|d| (d.trim_end_matches('D'), 86_400.0))
        },
        |rest| {
            if let Some(m) = rest.strip_suffix('M') {
                Some((m, 60.0))
            } else {
                rest.strip_suffix('H').map(|h| (h, 3600.0))
            }
        },
    )?;
    number
        .parse::<f64>()
        .ok()
        .filter(|n| *n > 0.0)
        .map(|n| n * unit)
}

/// The prices of an A44 answer, per kWh in its currency.
pub fn parse_a44(bytes: &[u8]) -> Result<Series, Error> {
    let mut reader = Reader::from_reader(bytes);
    reader.config_mut().trim_text(true);
    let mut path: Vec<String> = Vec::new();
    let mut series: Vec<TimeSeries> = Vec::new();
    let mut reason: Vec<String> = Vec::new();
    let mut root: Option<String> = None;
    let mut position: Option<u32> = None;
    let mut buf = Vec::new();
    let mut points = 0usize;
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| bad(WHAT, e.to_string()))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().into_inner().to_string();
                root.get_or_insert_with(|| name.clone());
                match name.as_str() {
                    "TimeSeries" => series.push(TimeSeries::default()),
                    "Period" => {
                        if let Some(ts) = series.last_mut() {
                            ts.periods.push(Period::default());
                        }
                    }
                    "Point" => {
                        position = None;
                        points += 1;
                        if points > MAX_ANSWER_SLOTS {
                            room(WHAT, points)?;
                        }
                    }
                    _ => {}
                }
                if path.len() >= MAX_DEPTH {
                    return Err(bad(WHAT, format!("elements nest deeper than {MAX_DEPTH}")));
                }
                path.push(name);
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => {
                let text = t.xml10_content().trim().to_string();
                let here = path.last().map(String::as_str).unwrap_or_default();
                let parent = path
                    .len()
                    .checked_sub(2)
                    .and_then(|i| path.get(i))
                    .map(String::as_str)
                    .unwrap_or_default();
                if matches!(here, "code" | "text") && parent == "Reason" {
                    reason.push(text);
                    continue;
                }
                let Some(ts) = series.last_mut() else {
                    continue;
                };
                match (parent, here) {
                    ("TimeSeries", "currency_Unit.name") => ts.currency = Some(text),
                    ("TimeSeries", "price_Measure_Unit.name") => ts.unit = Some(text),
                    (
                        "TimeSeries",
                        "classificationSequence_AttributeInstanceComponent.position",
                    ) => {
                        ts.sequence = text.parse().ok();
                    }
                    (_, "classificationSequence_AttributeInstanceComponent.position") => {
                        ts.sequence = text.parse().ok();
                    }
                    ("timeInterval", "start") => {
                        if let Some(p) = ts.periods.last_mut() {
                            p.start = unix_of(&text);
                        }
                    }
                    ("timeInterval", "end") => {
                        if let Some(p) = ts.periods.last_mut() {
                            p.end = unix_of(&text);
                        }
                    }
                    ("Period", "resolution") => {
                        if let Some(p) = ts.periods.last_mut() {
                            p.step = step_of(&text);
                        }
                    }
                    ("Point", "position") => position = text.parse().ok(),
                    ("Point", "price.amount") => {
                        let price: f64 = text
                            .parse()
                            .map_err(|_| bad(WHAT, format!("price.amount {text:?}")))?;
                        let (Some(pos), Some(p)) = (position, ts.periods.last_mut()) else {
                            return Err(bad(WHAT, "a price with no position"));
                        };
                        p.points.push((pos, price));
                    }
                    _ => {}
                }
            }
            Event::DocType(_) => {
                return Err(bad(WHAT, "a DOCTYPE: a market document has none"));
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    match root.as_deref() {
        Some("Publication_MarketDocument") => {}
        Some("Acknowledgement_MarketDocument") => {
            return Err(Error::Unavailable(format!(
                "ENTSO-E has no prices for this request: {}",
                if reason.is_empty() {
                    "no reason given".to_string()
                } else {
                    reason.join(" ")
                }
            )));
        }
        other => return Err(bad(WHAT, format!("not a market document: {other:?}"))),
    }
    let chosen = series
        .iter()
        .map(|ts| ts.sequence.unwrap_or(1))
        .min()
        .ok_or_else(|| bad(WHAT, "no TimeSeries"))?;
    let mut currency: Option<String> = None;
    let mut slots = Vec::new();
    for ts in series
        .iter()
        .filter(|ts| ts.sequence.unwrap_or(1) == chosen)
    {
        if ts
            .unit
            .as_deref()
            .is_some_and(|u| !u.eq_ignore_ascii_case("MWH"))
        {
            return Err(bad(WHAT, format!("prices per {:?}, not per MWh", ts.unit)));
        }
        match (&currency, &ts.currency) {
            (Some(a), Some(b)) if a != b => {
                return Err(bad(WHAT, format!("prices in {a} and in {b}")));
            }
            (None, Some(b)) => currency = Some(b.clone()),
            _ => {}
        }
        for p in &ts.periods {
            let (Some(start), Some(end), Some(step)) = (p.start, p.end, p.step) else {
                return Err(bad(WHAT, "a Period without its interval or resolution"));
            };
            if step < MIN_SLOT_SECONDS {
                return Err(bad(
                    WHAT,
                    format!("a resolution of {step} s, finer than any market's"),
                ));
            }
            let count = ((end - start) / step).round();
            if !(0.0..=MAX_ANSWER_SLOTS as f64).contains(&count) {
                return Err(bad(
                    WHAT,
                    format!("a Period of {count} slots, more than the {MAX_ANSWER_SLOTS} one answer may hold"),
                ));
            }
            room(WHAT, slots.len() + count as usize)?;
            let n = count as u32;
            let mut points = p.points.clone();
            points.sort_by_key(|(pos, _)| *pos);
            let mut last: Option<f64> = None;
            let mut given = points.iter().peekable();
            for pos in 1..=n {
                while given.next_if(|(q, _)| *q < pos).is_some() {}
                if let Some((_, price)) = given.next_if(|(q, _)| *q == pos) {
                    last = Some(*price);
                }
                if let Some(price) = last {
                    let s = start + f64::from(pos - 1) * step;
                    slots.push(Slot {
                        start: s,
                        end: s + step,
                        value: price / 1000.0,
                    });
                }
            }
        }
    }
    if slots.is_empty() {
        return Err(bad(WHAT, "a market document with no price in it"));
    }
    checked(
        WHAT,
        Series::from_answer(Quantity::PricePerKwh, currency, slots),
    )
}
