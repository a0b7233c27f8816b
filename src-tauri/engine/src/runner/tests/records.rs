//! Records a client measured itself, and records kept no longer than the preference says.

use super::*;

fn external(clock: &ManualClock, seconds: f64, tokens: u64) -> External {
    use crate::time::clock::Clock;
    let end = clock.unix();
    External {
        model: "llama3".into(),
        prompt_tokens: None,
        completion_tokens: tokens,
        start: end - seconds,
        end,
        tokens_per_second: Some(tokens as f64 / seconds),
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_window_ending_now_is_measured_whole_at_any_moment_between_samples() {
    let clock = ManualClock::new(1_800_000_000.0);
    let config = EngineConfig::new(Preferences::default()).with_clock(Arc::new(clock.clone()));
    let engine = start(replay("t,watts\n0,50\n"), config);
    let mut rx = engine.subscribe();
    // Ten seconds of 1 s samples, so the 5 s windows below start after the engine did.
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 500.0).await;
    for offset_ms in [0, 1, 250, 500, 999] {
        // Whole seconds apart plus the offset, so no window overlaps the one before (windows
        // that overlap share their energy, as concurrent requests do).
        tokio::time::sleep(Duration::from_millis(6000 + offset_ms)).await;
        // 100 tokens at 20 tokens/s: the last 5 s, 50 W × 5 s = 250 J, 0.4 tokens/s per W.
        let r = engine
            .reader()
            .record_inference(external(&clock, 5.0, 100))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let joules = r.energy_joules.unwrap_or_default();
        assert!((joules - 250.0).abs() <= 2.5, "{offset_ms} ms: {joules} J");
        assert_eq!(r.covered, Some(1.0), "{offset_ms} ms");
        assert!(!r.partial);
        let tpw = r.tokens_per_second_per_watt.unwrap_or_default();
        assert!((tpw - 0.4).abs() <= 0.004, "{offset_ms} ms: {tpw}");
    }
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_client_window_half_before_the_engine_is_partial_and_never_scaled_up() {
    let clock = ManualClock::new(1_800_000_000.0);
    let config = EngineConfig::new(Preferences::default()).with_clock(Arc::new(clock.clone()));
    let engine = start(replay("t,watts\n0,50\n"), config);
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 250.0).await;
    // 10 s ending now, 5 of them before the first sample: 250 J measured, covered 0.5.
    let r = engine
        .reader()
        .record_inference(external(&clock, 10.0, 100))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let covered = r.covered.unwrap_or_default();
    assert!((covered - 0.5).abs() < 0.02, "{r:?}");
    assert!(r.partial);
    let joules = r.energy_joules.unwrap_or_default();
    assert!((joules - 50.0 * covered * 10.0).abs() < 1e-6, "{r:?}");
    assert_eq!((r.score, r.joules_per_token), (None, None));
    let published = wait_for(&mut rx, |p| p.inference.view.last.is_some()).await;
    assert_eq!(published.inference.view.score, None);
    assert_eq!(
        published
            .inference
            .view
            .models
            .first()
            .map(|m| (m.partial_requests, m.joules_per_token)),
        Some((1, None))
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn records_older_than_kept_are_pruned_yet_their_model_and_ids_stay() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let now = 1_800_000_000.0;
    let day = 86_400.0;
    {
        let (mut store, _) =
            wattbar_ledger::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
        let clock = ManualClock::new(now);
        let book_record = |id: u64, model: &str, ended: f64| {
            let mut r = Book::new(Default::default(), 5.0)
                .external(
                    External {
                        model: model.into(),
                        ..external(&clock, 5.0, 100)
                    },
                    id,
                    wattbar_core::Stamp::new(Duration::ZERO, now),
                    &[],
                )
                .unwrap_or_else(|| panic!("a record"));
            (r.id, r.start, r.end) = (id, ended - 5.0, ended);
            r
        };
        for (id, model, ended) in [
            (5, "old-model", now - 100.0 * day),
            (6, "llama3", now - 10.0 * day),
        ] {
            store
                .insert_inference(&book_record(id, model, ended))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let prefs = Preferences {
        inference_keep_days: 30,
        ..Preferences::default()
    };
    let engine = start(
        replay("t,watts\n0,50\n"),
        config(prefs).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    // A batch is written (and old records pruned) within the first 5 s.
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 50.0 * 10.0).await;
    let r = engine
        .reader()
        .record_inference(external(&ManualClock::new(now + 10.0), 5.0, 100))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.id, 7, "ids go on after the highest ever stored");
    let models = wait_for(&mut rx, |p| {
        p.inference.view.last.as_ref().map(|r| r.id) == Some(7)
    })
    .await;
    // A model has figures per scope: the stored records said none, the new one is the
    // replayed machine's (`system`).
    let rows = |name: &str| -> Vec<(Option<wattbar_core::Scope>, u64)> {
        models
            .inference
            .view
            .models
            .iter()
            .filter(|m| m.model == name)
            .map(|m| (m.scope, m.requests))
            .collect()
    };
    assert_eq!(rows("old-model"), [(None, 1)]);
    let mut llama3 = rows("llama3");
    llama3.sort();
    assert_eq!(llama3, [(None, 1), (Some(wattbar_core::Scope::System), 1)]);
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
    let store = wattbar_ledger::store::Store::open_read_only(&db).unwrap_or_else(|e| panic!("{e}"));
    let kept: Vec<u64> = store
        .inference(0.0, 10)
        .unwrap_or_default()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(kept, vec![7, 6], "100 days old is past the 30 kept");
}
