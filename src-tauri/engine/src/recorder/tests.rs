//! The recorder on a real ledger: the lifetime and totals readers see before and after a batch.

use super::*;
use wattbar_core::Scope;
use wattbar_ledger::store::Row;

fn row(t: f64, joules: f64, cpu: f64) -> Row {
    Row {
        t,
        watts: Some(joules),
        joules,
        cost: 0.0,
        by_domain: vec![("cpu".into(), cpu)],
        seconds: 1.0,
        start: None,
        currency: "EUR".into(),
        scope: Some(Scope::Components),
        quality: None,
        method: None,
        answered: None,
        slots: Vec::new(),
    }
}

fn session(joules: f64) -> SessionTotals {
    SessionTotals {
        started_unix: 1_000.0,
        joules: wattbar_core::Joules(joules),
        kwh: joules / 3.6e6,
        cost: 0.0,
        currency: wattbar_core::Currency::default(),
        fallback_kwh: 0.0,
        carbon_g: None,
        gaps: 0,
        scope: Some(Scope::Components),
        other_scopes: Vec::new(),
        scope_changes: Vec::new(),
    }
}

#[test]
fn the_counters_move_only_with_a_committed_batch_and_the_menu_totals_at_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let prefs = Preferences::default();
    let mut r = Recorder::open(Some(&db), Duration::from_secs(5), 1_000.0, &prefs);
    assert_eq!(r.committed().by_scope, vec![]);
    assert_eq!(r.committed().since_unix, Some(1_000.0));
    r.write(Write::Row(row(1_001.0, 100.0, 40.0)));
    r.write(Write::Row(row(1_002.0, 100.0, 40.0)));
    let cpu = |r: &Recorder| {
        r.committed()
            .by_domain
            .iter()
            .find(|(d, _)| d == "cpu")
            .map(|(_, j)| *j)
    };
    // Measured, not written: a crash now would lose it, so no counter shows it yet.
    assert_eq!(r.committed().by_scope, vec![]);
    assert_eq!(r.unwritten_joules(), 200.0);
    let totals = r
        .totals(1_002.0, Some(Scope::Components))
        .unwrap_or_else(|| panic!("no totals"));
    assert_eq!(totals.today.joules, 200.0);
    r.flush(Duration::from_secs(5), &session(200.0), 1_002.0, &prefs);
    // Written: the same figures, now from the store, not counted twice.
    assert_eq!(r.committed().by_scope, [(Some(Scope::Components), 200.0)]);
    assert_eq!(cpu(&r), Some(80.0));
    assert_eq!(r.unwritten_joules(), 0.0);
    r.write(Write::Row(row(1_003.0, 100.0, 40.0)));
    assert_eq!(r.committed().by_scope, [(Some(Scope::Components), 200.0)]);
    // A plug: the wall's energy is counted apart, the sensors' stays what it was.
    r.write(Write::Row(Row {
        scope: Some(Scope::Wall),
        ..row(1_004.0, 150.0, 40.0)
    }));
    let totals = r
        .totals(1_004.0, Some(Scope::Wall))
        .unwrap_or_else(|| panic!("no totals"));
    assert_eq!(
        (totals.today.scope, totals.today.joules),
        (Some(Scope::Wall), 150.0)
    );
    assert_eq!(totals.today.joules_in(Some(Scope::Components)), 300.0);
    r.flush(Duration::from_secs(10), &session(450.0), 1_004.0, &prefs);
    assert_eq!(
        r.committed().by_scope,
        [(Some(Scope::Components), 300.0), (Some(Scope::Wall), 150.0)]
    );
    assert_eq!(r.committed().joules_across_scopes(), Some(450.0));
    // What a process started now reads is what was exported: a restart never goes back.
    drop(r);
    let again = Recorder::open(Some(&db), Duration::from_secs(5), 2_000.0, &prefs);
    assert_eq!(again.committed().by_scope.len(), 2);
    assert_eq!(again.committed().joules_across_scopes(), Some(450.0));
    assert_eq!(again.committed().since_unix, Some(1_000.0));
    // The next session starts from the scope the last row covered.
    assert_eq!(again.restored_scope(), Some(Scope::Wall));
}

#[test]
fn posted_records_reach_the_model_counters_once_their_batch_is_committed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let prefs = Preferences::default();
    let mut r = Recorder::open(Some(&db), Duration::from_secs(5), 1_000.0, &prefs);
    use wattbar_core::inference::{Observed, Route, ServerFigures, Share, Status};
    // 10 tokens in 1 s at 30 W.
    let record = wattbar_core::inference::Record::build(
        1,
        Observed {
            route: Route::OllamaChat,
            model: "m".into(),
            requested_model: None,
            status: Status::Ok,
            error: None,
            start: 1_000.0,
            end: 1_001.0,
            ttft_seconds: None,
            figures: ServerFigures {
                completion_tokens: Some(10),
                ..ServerFigures::default()
            },
            share: Some(Share {
                joules: 30.0,
                shared_seconds: 1.0,
                covered_seconds: 1.0,
                window_seconds: 1.0,
                ..Share::default()
            }),
            phases_known: false,
            baseline_watts: None,
            baseline_spread_watts: None,
            ceiling: 5.0,
        },
    );
    assert_eq!(r.unwritten_records(), Some(0));
    r.write(Write::Records {
        records: vec![record],
        at_once: true,
    });
    assert!(r.committed().models.is_empty());
    // Settled, not written: a kill -9 now would lose it, and the figure says so.
    assert_eq!(r.unwritten_records(), Some(1));
    r.flush(Duration::from_secs(1), &session(0.0), 1_001.0, &prefs);
    assert_eq!(r.unwritten_records(), Some(0));
    let models = r.committed().models.clone();
    assert_eq!(models.len(), 1, "{models:?}");
    assert_eq!(models[0].completion_tokens, 10);
    assert_eq!(models[0].energy_joules, 30.0);
}
