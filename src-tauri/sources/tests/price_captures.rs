//! Every price and carbon capture in `../shared/fixtures/tariffs/` (read in place, never copied)
//! against what its SOURCES.md and the file itself give: the slots' count, the first and last,
//! and a price worked by hand, per kWh. No capture there has a day of 23 or 25 hours, a Tibber,
//! an Energy-Charts `co2eq` or an Electricity Maps answer.

use std::path::PathBuf;
use wattbar_core::slots::{Quantity, Series};
use wattbar_sources::prices::{awattar, carbon_intensity, energy_charts, entsoe, octopus};
use wattbar_sources::Error;

fn capture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/tariffs")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

/// The series' count, first start, last end.
fn shape(s: &Series) -> (usize, f64, f64) {
    let (first, last) = s.span().unwrap_or_else(|| panic!("no slot"));
    (s.slots.len(), first, last)
}

#[test]
fn energy_charts_hourly_day_ahead_whatever_its_unit_string_says() {
    let s = energy_charts::parse_price(&capture(
        "energycharts-price-DE-LU-hourly-unit-NoUnit-2024-12-08.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // 24 hours from 2024-12-07T23:00Z (00:00 CET) to 2024-12-08T23:00Z.
    assert_eq!(
        shape(&s),
        (24, 1_733_612_400.0, 1_733_612_400.0 + 24.0 * 3600.0)
    );
    assert_eq!(
        (s.quantity, s.currency.as_deref()),
        (Quantity::PricePerKwh, Some("EUR"))
    );
    // 93.91 EUR/MWh = 0.09391 EUR/kWh for the first hour, 75.01 for the last.
    assert!(close(s.slots[0].value, 0.09391));
    assert!(close(s.slots[23].value, 0.07501));
    assert!(s.slots.iter().all(|x| close(x.end - x.start, 3600.0)));
}

#[test]
fn awattar_keeps_negative_and_zero_prices_as_they_are() {
    let s = awattar::parse_marketdata(&capture(
        "awattar-marketdata-DE-negative-prices-2024-06-14to16.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // 72 hours, 2024-06-13T22:00Z to 2024-06-16T22:00Z (the openHAB test asks for these).
    assert_eq!(shape(&s), (72, 1_718_316_000.0, 1_718_575_200.0));
    assert_eq!(s.slots.iter().filter(|x| x.value < 0.0).count(), 20);
    // The minimum, -80.01 EUR/MWh at 2024-06-15T12:00Z, is -0.08001 EUR/kWh.
    assert!(close(s.at(1_718_452_800.0).unwrap_or_default(), -0.08001));
    // Exactly 0 at 2024-06-15T06:00Z: a price of nothing, not a missing one.
    assert_eq!(s.at(1_718_431_200.0), Some(0.0));
    // The first hour: 83.13 EUR/MWh.
    assert!(close(s.slots[0].value, 0.08313));
}

#[test]
fn octopus_agile_newest_first_in_pence_becomes_time_order_in_pounds() {
    let (s, next) = octopus::parse_unit_rates(&capture(
        "octopus-agile-standard-unit-rates-AGILE-FLEX-22-11-25-J-2024-05-07-page1-trimmed5.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Five half-hours, 2024-05-07T19:30Z to 22:00Z.
    assert_eq!(shape(&s), (5, 1_715_110_200.0, 1_715_119_200.0));
    assert_eq!(s.currency.as_deref(), Some("GBP"));
    // 19:30Z: 22.5435 p/kWh with VAT = £0.225435; 21:30Z: 18.291 p.
    assert!(close(s.slots[0].value, 0.225435));
    assert!(close(s.slots[4].value, 0.18291));
    assert!(next.is_some_and(|n| n.ends_with("standard-unit-rates/?page=2")));
}

#[test]
fn entsoe_15_minutes_takes_one_sequence_and_never_mixes_the_other_in() {
    let s = entsoe::parse_a44(&capture(
        "entsoe-A44-DE-LU-PT15M-seq2-seq1-A03-gaps-2025-10-31-day1-of-2.xml",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Sequence 1 (listed second): 96 quarter-hours of 2025-10-31 CET, from 2025-10-30T23:00Z.
    let start = 1_761_865_200.0;
    assert_eq!(shape(&s), (96, start, start + 96.0 * 900.0));
    assert_eq!(s.currency.as_deref(), Some("EUR"));
    assert!(s.slots.iter().all(|x| close(x.end - x.start, 900.0)));
    // Position 1 is sequence 1's 102.81, not sequence 2's 91.45; its maximum 138.95 at
    // position 64 (15:45 CET), its minimum 42.37 at position 96.
    assert!(close(s.slots[0].value, 0.10281));
    assert!(close(
        s.at(start + 63.0 * 900.0).unwrap_or_default(),
        0.13895
    ));
    assert!(close(s.slots[95].value, 0.04237));
}

#[test]
fn entsoe_a03_gaps_carry_the_price_before_and_negative_prices_stay() {
    let s = entsoe::parse_a44(&capture(
        "entsoe-A44-DE-LU-PT60M-seq1-PT15M-seq2-overlap-2024-10-06-07.xml",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Sequence 1, hourly: two days of 24 (the first day gives 23 points, position 15 absent).
    let start = 1_728_165_600.0; // 2024-10-05T22:00Z
    assert_eq!(shape(&s), (48, start, start + 48.0 * 3600.0));
    // Position 14 (11:00Z) is -0.01 EUR/MWh; absent 15 (12:00Z) carries it; 16 is 0.2.
    let at = |h: f64| s.at(start + h * 3600.0).unwrap_or(f64::NAN);
    assert!(close(at(13.0), -0.00001));
    assert!(close(at(14.0), -0.00001));
    assert!(close(at(15.0), 0.0002));
    // The second day's first hour: 34.58.
    assert!(close(at(24.0), 0.03458));

    let be = entsoe::parse_a44(&capture("entsoe-A44-BE-PT60M-2024-10-08.xml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let start = 1_728_338_400.0; // 2024-10-07T22:00Z
    assert_eq!(shape(&be), (24, start, start + 24.0 * 3600.0));
    assert!(close(be.slots[0].value, 0.06498));
    let lowest = be
        .slots
        .iter()
        .map(|x| x.value)
        .fold(f64::INFINITY, f64::min);
    assert!(close(lowest, 0.04705));
}

#[test]
fn entsoe_no_matching_data_is_unavailable_with_its_reason_never_a_price() {
    match entsoe::parse_a44(&capture(
        "entsoe-acknowledgement-999-no-matching-data-2016-03-30.xml",
    )) {
        Err(Error::Unavailable(why)) => assert_eq!(
            why,
            "ENTSO-E has no prices for this request: 999 No matching data found"
        ),
        other => panic!("{other:?}"),
    }
    // Bytes that are not a market document at all.
    assert!(matches!(
        entsoe::parse_a44(b"<html><body>Bad Gateway</body></html>"),
        Err(Error::Parse { .. })
    ));
}

#[test]
fn gb_carbon_intensity_regional_answer_nests_its_half_hours() {
    let s = carbon_intensity::parse_intensity(&capture(
        "carbonintensity-regional-intensity-postcode-BS7-newyear-2022-12-31.json",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    // Five half-hours, 2022-12-31T23:30Z to 2023-01-01T02:00Z: forecasts 152 … 175 g/kWh.
    assert_eq!(shape(&s), (5, 1_672_529_400.0, 1_672_538_400.0));
    assert_eq!(
        (s.quantity, s.currency.as_deref()),
        (Quantity::GramsPerKwh, None)
    );
    let values: Vec<f64> = s.slots.iter().map(|x| x.value).collect();
    assert_eq!(values, [152.0, 181.0, 189.0, 183.0, 175.0]);
}

#[test]
fn answers_that_are_not_the_feeds_shape_are_errors_naming_the_feed() {
    for (what, parsed) in [
        (
            "Energy-Charts",
            energy_charts::parse_price(b"{\"unix_seconds\":[1,2],\"price\":[3]}"),
        ),
        ("aWATTar", awattar::parse_marketdata(b"<html>")),
        (
            "GB carbon",
            carbon_intensity::parse_intensity(b"{\"error\":\"x\"}"),
        ),
    ] {
        match parsed {
            Err(e @ Error::Parse { .. }) => assert!(e.to_string().contains(what), "{e}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // A price that is not a number is refused, not read as 0.
    assert!(energy_charts::parse_price(b"{\"unix_seconds\":[0],\"price\":[\"x\"]}").is_err());
}

/// An A44 document of one Period, as ENTSO-E writes it, with `points` prices of 50 EUR/MWh.
fn a44(start: &str, end: &str, resolution: &str, points: usize, price: &str) -> String {
    let mut doc = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Publication_MarketDocument>\
         <TimeSeries><currency_Unit.name>EUR</currency_Unit.name>\
         <price_Measure_Unit.name>MWH</price_Measure_Unit.name>\
         <Period><timeInterval><start>{start}</start><end>{end}</end></timeInterval>\
         <resolution>{resolution}</resolution>"
    );
    for p in 1..=points {
        doc.push_str(&format!(
            "<Point><position>{p}</position><price.amount>{price}</price.amount></Point>"
        ));
    }
    doc.push_str("</Period></TimeSeries></Publication_MarketDocument>");
    doc
}

fn refusal(parsed: Result<Series, Error>) -> String {
    match parsed {
        Err(e) => e.to_string(),
        Ok(s) => panic!("taken: {} slots", s.slots.len()),
    }
}

#[test]
fn entsoe_a_period_to_the_year_9999_or_of_a_ten_thousandth_minute_is_refused_not_filled() {
    // A well-formed day of 24 hours at 50 EUR/MWh is 24 slots of 0.05 EUR/kWh.
    let day = a44("2024-10-07T22:00Z", "2024-10-08T22:00Z", "PT60M", 24, "50");
    let s = entsoe::parse_a44(day.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.slots.len(), 24);
    assert!(close(s.slots[0].value, 0.05));
    // One point, carried forward (curve A03) to 9999-12-31: 70 million hours, refused by count.
    let far = a44("2024-10-07T22:00Z", "9999-12-31T23:00Z", "PT60M", 1, "50");
    assert!(refusal(entsoe::parse_a44(far.as_bytes())).contains("slots"));
    // PT0.0001M is 6 ms a slot.
    let fine = a44(
        "2024-10-07T22:00Z",
        "2024-10-08T22:00Z",
        "PT0.0001M",
        1,
        "50",
    );
    assert!(refusal(entsoe::parse_a44(fine.as_bytes())).contains("resolution"));
}

#[test]
fn entsoe_a_doctype_an_absurd_price_or_no_price_at_all_is_an_error() {
    let day = a44("2024-10-07T22:00Z", "2024-10-08T22:00Z", "PT60M", 24, "50");
    let with_doctype = day.replacen(
        "<Publication_MarketDocument>",
        "<!DOCTYPE x [<!ENTITY a \"aaaa\">]><Publication_MarketDocument>",
        1,
    );
    assert!(refusal(entsoe::parse_a44(with_doctype.as_bytes())).contains("DOCTYPE"));
    for absurd in ["1e308", "-1e308"] {
        let doc = a44(
            "2024-10-07T22:00Z",
            "2024-10-08T22:00Z",
            "PT60M",
            24,
            absurd,
        );
        assert!(refusal(entsoe::parse_a44(doc.as_bytes())).contains("no grid's"));
    }
    let empty = a44("2024-10-07T22:00Z", "2024-10-08T22:00Z", "PT60M", 0, "50");
    assert!(refusal(entsoe::parse_a44(empty.as_bytes())).contains("no price"));
    let deep = format!("<Publication_MarketDocument>{}", "<TimeSeries>".repeat(100));
    assert!(refusal(entsoe::parse_a44(deep.as_bytes())).contains("deeper"));
}
