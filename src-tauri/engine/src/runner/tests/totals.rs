//! The totals a person reads agree with one another at every published state.

use super::*;

#[tokio::test(start_paused = true)]
async fn session_today_month_and_lifetime_never_lag_one_another_between_batches() {
    // 42 W replayed, sampled each second, batches every 10 s: over 35 s the states between
    // batches are most of them, and each must hold session ≤ today ≤ month ≤ lifetime, in joules
    // and in money.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let prefs = Preferences {
        price_per_kwh: Price::new(0.30).unwrap_or_default(),
        ..Preferences::default()
    };
    let engine = start(
        replay("t,watts\n0,42\n"),
        config(prefs).with_store(dir.path().join("wattbar.db")),
    );
    let mut rx = engine.subscribe();
    let (mut checked, mut lagged) = (0, 0);
    let mut last: Option<(f64, f64)> = None;
    loop {
        let p = rx.borrow_and_update().clone();
        if let Some(t) = &p.kept.totals {
            let s = &p.energy.session;
            let joules = [
                s.joules.0,
                t.today.joules,
                t.month.joules,
                t.lifetime.joules,
            ];
            let cost = [s.cost, t.today.cost, t.month.cost, t.lifetime.cost];
            for figures in [joules, cost] {
                assert!(
                    figures.windows(2).all(|w| w[0] <= w[1] + 1e-9),
                    "session, today, month, lifetime: {figures:?} at {} J",
                    s.joules.0
                );
            }
            // Today is the session here (a fresh ledger): nothing measured is left out.
            assert!((t.today.joules - s.joules.0).abs() < 1e-6, "{joules:?}");
            checked += 1;
            // A state whose session grew has a lifetime that grew too.
            if last.is_some_and(|(session, lifetime)| {
                s.joules.0 > session && t.lifetime.joules <= lifetime
            }) {
                lagged += 1;
            }
            last = Some((s.joules.0, t.lifetime.joules));
            if s.joules.0 >= 42.0 * 35.0 {
                break;
            }
        }
        if rx.changed().await.is_err() {
            panic!("engine stopped");
        }
    }
    assert!(checked >= 30, "{checked} states");
    // None waited for a batch to show what the session already had.
    assert_eq!(lagged, 0, "states whose lifetime lagged the session");
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_restart_in_another_scope_is_one_change_the_session_finds_and_the_ledger_keeps() {
    // A run of the whole machine at 100 W (system scope), then a run of the CPU package alone
    // at 60 W: the second session starts from the first's scope, so its first sample is a
    // change, said once by the session and kept once by the ledger; Today is the package's, the
    // system's energy listed beside it and never added.
    use wattbar_core::Scope;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let engine = start(
        replay("t,watts\n0,100\n"),
        config(Preferences::default()).with_store(db.clone()),
    );
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 3_000.0).await;
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));

    let later = EngineConfig::new(Preferences::default())
        .with_clock(Arc::new(ManualClock::new(1_800_001_000.0)))
        .with_store(db.clone());
    let engine = start(replay("t,watts,domain\n0,60,cpu\n"), later);
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    let said: Vec<_> = first
        .energy
        .session
        .scope_changes
        .iter()
        .map(|c| (c.unix, c.from, c.to))
        .collect();
    assert_eq!(said, [(1_800_001_000.0, Scope::System, Scope::Components)]);
    let p = wait_for(&mut rx, |p| {
        p.energy.session.joules.0 >= 600.0 && p.kept.totals.is_some()
    })
    .await;
    assert_eq!(p.energy.session.scope, Some(Scope::Components));
    assert_eq!(p.energy.session.scope_changes.len(), 1);
    let today = p
        .kept
        .totals
        .as_ref()
        .map(|t| t.today.clone())
        .unwrap_or_default();
    assert_eq!(today.scope, Some(Scope::Components));
    assert!(
        (today.joules - p.energy.session.joules.0).abs() < 1e-6,
        "{today:?}"
    );
    assert!(
        today.joules_in(Some(Scope::System)) >= 3_000.0 - 1e-6,
        "{today:?}"
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));

    let store = wattbar_ledger::store::Store::open_read_only(&db).unwrap_or_else(|e| panic!("{e}"));
    let kept: Vec<_> = store
        .scope_changes(0.0, f64::MAX)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|c| (c.t, c.from, c.to))
        .collect();
    assert_eq!(kept, said);
}
