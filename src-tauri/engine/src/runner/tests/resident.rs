//! What a resident model costs, learnt while the engine samples: the proxy's reading of the
//! loaded models stands in for `GET /api/ps` (the same type it parses from the genuine capture).

use super::*;
use wattbar_core::inference::resident::{Loaded, ResidentCost, Unload};

fn gemma() -> Vec<Loaded> {
    // tests/fixtures/llm/ollama_api-ps_gemma3_jq-reformatted_issue.json, as the proxy reads it.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/llm/ollama_api-ps_gemma3_jq-reformatted_issue.json"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    wattbar_sources::ollama::parse_ps(&text)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|m| Loaded {
            name: m.name,
            size_vram_bytes: m.size_vram_bytes,
            size_bytes: m.size_bytes,
        })
        .collect()
}

fn gemma_cost(p: &PublishedState) -> Option<ResidentCost> {
    p.inference
        .resident
        .iter()
        .find(|r| r.model == "gemma3:latest")
        .cloned()
}

/// Seconds since the engine's first sample: where the replayed trace is.
fn trace_time(p: &PublishedState, start: Duration) -> u64 {
    p.snapshot
        .as_ref()
        .map_or(0, |s| s.at.monotonic.saturating_sub(start).as_secs())
}

/// Tells the engine, every 5 s of the engine's samples like the proxy's poll, what `set` says
/// for each second from `from` to `to` of the trace.
async fn poll(
    reporter: &crate::inference::Reporter,
    rx: &mut watch::Receiver<Arc<PublishedState>>,
    start: Duration,
    (from, to): (u64, u64),
    set: impl Fn(u64) -> Option<Vec<Loaded>>,
) {
    let mut t = from;
    while t < to {
        reporter.loaded(set(t));
        t += 5;
        wait_for(rx, |p| trace_time(p, start) >= t).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_model_loaded_at_30_w_over_10_w_with_none_costs_20_w_and_its_idle_seconds() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let prefs = Preferences {
        price_per_kwh: Price::new(0.30).unwrap_or_default(),
        ..Preferences::default()
    };
    // 15 min at 10 W with no model loaded, then 30 min at 30 W with gemma3 loaded.
    let trace = "t,watts\n0,10\n900,30\n2700,30\n";
    let engine = start(replay(trace), config(prefs.clone()).with_store(db.clone()));
    let reporter = engine.reader().reporter();
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some())
        .await
        .snapshot
        .as_ref()
        .map_or(Duration::ZERO, |s| s.at.monotonic);
    // Around the switch the server's answer is not trusted: unknown, as a failed poll is.
    let set = |t: u64| match t {
        ..890 => Some(Vec::new()),
        890..915 => None,
        _ => Some(gemma()),
    };
    poll(&reporter, &mut rx, first, (0, 600), set).await;
    let p = engine.current();
    let c = gemma_cost(&p);
    assert!(c.is_none(), "never loaded yet: {c:?}");
    poll(&reporter, &mut rx, first, (600, 1200), set).await;
    // Loaded for 5 min: its draw is known (10 idle intervals are enough for a baseline).
    let c = gemma_cost(&engine.current()).unwrap_or_else(|| panic!("gemma3 is listed"));
    assert!(c.loaded);
    poll(&reporter, &mut rx, first, (1200, 2600), set).await;
    let p = wait_for(&mut rx, |p| {
        p.inference.resident.iter().any(|r| r.idle_watts.is_some())
    })
    .await;
    let c = gemma_cost(&p).unwrap_or_else(|| panic!("gemma3 is listed"));
    let watts = c.idle_watts.unwrap_or_default();
    assert!((watts - 20.0).abs() <= 0.02 * 20.0, "{c:?}");
    // Resident and idle from about 915 s to 2600 s.
    assert!(
        c.idle_seconds_today > 1600.0 && c.idle_seconds_today < 1700.0,
        "{c:?}"
    );
    let joules = c
        .idle_joules_today
        .unwrap_or_else(|| panic!("priced: {c:?}"));
    let expected = 20.0 * c.idle_seconds_today;
    assert!(
        (joules - expected).abs() <= 0.01 * expected,
        "{joules} J vs {expected} J"
    );
    // 20 W all day: 0.48 kWh, 0.144 at 0.30 a kWh.
    assert!(
        (c.cost_per_day.unwrap_or_default() - 0.144).abs() <= 0.003,
        "{c:?}"
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    drop(engine);

    // A restart knows the draw at once and goes on from today's figures.
    let engine = start(replay(trace), config(prefs).with_store(db));
    let again = gemma_cost(&engine.current()).unwrap_or_else(|| panic!("gemma3 is kept"));
    assert_eq!(again.idle_watts, c.idle_watts);
    assert!(
        again.idle_seconds_today >= c.idle_seconds_today,
        "{again:?}"
    );
    assert!(
        !again.loaded,
        "nothing is known to be loaded until the proxy says so"
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn an_unload_is_recorded_and_said_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let engine = start(
        replay("t,watts\n0,10\n"),
        config(Preferences::default()).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    let seq = wait_for(&mut rx, |p| p.seq > 1).await.low_power.seq;
    engine.reader().reporter().unloaded(Unload {
        t: 0.0,
        server: "http://127.0.0.1:11434".into(),
        unloaded: vec!["gemma3:latest".into()],
        kept: Vec::new(),
        error: None,
    });
    let p = wait_for(&mut rx, |p| p.low_power.seq > seq).await;
    assert_eq!(
        p.low_power.event.as_deref(),
        Some("Low-power mode unloaded gemma3:latest from http://127.0.0.1:11434.")
    );
    // Said once: later samples do not say it again.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(engine.current().low_power.seq, seq + 1);
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    drop(engine);
    let (store, _) = wattbar_ledger::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
    let unloads = store.unloads(10).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(unloads.len(), 1, "{unloads:?}");
    assert_eq!(unloads[0].unloaded, ["gemma3:latest"]);
    assert!(
        (unloads[0].t - 1_800_000_000.0).abs() < 60.0,
        "stamped by the engine's clock"
    );
}
