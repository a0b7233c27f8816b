//! Every feed parser on answers no feed gave: the feed's own shape with any count of slots (a
//! few, around the limit of one answer, and 100,000), any step (1 s to a month), any value (the
//! extremes included). What is taken is within one answer's limits; what is not is an error;
//! and no parse holds more memory at once than 32 bytes for each byte of the answer plus 1 MiB
//! (measured by this binary's allocator: its own test binary, one test, so nothing else
//! allocates meanwhile).

use peak_alloc::PeakAlloc;
use proptest::prelude::*;
use wattbar_core::slots::{
    Quantity, Series, MAX_ANSWER_SLOTS, MAX_ANSWER_SPAN_SECONDS, MAX_CARBON_G_PER_KWH,
    MIN_SLOT_SECONDS,
};
use wattbar_core::tariff::MAX_PRICE_PER_KWH;
use wattbar_sources::prices::{
    awattar, carbon_intensity, energy_charts, entsoe, homeassistant, octopus, tibber,
};

// This binary's one test runs its cases one after another, so the peak is the parse's own.
#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// The most memory `parse` held at once over what was held before it.
fn peak_of<T>(parse: impl FnOnce() -> T) -> (T, usize) {
    let before = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let out = parse();
    (out, HEAP.peak_usage().saturating_sub(before))
}

fn within_limits(s: &Series) -> Result<(), TestCaseError> {
    prop_assert!(s.slots.len() <= MAX_ANSWER_SLOTS);
    for x in &s.slots {
        prop_assert!(x.end - x.start >= MIN_SLOT_SECONDS, "{x:?}");
        let plausible = match s.quantity {
            Quantity::PricePerKwh => x.value.abs() <= MAX_PRICE_PER_KWH,
            Quantity::GramsPerKwh => (0.0..=MAX_CARBON_G_PER_KWH).contains(&x.value),
        };
        prop_assert!(plausible, "{x:?}");
    }
    if let Some((a, b)) = s.span() {
        prop_assert!(b - a <= MAX_ANSWER_SPAN_SECONDS);
    }
    Ok(())
}

fn checked(bytes: &[u8], parse: impl FnOnce(&[u8]) -> Option<Series>) -> Result<(), TestCaseError> {
    let (taken, peak) = peak_of(|| parse(bytes));
    prop_assert!(
        peak <= 32 * bytes.len() + (1 << 20),
        "{peak} bytes held for an answer of {}",
        bytes.len()
    );
    if let Some(s) = taken {
        within_limits(&s)?;
    }
    Ok(())
}

/// What one generated answer holds: `count` slots from `start`, `step` apart, all at `value`.
#[derive(Debug, Clone)]
struct Answer {
    count: usize,
    start: i64,
    step: i64,
    value: f64,
}

fn answer() -> impl Strategy<Value = Answer> {
    let count = prop_oneof![
        4 => 0usize..50,
        2 => (MAX_ANSWER_SLOTS - 5)..(MAX_ANSWER_SLOTS + 5),
        1 => Just(100_000usize),
    ];
    let step = prop_oneof![
        Just(1i64),
        Just(60),
        Just(299),
        Just(300),
        Just(900),
        Just(3600),
        Just(2_678_400)
    ];
    let value = prop_oneof![
        -500.0..4000.0f64,
        Just(0.0),
        Just(1e308),
        Just(-1e308),
        Just(f64::MIN_POSITIVE),
    ];
    (count, 1_600_000_000i64..1_800_000_000, step, value).prop_map(|(count, start, step, value)| {
        Answer {
            count,
            start,
            step,
            value,
        }
    })
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

fn list(a: &Answer, each: impl Fn(i64, i64) -> String) -> String {
    let items: Vec<String> = (0..a.count as i64)
        .map(|i| each(a.start + i * a.step, a.start + (i + 1) * a.step))
        .collect();
    items.join(",")
}

/// One generated answer of feed `feed`, parsed and checked.
fn feed_answer(feed: usize, a: &Answer) -> Result<(), TestCaseError> {
    match feed {
        0 => {
            let times = list(a, |s, _| s.to_string());
            let prices = list(a, |_, _| format!("{:e}", a.value));
            let price =
                format!(r#"{{"unix_seconds":[{times}],"price":[{prices}],"unit":"EUR / MWh"}}"#);
            checked(price.as_bytes(), |b| energy_charts::parse_price(b).ok())?;
            let co2 = format!(r#"{{"unix_seconds":[{times}],"co2eq":[{prices}]}}"#);
            checked(co2.as_bytes(), |b| energy_charts::parse_co2eq(b).ok())
        }
        1 => {
            let data = list(a, |s, e| {
                format!(
                    r#"{{"start_timestamp":{},"end_timestamp":{},"marketprice":{:e},"unit":"Eur/MWh"}}"#,
                    s * 1000,
                    e * 1000,
                    a.value
                )
            });
            let body = format!(r#"{{"object":"list","data":[{data}]}}"#);
            checked(body.as_bytes(), |b| awattar::parse_marketdata(b).ok())
        }
        2 => {
            let results = list(a, |s, e| {
                format!(
                    r#"{{"value_exc_vat":1,"value_inc_vat":{:e},"valid_from":"{}","valid_to":"{}"}}"#,
                    a.value,
                    rfc3339(s),
                    rfc3339(e)
                )
            });
            let body = format!(
                r#"{{"count":{},"next":null,"results":[{results}]}}"#,
                a.count
            );
            checked(body.as_bytes(), |b| {
                octopus::parse_unit_rates(b).ok().map(|(s, _)| s)
            })
        }
        3 => {
            let points = list(a, |s, _| {
                format!(
                    "<Point><position>{}</position><price.amount>{:e}</price.amount></Point>",
                    (s - a.start) / a.step + 1,
                    a.value
                )
            });
            let end = a.start + (a.count.max(1) as i64) * a.step;
            let body = format!(
                "<Publication_MarketDocument><TimeSeries><currency_Unit.name>EUR\
                 </currency_Unit.name><price_Measure_Unit.name>MWH</price_Measure_Unit.name>\
                 <Period><timeInterval><start>{}</start><end>{}</end></timeInterval>\
                 <resolution>PT{}M</resolution>{points}</Period></TimeSeries>\
                 </Publication_MarketDocument>",
                rfc3339(a.start),
                rfc3339(end),
                a.step as f64 / 60.0
            );
            checked(body.as_bytes(), |b| entsoe::parse_a44(b).ok())
        }
        4 => {
            let today = list(a, |s, _| {
                format!(
                    r#"{{"total":{:e},"startsAt":"{}","currency":"SEK"}}"#,
                    a.value,
                    rfc3339(s)
                )
            });
            let body = format!(
                r#"{{"data":{{"viewer":{{"homes":[{{"currentSubscription":{{"priceInfo":{{"today":[{today}],"tomorrow":[]}}}}}}]}}}}}}"#
            );
            checked(body.as_bytes(), |b| tibber::parse_price_info(b).ok())
        }
        5 => {
            let raw = list(a, |s, e| {
                format!(
                    r#"{{"start":"{}","end":"{}","value":{:e}}}"#,
                    rfc3339(s),
                    rfc3339(e),
                    a.value
                )
            });
            let body = format!(
                r#"{{"state":"1","attributes":{{"unit_of_measurement":"EUR/kWh","raw_today":[{raw}]}}}}"#
            );
            checked(body.as_bytes(), |b| {
                homeassistant::parse_entity(b, a.start as f64).ok()
            })
        }
        _ => {
            let data = list(a, |s, e| {
                format!(
                    r#"{{"from":"{}","to":"{}","intensity":{{"forecast":{:e},"index":"low"}}}}"#,
                    rfc3339(s),
                    rfc3339(e),
                    a.value
                )
            });
            let body = format!(r#"{{"data":[{data}]}}"#);
            checked(body.as_bytes(), |b| {
                carbon_intensity::parse_intensity(b).ok()
            })
        }
    }
}

/// The feeds: Energy-Charts (price and co2eq), aWATTar, Octopus, ENTSO-E, Tibber, Home
/// Assistant, GB Carbon Intensity.
const FEEDS: usize = 7;

/// Cases of this test: each answer runs to 100,000 slots (past the 8 MiB cap), so the suite's
/// 10,000 (`PROPTEST_CASES`, which `proptest!` would apply over any count given here) would take
/// minutes; 500 cover every feed, size band, step and value many times over in about 20 s.
const CASES: u32 = 500;

#[test]
fn every_feed_answer_is_within_limits_or_refused_in_bounded_memory() {
    // The suite's seed (`PROPTEST_RNG_SEED`), as every other property test has it; this count.
    let config = ProptestConfig {
        cases: CASES,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let ran = runner.run(&(0..FEEDS, answer()), |(feed, a)| feed_answer(feed, &a));
    if let Err(e) = ran {
        panic!("{e}");
    }
}
