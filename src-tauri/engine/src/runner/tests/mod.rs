//! The runner, driven on tokio's paused clock through replayed traces.

mod calibration;
mod clocks;
mod prefs;
mod prices;
mod profiles;
mod programs;
mod records;
mod resident;
mod rest;
mod totals;
mod wear;

use super::*;
use crate::command::External;
use crate::published::Point;
use crate::time::clock::ManualClock;
use std::time::Duration;
use wattbar_core::meter::Method;
use wattbar_core::{Currency, Preferences, Price, Quality, Source, Stamp, Watts};
use wattbar_sources::{replay::parse_trace, ReplaySource};

/// Tests run on tokio's paused clock; the engine's clock follows it.
fn config(prefs: Preferences) -> EngineConfig {
    EngineConfig::new(prefs).with_clock(Arc::new(ManualClock::new(1_800_000_000.0)))
}

fn start(chain: Chain, config: EngineConfig) -> EngineHandle {
    spawn(chain, config).unwrap_or_else(|e| panic!("{e}"))
}

fn replay(csv: &str) -> Chain {
    let trace = parse_trace(csv).unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
    Chain::new(sources)
}

/// A GPU at 100 W whose energy counter keeps counting, asleep or not: a headline from a counter.
struct Gpu(ManualClock);

impl Source for Gpu {
    fn id(&self) -> &str {
        "nvml"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        use crate::time::clock::Clock;
        let counted = 100.0 * self.0.elapsed().as_secs_f64();
        Ok(vec![wattbar_core::Reading {
            energy_counter: Some(wattbar_core::Joules(counted)),
            ..wattbar_core::Reading::power(
                wattbar_core::Domain::Gpu,
                Watts(100.0),
                "nvml",
                Quality::Measured,
                at,
            )
            .with_device("0")
        }])
    }
}

async fn wait_for(
    rx: &mut watch::Receiver<Arc<PublishedState>>,
    pred: impl Fn(&PublishedState) -> bool,
) -> Arc<PublishedState> {
    loop {
        let current = rx.borrow_and_update().clone();
        if pred(&current) {
            return current;
        }
        if rx.changed().await.is_err() {
            panic!("engine stopped");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn ten_minutes_at_300_w_publish_180_kj_and_its_cost() {
    let prefs = Preferences {
        price_per_kwh: Price::new(0.40).unwrap_or_default(),
        ..Preferences::default()
    };
    let engine = start(replay("t,watts\n0,300\n"), config(prefs));
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    let head = first
        .snapshot
        .as_ref()
        .and_then(|s| s.headline.clone())
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(300.0)));
    assert_eq!(head.quality, Quality::Measured);
    assert_eq!(head.source, "replay");
    let done = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 180_000.0 - 1e-6).await;
    assert!((done.energy.session.joules.0 - 180_000.0).abs() < 1e-6);
    assert!((done.energy.session.kwh - 0.05).abs() < 1e-9);
    assert!((done.energy.session.cost - 0.02).abs() < 1e-9);
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_new_price_applies_from_then_on_and_is_published_at_once() {
    let engine = start(
        replay("t,watts\n0,3600\n"),
        config(Preferences {
            price_per_kwh: Price::new(0.0).unwrap_or_default(),
            ..Preferences::default()
        }),
    );
    let mut rx = engine.subscribe();
    // 1000 s at 3600 W = 1 kWh, free.
    let free = wait_for(&mut rx, |p| p.energy.session.kwh >= 1.0 - 1e-9).await;
    assert_eq!(free.energy.session.cost, 0.0);
    engine
        .reader()
        .set_preference("price_per_kwh", serde_json::json!(0.5))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The engine thread may sample again before this task sees the change (the channel
    // keeps the latest state): at most what was drawn since `free` is at the new price.
    let priced = wait_for(&mut rx, |p| p.energy.price_per_kwh == 0.5).await;
    let since_free = priced.energy.session.kwh - free.energy.session.kwh;
    assert!(
        priced.energy.session.cost >= 0.0 && priced.energy.session.cost <= 0.5 * since_free + 1e-9,
        "{} EUR for {since_free} kWh since the change",
        priced.energy.session.cost
    );
    // From then on every kWh costs 0.5: one more kWh, 0.5 more.
    let later = wait_for(&mut rx, |p| {
        p.energy.session.kwh >= priced.energy.session.kwh + 1.0 - 1e-9
    })
    .await;
    let added = later.energy.session.kwh - priced.energy.session.kwh;
    assert!(
        (later.energy.session.cost - priced.energy.session.cost - 0.5 * added).abs() < 1e-9,
        "{} EUR for {added} kWh",
        later.energy.session.cost - priced.energy.session.cost
    );
    // The kWh before the change stayed free.
    assert!(
        later.energy.session.cost
            <= 0.5 * (later.energy.session.kwh - free.energy.session.kwh) + 1e-9
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn reset_starts_a_new_session_and_low_power_is_published() {
    let engine = start(replay("t,watts\n0,100\n"), config(Preferences::default()));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 1000.0).await;
    engine
        .send(Command::ResetSession)
        .unwrap_or_else(|e| panic!("{e}"));
    engine
        .send(Command::SetLowPower(true))
        .unwrap_or_else(|e| panic!("{e}"));
    let after = wait_for(&mut rx, |p| p.low_power.state.enabled).await;
    assert_eq!(after.energy.session.joules.0, 0.0);
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn resets_between_samples_lose_no_energy_from_the_lifetime() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = start(
        replay("t,watts\n0,3600\n"),
        config(Preferences::default()).with_store(dir.path().join("wattbar.db")),
    );
    let mut rx = engine.subscribe();
    let mono = |p: &PublishedState| {
        p.snapshot
            .as_ref()
            .map_or(0.0, |s| s.at.monotonic.as_secs_f64())
    };
    // What the store committed plus what waits for the next batch (one scope here).
    let system = |p: &PublishedState| {
        p.kept
            .committed
            .by_scope
            .iter()
            .find(|(s, _)| *s == Some(wattbar_core::Scope::System))
            .map_or(0.0, |(_, j)| *j)
            + p.kept.unwritten_joules
    };
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    // Five resets, each half-way between two samples (one a second).
    for _ in 0..5 {
        wait_for(&mut rx, |p| p.energy.session.joules.0 > 0.0).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        engine
            .send(Command::ResetSession)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let last = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 2.0 * 3600.0).await;
    // 3600 W over every second between the first sample and the last: nothing dropped at the
    // resets (each lost half a second, 1800 J, before).
    let expected = 3600.0 * (mono(&last) - mono(&first));
    let lifetime = system(&last) - system(&first);
    assert!(
        (lifetime - expected).abs() < 1e-6 * expected,
        "{lifetime} J of {expected} J"
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn the_ledger_keeps_what_was_integrated_after_a_shutdown() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let engine = start(
        replay("t,watts\n0,300\n"),
        config(Preferences::default()).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    let done = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 180_000.0 - 1e-6).await;
    // Stored totals trail by at most one batch (5 s at 300 W = 1.5 kJ).
    let stored = done
        .kept
        .totals
        .as_ref()
        .map(|t| t.lifetime.joules)
        .unwrap_or(-1.0);
    assert!(stored >= 180_000.0 - 1_500.0 - 1e-6, "{stored}");
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    let (store, moved) =
        wattbar_ledger::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
    assert!(moved.is_none());
    // A replayed whole-machine figure: the system scope, as the ledger kept it.
    assert_eq!(
        store.last_scope().ok().flatten(),
        Some(wattbar_core::Scope::System)
    );
    let lifetime = store
        .lifetime("EUR", Some(wattbar_core::Scope::System))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!((lifetime.joules - 180_000.0).abs() < 1e-6, "{lifetime:?}");
    assert!((lifetime.kwh - 0.05).abs() < 1e-9);
}

#[tokio::test(start_paused = true)]
async fn a_high_trace_engages_low_power_and_the_store_remembers_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    // 40 W for a minute, then 5 W, against a threshold set at 15 W.
    let mut prefs = Preferences::default();
    prefs.low_power.threshold_w = Some(15.0);
    let engine = start(
        replay("t,watts\n0,40\n60,5\n"),
        config(prefs).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    let on = wait_for(&mut rx, |p| p.low_power.state.enabled).await;
    assert_eq!(
        on.low_power.state.reason,
        Some(wattbar_core::Reason::AutoThreshold)
    );
    assert_eq!(on.low_power.seq, 1);
    assert_eq!(
        on.low_power.event.as_deref(),
        Some("Low-power mode on: above 15 W for 30 s")
    );
    assert!(on.low_power.advice.recommendation.contains("qwen3:1b"));
    let mono = |p: &PublishedState| p.snapshot.as_ref().map(|s| s.at.monotonic.as_secs_f64());
    let engaged_at = mono(&on).unwrap_or(0.0);
    assert!(
        (engaged_at - 30.0).abs() <= 1.0,
        "engaged at {engaged_at} s"
    );
    let off = wait_for(&mut rx, |p| p.low_power.seq == 2).await;
    assert!(!off.low_power.state.enabled);
    // Released 30 s after the draw fell below 12 W at t = 60.
    let released_at = mono(&off).unwrap_or(0.0);
    assert!(
        (released_at - 90.0).abs() <= 1.0,
        "released at {released_at} s"
    );
    engine
        .send(Command::SetLowPower(true))
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for(&mut rx, |p| p.low_power.seq == 3).await;
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    // A restart restores the manual choice, which the low trace does not undo.
    let engine = start(
        replay("t,watts\n0,5\n"),
        config(Preferences::default()).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    let later = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 5.0 * 120.0).await;
    assert!(later.low_power.state.enabled);
    assert_eq!(
        later.low_power.state.reason,
        Some(wattbar_core::Reason::Manual)
    );
    assert_eq!(later.low_power.seq, 0, "nothing changed after the restart");
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    let (store, _) = wattbar_ledger::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
    assert!(store.low_power().map(|s| s.enabled).unwrap_or(false));
}

#[tokio::test(start_paused = true)]
async fn a_ledger_that_refuses_writes_is_said_until_it_takes_them_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let mut c = config(Preferences::default()).with_store(db.clone());
    c.batch_interval = Duration::from_secs(1);
    // 3600 W: 3600 J a second.
    let engine = start(replay("t,watts\n0,3600\n"), c);
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.kept.totals.is_some()).await;
    // Another writer holds the ledger (as a full disk would refuse): every batch fails.
    let other = rusqlite::Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
    other
        .execute_batch("BEGIN IMMEDIATE")
        .unwrap_or_else(|e| panic!("{e}"));
    let failing = wait_for(&mut rx, |p| {
        p.kept
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("not being saved"))
    })
    .await;
    assert!(failing.energy.session.joules.0 > 0.0);
    other
        .execute_batch("COMMIT")
        .unwrap_or_else(|e| panic!("{e}"));
    let recovered = wait_for(&mut rx, |p| p.kept.notice.is_none()).await;
    // Nothing measured while it failed was lost: the ledger holds all the session had then.
    let stored = recovered
        .kept
        .totals
        .as_ref()
        .map_or(0.0, |t| t.lifetime.kwh * 3.6e6);
    assert!(stored >= failing.energy.session.joules.0 - 1e-6, "{stored}");
    // A last batch the ledger refuses is an error, not "written".
    other
        .execute_batch("BEGIN IMMEDIATE")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(engine.shutdown().await.is_err());
}

#[tokio::test(start_paused = true)]
async fn crossing_a_daily_budget_alerts_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 3600 W is 1 Wh a second; the budget is 10 Wh.
    let prefs = Preferences {
        daily_budget_kwh: Some(0.01),
        ..Preferences::default()
    };
    let engine = start(
        replay("t,watts\n0,3600\n"),
        config(prefs).with_store(dir.path().join("wattbar.db")),
    );
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.kept.alert_seq > 0).await;
    assert_eq!(first.kept.alerts.len(), 1);
    assert_eq!(first.kept.alerts[0].kind, "daily-kwh");
    assert!(first.kept.alerts[0].used >= 0.01);
    let later = wait_for(&mut rx, |p| p.energy.session.kwh > 0.05).await;
    assert_eq!(later.kept.alert_seq, 1, "the alert came again");
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}

struct Slow;

impl Source for Slow {
    fn id(&self) -> &str {
        "nvml"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, _at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        Ok(Vec::new())
    }
    fn min_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }
}

#[tokio::test(start_paused = true)]
async fn sampling_never_goes_faster_than_the_slowest_source_updates() {
    let trace = parse_trace("t,watts\n0,10\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace)), Box::new(Slow)];
    let prefs = Preferences {
        interval_ms: 100,
        ..Preferences::default()
    };
    let engine = start(Chain::new(sources), config(prefs));
    let mut rx = engine.subscribe();
    let mono = |p: &PublishedState| p.snapshot.as_ref().map(|s| s.at.monotonic);
    let a = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    let t0 = mono(&a).unwrap_or_default();
    let b = wait_for(&mut rx, |p| mono(p).is_some_and(|t| t > t0)).await;
    let t1 = mono(&b).unwrap_or_default();
    assert!(t1 - t0 >= Duration::from_millis(250), "{:?}", t1 - t0);
    // What was asked for and what is done are both said: a run's figures depend on the latter.
    assert_eq!((b.pace.interval_ms, b.pace.period_ms), (100, 250));
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn the_interval_can_change_while_running() {
    let engine = start(replay("t,watts\n0,10\n"), config(Preferences::default()));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    engine
        .send(Command::SetInterval(Duration::from_millis(100)))
        .unwrap_or_else(|e| panic!("{e}"));
    let at = |p: &PublishedState| {
        p.snapshot
            .as_ref()
            .map(|s| s.at.monotonic)
            .unwrap_or_default()
    };
    let a = wait_for(&mut rx, |p| p.pace.interval_ms == 100).await;
    // The paused clock may run on to the old 1 s tick before the change is applied, so
    // the sample after the change is the reference: the one after it comes 100 ms later.
    let t0 = at(&a);
    let b = wait_for(&mut rx, |p| at(p) > t0).await;
    let t1 = at(&b);
    let c = wait_for(&mut rx, |p| at(p) > t1).await;
    let t2 = at(&c);
    assert!(
        t2 - t1 >= Duration::from_millis(90) && t2 - t1 <= Duration::from_millis(150),
        "{:?}",
        t2 - t1
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_twelve_second_interval_accounts_every_interval() {
    // 100 W sampled every 12 s: four samples, three intervals = 3,600 J.
    let prefs = Preferences {
        interval_ms: 12_000,
        ..Preferences::default()
    };
    let engine = start(replay("t,watts\n0,100\n"), config(prefs));
    let mut rx = engine.subscribe();
    let mono = |p: &PublishedState| p.snapshot.as_ref().map(|s| s.at.monotonic);
    let fourth = wait_for(&mut rx, |p| mono(p) >= Some(Duration::from_secs(36))).await;
    assert_eq!(fourth.energy.session.joules.0, 3_600.0);
    assert_eq!(fourth.energy.session.gaps, 0);
    assert_eq!(fourth.energy.method, Some(Method::Trapezoid));
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_second_engine_on_the_same_ledger_is_refused_and_the_first_goes_on() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let mut first_config = config(Preferences::default()).with_store(db.clone());
    first_config.api = Some("127.0.0.1:9471".into());
    let first = start(replay("t,watts\n0,100\n"), first_config);
    match spawn(
        replay("t,watts\n0,100\n"),
        config(Preferences::default()).with_store(db),
    ) {
        Err(Error::Locked { pid, api, .. }) => {
            assert_eq!(pid, Some(std::process::id()));
            assert_eq!(api.as_deref(), Some("127.0.0.1:9471"));
        }
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a second engine was started on the same ledger"),
    }
    let mut rx = first.subscribe();
    let later = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 2_000.0).await;
    assert_eq!(later.energy.session.joules.0, 2_000.0);
    first.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}
