//! Answers no feed should give, sent to a running `serve`: 400,000 one-second Energy-Charts slots
//! (about 6 MB, within the 8 MiB an answer may be) and an ENTSO-E Period running to 9999-12-31.
//! Each is refused in the feed's `error`, saying why, while the engine samples on: throughout,
//! its sample is never older than 2 s and the process never holds more than 100 MiB. (Answers
//! made for the test, not captures.)

use crate::common::Serve;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The most resident memory `serve` may hold while it fetches and refuses.
const MAX_RSS_MIB: f64 = 100.0;
/// The oldest its latest sample may be, at a 250 ms pace.
const MAX_AGE_SECONDS: f64 = 2.0;
/// How long the engine is watched after the refusal shows.
const WATCHED_AFTER: Duration = Duration::from_secs(5);

/// Runs `serve` with `price_feed`; watches its sample's age and its memory until the feed's
/// error shows and for [`WATCHED_AFTER`] more; the error.
fn refused_while_sampling(price_feed: Value) -> String {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        json!({ "price_feed": price_feed }).to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts\n0,100\n1,100\n",
        &["--interval", "250ms"],
    );
    let pid = serve.child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut refused: Option<(String, Instant)> = None;
    let (mut oldest, mut most) = (0.0f64, 0.0f64);
    loop {
        most = most.max(crate::common::rss_mib(pid));
        let summary = serve.get("/v1/summary");
        if let Some(age) = summary["age_seconds"].as_f64() {
            oldest = oldest.max(age);
        }
        if refused.is_none() {
            let feed = &serve.get("/v1/dashboard")["state"]["prices"]["price"];
            if let Some(e) = feed["error"].as_str() {
                assert_eq!(feed["slots"], json!([]), "{feed}");
                refused = Some((e.to_string(), Instant::now()));
            }
        }
        match &refused {
            Some((_, at)) if at.elapsed() >= WATCHED_AFTER => break,
            _ => assert!(Instant::now() < deadline, "no refusal: {summary}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        oldest <= MAX_AGE_SECONDS,
        "the engine's sample was {oldest} s old"
    );
    assert!(most <= MAX_RSS_MIB, "serve held {most} MiB");
    let (status, _) = serve.terminate();
    assert!(status.success());
    refused.map(|(e, _)| e).unwrap_or_default()
}

#[test]
fn four_hundred_thousand_one_second_slots_are_refused_and_the_engine_samples_on() {
    let from = 1_796_000_000u64;
    let starts: Vec<u64> = (from..from + 400_000).collect();
    let prices = vec![80u32; starts.len()];
    let body = json!({"unix_seconds": starts, "price": prices, "unit": "EUR / MWh"}).to_string();
    assert!((5 << 20..8 << 20).contains(&body.len()), "{}", body.len());
    let url = crate::prices::serve_text(body, "application/json");
    let error =
        refused_while_sampling(json!({"source": "energy-charts", "bzn": "DE-LU", "url": url}));
    assert!(error.contains("400000 slots in one answer"), "{error}");
}

#[test]
fn an_entsoe_period_to_the_year_9999_is_refused_and_the_engine_samples_on() {
    // One hour a slot from 2026 to the end of 9999: 70 million slots, were they filled.
    let body = "<Publication_MarketDocument><TimeSeries>\
        <currency_Unit.name>EUR</currency_Unit.name>\
        <price_Measure_Unit.name>MWH</price_Measure_Unit.name><Period><timeInterval>\
        <start>2026-12-04T23:00Z</start><end>9999-12-31T23:00Z</end></timeInterval>\
        <resolution>PT60M</resolution><Point><position>1</position>\
        <price.amount>80</price.amount></Point></Period></TimeSeries>\
        </Publication_MarketDocument>"
        .to_string();
    let url = crate::prices::serve_text(body, "application/xml");
    let error = refused_while_sampling(json!({
        "source": "entsoe",
        "zone": "10Y1001A1001A82H",
        "token": "s3cret-entsoe-token",
        "url": url,
    }));
    assert!(
        error.contains("slots, more than the 2592 one answer may hold"),
        "{error}"
    );
}
