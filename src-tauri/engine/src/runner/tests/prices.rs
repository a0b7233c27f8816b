//! Prices by the slot, end to end: a loopback Energy-Charts serving the genuine DE-LU answer of
//! 8 December 2024 (read in place from `../shared/fixtures/tariffs/`), a replayed 100 W, the
//! ledger across a restart, and the feed gone for the rest of the day.

use super::*;
use std::io::{BufRead, BufReader, Write as _};
use std::net::TcpListener;
use wattbar_ledger::store::Store;

const CAPTURE: &str = "energycharts-price-DE-LU-hourly-unit-NoUnit-2024-12-08.json";
/// 2024-12-08T09:30Z: half-way through the slot of 09:00Z (10:00 in Berlin).
const START: f64 = 1_733_650_200.0;
const H09: f64 = 1_733_648_400.0;
const H10: f64 = 1_733_652_000.0;
const H11: f64 = 1_733_655_600.0;
const H12: f64 = 1_733_659_200.0;
/// The capture's last slot ends at 2024-12-08T23:00Z.
const CAPTURE_END: f64 = 1_733_698_800.0;

fn capture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/tariffs")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A stand-in for api.energy-charts.info that answers every `/price` with the capture.
fn energy_charts() -> String {
    loopback(CAPTURE, "GET /price?bzn=DE-LU&")
}

/// The first state of a sample taken at `t` (Unix seconds) or later.
async fn until(rx: &mut watch::Receiver<Arc<PublishedState>>, t: f64) -> Arc<PublishedState> {
    wait_for(rx, |p| {
        p.snapshot.as_ref().is_some_and(|s| s.at.unix_seconds >= t)
    })
    .await
}

/// The first state in which the price feed (`carbon`: the carbon feed) has answered, with slots
/// or a reason. The engine's paused clock runs on meanwhile: the intervals before it are the
/// fallback's.
async fn fed(rx: &mut watch::Receiver<Arc<PublishedState>>, carbon: bool) -> Arc<PublishedState> {
    wait_for(rx, |p| {
        let feed = if carbon {
            &p.prices.carbon
        } else {
            &p.prices.price
        };
        feed.as_ref()
            .is_some_and(|f| f.fetched_unix.is_some() || f.error.is_some())
    })
    .await
}

/// A stand-in vendor answering each request whose first line starts with `request` with
/// capture `name` (404 otherwise).
fn loopback(name: &str, request: &'static str) -> String {
    answering(capture(name), request)
}

/// A stand-in vendor answering `body` likewise.
fn answering(body: Vec<u8>, request: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(&mut stream);
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let ok = first.starts_with(request);
            let status = if ok { "200 OK" } else { "404 Not Found" };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body);
            let _ = stream.flush();
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// An address where nothing answers.
fn nowhere() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn prefs(url: &str) -> Preferences {
    let mut p = Preferences {
        price_per_kwh: Price::new(0.50).unwrap_or_default(),
        interval_ms: 60_000,
        ..Preferences::default()
    };
    p.set_field(
        "price_feed",
        &serde_json::json!({"source": "energy-charts", "bzn": "DE-LU", "url": url,
                            "charges": 0.10, "tax": 0.19}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    p
}

/// `(spot per MWh ÷ 1000 + 0.10) × 1.19`.
fn retail(spot_per_mwh: f64) -> f64 {
    (spot_per_mwh / 1000.0 + 0.10) * 1.19
}

fn near(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-3 * b.abs(), "{what}: {a} against {b}");
}

#[tokio::test(start_paused = true)]
async fn a_100_w_session_costs_each_slots_price_and_the_cache_then_the_fallback_carry_on() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let run = |clock_at: f64, url: &str| {
        EngineConfig::new(prefs(url))
            .with_clock(Arc::new(ManualClock::new(clock_at)))
            .with_store(db.clone())
    };

    // Run 0, three hours before: the feed's first answer, kept in the ledger. However long it
    // takes (the paused clock runs on), run 1 starts from it, so every interval of run 1 has a
    // slot from its first sample.
    let engine = start(
        replay("t,watts\n0,100\n"),
        run(START - 3.0 * 3600.0, &energy_charts()),
    );
    fed(&mut engine.subscribe(), false).await;
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    drop(engine);

    // Run 1: from 09:30Z, with the feed answering again. (Energy-Charts' hour of 09:00Z is
    // 10:00 in Berlin.)
    let engine = start(replay("t,watts\n0,100\n"), run(START, &energy_charts()));
    let mut rx = engine.subscribe();
    let done = until(&mut rx, H12).await;
    let s = &done.energy.session;
    let (from, to) = (s.started_unix, H12);
    assert_eq!(from, START);
    // 100 W × (to − from) s; the slots of 09:00Z, 10:00Z and 11:00Z at 110.84, 117.39 and
    // 118.36 EUR/MWh spot: retail 0.2508996, 0.2586941 and 0.2598484 per kWh.
    near(s.joules.0, 100.0 * (to - from), "joules");
    let expected = 100.0
        * ((H10 - from) * retail(110.84) + 3600.0 * retail(117.39) + 3600.0 * retail(118.36))
        / 3.6e6;
    near(s.cost, expected, "session cost");
    assert_eq!(s.fallback_kwh, 0.0, "every interval had a slot");
    let view = done
        .prices
        .price
        .clone()
        .unwrap_or_else(|| panic!("no view"));
    assert_eq!(view.feed, "energy-charts:DE-LU");
    assert_eq!(view.now, Some(retail(116.74)), "12:00Z's slot is in force");
    assert_eq!(view.slots.len(), 24, "the whole capture, from a day back");
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    drop(engine);

    let per_slot = || {
        let store = Store::open_read_only(&db).unwrap_or_else(|e| panic!("{e}"));
        store
            .slot_costs(H09, H12 + 86_400.0)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let kept = per_slot();
    let fed = |start: f64| {
        kept.iter()
            .find(|c| c.start == start && c.price_per_kwh.is_some())
            .cloned()
            .unwrap_or_else(|| panic!("no slot at {start}: {kept:?}"))
    };
    // The two whole hours: 100 W × 3,600 s = 360 kJ = 0.1 kWh each, at their own price.
    for (start, spot) in [(H10, 117.39), (H11, 118.36)] {
        let c = fed(start);
        assert_eq!(c.price_per_kwh, Some(retail(spot)));
        near(c.joules, 360_000.0, "a whole hour's joules");
        near(c.cost, 0.1 * retail(spot), "a whole hour's cost");
    }
    // From 09:30Z: 1,800 s × 100 W = 180 kJ in the first slot, all of it at its price.
    let first = fed(H09);
    near(first.joules, 180_000.0, "the first slot's joules");
    near(first.cost, 0.05 * retail(110.84), "the first slot's cost");
    assert!(
        kept.iter()
            .filter(|c| c.start >= H09)
            .all(|c| c.price_per_kwh.is_some()),
        "no fallback in run 1: {kept:?}"
    );

    // Run 2, after a restart at 12:00Z: the feed is gone. The ledger's slots price until the
    // capture ends at 23:00Z, the fallback after it, flagged, and no interval is left out.
    let engine = start(replay("t,watts\n0,100\n"), run(H12, &nowhere()));
    let mut rx = engine.subscribe();
    let end = H12 + 86_400.0;
    let done = until(&mut rx, end).await;
    let s = &done.energy.session;
    near(s.joules.0, 100.0 * (end - H12), "no gap in the energy");
    // A day offline from 12:00Z: 11 cached hours (to 23:00Z) at their prices, then 13 h × 100 W
    // = 1.3 kWh at the 0.50 fallback.
    let spot: serde_json::Value =
        serde_json::from_slice(&capture(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    let cached: f64 = spot["price"]
        .as_array()
        .unwrap_or_else(|| panic!("no prices"))
        .iter()
        .skip(13)
        .filter_map(serde_json::Value::as_f64)
        .map(|p| 0.1 * retail(p))
        .sum();
    near(s.fallback_kwh, 1.3, "the fallback's kWh");
    near(s.cost, cached + 1.3 * 0.50, "the cost, cache then fallback");
    let view = done
        .prices
        .price
        .clone()
        .unwrap_or_else(|| panic!("no view"));
    assert!(view.error.is_some(), "the failure is said: {view:?}");
    assert_eq!(
        view.now, None,
        "past the cache: the fallback, not a price of 0"
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    drop(engine);

    // The ledger kept run 1's slots as they were, and run 2's beside them.
    let kept = per_slot();
    let c = kept
        .iter()
        .find(|c| c.start == H11 && c.price_per_kwh.is_some())
        .unwrap_or_else(|| panic!("11:00Z is gone"));
    near(c.joules, 360_000.0, "11:00Z after the restart");
    let fallback: f64 = kept
        .iter()
        .filter(|c| c.price_per_kwh.is_none() && c.start >= CAPTURE_END)
        .map(|c| c.joules)
        .sum();
    near(fallback, 4_680_000.0, "the fallback's 13 hours, flagged");
    assert_eq!(
        kept.iter()
            .filter(|c| c.price_per_kwh.is_some() && c.start >= H12)
            .count(),
        11
    );
}

#[tokio::test(start_paused = true)]
async fn grams_follow_the_grid_intensity_in_force_then_the_fixed_figure_past_the_forecast() {
    // The genuine GB Carbon Intensity answer for BS7: half-hours from 2022-12-31T23:30Z at 152,
    // 181, 189, 183 and 175 gCO2/kWh, to 02:00Z. A fixed 300 g/kWh is the fallback.
    const FROM: f64 = 1_672_529_400.0;
    let gb = loopback(
        "carbonintensity-regional-intensity-postcode-BS7-newyear-2022-12-31.json",
        "GET /regional/intensity/",
    );
    let mut p = Preferences {
        interval_ms: 60_000,
        carbon_g_per_kwh: Some(300.0),
        ..Preferences::default()
    };
    p.set_field(
        "carbon_feed",
        &serde_json::json!({"source": "gb-carbon-intensity", "postcode": "BS7", "url": gb}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // From 23:45Z.
    let config = EngineConfig::new(p).with_clock(Arc::new(ManualClock::new(FROM + 900.0)));
    let engine = start(replay("t,watts\n0,100\n"), config);
    let mut rx = engine.subscribe();
    // The session starts again once the answer is in: what came before is the fixed figure's.
    let answered = fed(&mut rx, true).await;
    let before = answered.energy.session.started_unix;
    engine
        .send(Command::ResetSession)
        .unwrap_or_else(|e| panic!("{e}"));
    let end = FROM + 3.0 * 3600.0;
    let done = wait_for(&mut rx, |p| {
        p.snapshot
            .as_ref()
            .is_some_and(|s| s.at.unix_seconds >= end)
            && p.energy.session.started_unix > before
    })
    .await;
    let s = &done.energy.session;
    let from = s.started_unix;
    // 100 W is 100 J a second: grams = 100 × seconds ÷ 3.6 MJ/kWh × g/kWh, per half-hour of
    // the session (which starts once the answer is in), then the fixed 300 g past 02:00Z.
    let halves = [152.0, 181.0, 189.0, 183.0, 175.0, 300.0];
    let expected: f64 = halves
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let (a, b) = (FROM + i as f64 * 1800.0, FROM + (i + 1) as f64 * 1800.0);
            let seconds = (b.min(end) - a.max(from)).max(0.0);
            100.0 * seconds / 3.6e6 * g
        })
        .sum();
    assert!(
        from < FROM + 3600.0,
        "the answer came within half an hour of the clock: {from}"
    );
    near(s.carbon_g.unwrap_or_default(), expected, "grams");
    near(s.joules.0, 100.0 * (end - from), "joules");
    assert_eq!(
        done.prices.carbon.as_ref().and_then(|f| f.now),
        None,
        "past the forecast: the fixed figure, not 0 g"
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn low_power_mode_engages_while_a_kwh_costs_more_than_the_limit() {
    // No feed: the tariffs' price is in force, 0.50 against a limit of 0.40.
    let prefs = Preferences {
        price_per_kwh: Price::new(0.50).unwrap_or_default(),
        low_power: wattbar_core::PolicyConfig {
            above_price: Some(0.40),
            ..Default::default()
        },
        ..Preferences::default()
    };
    let engine = start(replay("t,watts\n0,5\n"), config(prefs));
    let mut rx = engine.subscribe();
    // Within the first minutes (the clock starts at 1,800,000,000), not at some later time.
    let soon = |p: &PublishedState| {
        p.snapshot
            .as_ref()
            .is_some_and(|s| s.at.unix_seconds >= 1_800_000_120.0)
    };
    let on = wait_for(&mut rx, |p| p.low_power.state.enabled || soon(p)).await;
    assert!(on.low_power.state.enabled, "not engaged");
    assert_eq!(on.low_power.state.reason, Some(wattbar_core::Reason::Price));
    // 0.30 from now on: at or below the limit, it is released.
    engine
        .reader()
        .set_preference("price_per_kwh", serde_json::json!(0.30))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let later = engine
        .current()
        .snapshot
        .as_ref()
        .map_or(0.0, |s| s.at.unix_seconds)
        + 120.0;
    let off = wait_for(&mut rx, |p| {
        !p.low_power.state.enabled
            || p.snapshot
                .as_ref()
                .is_some_and(|s| s.at.unix_seconds >= later)
    })
    .await;
    assert!(!off.low_power.state.enabled, "not released");
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_hostile_feed_prices_nothing_says_why_and_the_fallback_prices_all_flagged() {
    // An answer of the feed's shape with a price per kWh of a billion (a unit typed wrong, or
    // worse): no slot of it is kept, so the fixed 0.40 prices every interval, flagged.
    let now: f64 = 1_800_000_000.0;
    let body = serde_json::json!({"unix_seconds": [now - 600.0, now + 3000.0],
                                  "price": [1e12, 2e12], "unit": "EUR / MWh"});
    let vendor = answering(body.to_string().into_bytes(), "GET /price?");
    let mut p = Preferences {
        price_per_kwh: Price::new(0.40).unwrap_or_default(),
        interval_ms: 60_000,
        ..Preferences::default()
    };
    p.set_field(
        "price_feed",
        &serde_json::json!({"source": "energy-charts", "bzn": "DE-LU", "url": vendor}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig::new(p).with_clock(Arc::new(ManualClock::new(now)));
    let engine = start(replay("t,watts\n0,100\n"), config);
    let mut rx = engine.subscribe();
    // Before the answer and after it alike, the fallback prices.
    fed(&mut rx, false).await;
    // An hour at 100 W = 0.1 kWh, at the fallback's 0.40 = 0.04.
    let done = until(&mut rx, now + 3600.0).await;
    let s = &done.energy.session;
    near(s.kwh, 0.1, "kWh");
    near(s.cost, 0.04, "cost at the fallback");
    near(s.fallback_kwh, 0.1, "all of it flagged");
    let view = done
        .prices
        .price
        .clone()
        .unwrap_or_else(|| panic!("no view"));
    assert_eq!(view.now, None);
    assert!(
        view.error
            .as_deref()
            .is_some_and(|e| e.contains("no grid's price")),
        "{view:?}"
    );
    assert!(view.slots.is_empty());
    engine.stop();
}
