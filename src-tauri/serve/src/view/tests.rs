//! The payload every reader gets, against a real engine on a replayed trace.

use super::*;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::{Chain, Preferences, Source};
use wattbar_engine::command::External;
use wattbar_engine::time::clock::{Clock, ManualClock};
use wattbar_engine::{spawn, EngineConfig};
use wattbar_sources::replay::parse_trace;
use wattbar_sources::ReplaySource;

#[tokio::test(start_paused = true)]
async fn the_published_state_crosses_the_wire_unchanged() {
    // The CLI reads the same type from an engine in its own process and from another engine's
    // stream: what one serializes the other must read back whole, records and totals included.
    let clock = ManualClock::new(1_800_000_000.0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut config = EngineConfig::new(Preferences::default())
        .with_clock(Arc::new(clock.clone()))
        .with_store(dir.path().join("wattbar.db"));
    config.batch_interval = Duration::from_secs(1);
    let trace =
        parse_trace("t,watts,domain\n0,50,system\n0,20,cpu\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
    let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
    let mut rx = engine.subscribe();
    let _ = rx
        .wait_for(|p| p.energy.session.joules.0 >= 500.0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let end = clock.unix();
    engine
        .reader()
        .record_inference(External {
            model: "llama3".into(),
            prompt_tokens: None,
            completion_tokens: 100,
            start: end - 5.0,
            end,
            tokens_per_second: Some(20.0),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let p = rx
        .wait_for(|p| {
            p.inference.view.last.is_some() && p.kept.totals.is_some() && p.snapshot.is_some()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .clone();
    let payload = StatePayload::from(&*p);
    assert_eq!(payload.breakdown.len(), 2);
    let sent = serde_json::to_value(&payload).unwrap_or_else(|e| panic!("{e}"));
    let read: StatePayload =
        serde_json::from_value(sent.clone()).unwrap_or_else(|e| panic!("{e}: {sent}"));
    assert_eq!(serde_json::to_value(&read).ok(), Some(sent));
    engine.stop();
}

#[test]
fn history_counts_the_headlines_scope_and_keeps_the_others_apart_within_a_bucket() {
    // One minute in which a plug went: 1000 J at the wall, then 600 J of the sensors. The
    // headline is the sensors' now, so the minute's energy is theirs, the wall's beside it.
    let point = |scope, joules| HistoryPoint {
        t: 1_700_000_400.0,
        mean_watts: Some(joules / 10.0),
        max_watts: Some(joules / 10.0),
        joules,
        scope: Some(scope),
    };
    let points = vec![point(Scope::Components, 600.0), point(Scope::Wall, 1000.0)];
    let h = HistoryPayload::new("1h".into(), Step::Minute, points, Some(Scope::Components));
    assert_eq!(h.scope, Some(Scope::Components));
    assert!((h.kwh.unwrap_or_default() - 600.0 / 3.6e6).abs() < 1e-15);
    assert_eq!(
        h.other_scopes_kwh.get("wall").copied(),
        Some(1000.0 / 3.6e6)
    );
}
