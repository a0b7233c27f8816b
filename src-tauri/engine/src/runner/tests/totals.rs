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
        if let Some(t) = &p.totals {
            let s = &p.session;
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
