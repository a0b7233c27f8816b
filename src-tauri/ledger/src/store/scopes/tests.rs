//! Scopes kept apart in a real SQLite ledger: totals, history, the changes, and ledgers written
//! before scopes were kept.

use super::*;
use crate::ledger::Ledger;
use crate::store::schema::MIGRATIONS;
use crate::store::{Row, Step, DB_FILE};
use rusqlite::Connection;

const T0: f64 = 1_700_000_400.0; // on a minute boundary

/// One second at `watts` covering `scope`, at 0.30 a kWh.
fn second(t: f64, watts: f64, scope: Scope) -> Row {
    Row {
        t,
        watts: Some(watts),
        joules: watts,
        cost: watts / 3.6e6 * 0.30,
        by_domain: Vec::new(),
        seconds: 1.0,
        start: None,
        currency: "EUR".into(),
        scope: Some(scope),
        quality: None,
        method: None,
        answered: None,
        slots: Vec::new(),
    }
}

#[test]
fn energy_at_the_wall_and_of_the_sensors_is_kept_apart_in_every_total() {
    // 10 s of CPU package at 60 W (600 J), then a plug: 10 s at the wall at 100 W (1,000 J).
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    let (mut ledger, _) = Ledger::open(&path, T0, "EUR").unwrap_or_else(|e| panic!("{e}"));
    for i in 1..=10 {
        ledger.record(second(T0 + f64::from(i), 60.0, Scope::Components));
    }
    // The session finds the change (it owns the scope); the ledger keeps it.
    ledger.record_scope_change(wattbar_core::session::ScopeChange {
        unix: T0 + 11.0,
        from: Scope::Components,
        to: Scope::Wall,
    });
    for i in 11..=20 {
        ledger.record(second(T0 + f64::from(i), 100.0, Scope::Wall));
    }
    ledger
        .flush(1000.0, 0.0, T0 + 20.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let totals = ledger
        .totals(T0 + 20.0, "EUR", Some(Scope::Wall))
        .unwrap_or_else(|e| panic!("{e}"));
    for total in [&totals.today, &totals.month, &totals.lifetime] {
        assert_eq!(total.scope, Some(Scope::Wall), "{total:?}");
        assert!((total.joules - 1000.0).abs() < 1e-9, "{total:?}");
        assert!(
            (total.cost - 1000.0 / 3.6e6 * 0.30).abs() < 1e-12,
            "{total:?}"
        );
        assert_eq!(total.other_scopes.len(), 1, "{total:?}");
        let cpu = &total.other_scopes[0];
        assert_eq!(cpu.scope, Some(Scope::Components));
        assert!((cpu.joules - 600.0).abs() < 1e-9, "{total:?}");
        assert!((cpu.cost - 600.0 / 3.6e6 * 0.30).abs() < 1e-12, "{total:?}");
    }
    // The minute holds both: one point per scope (by name), each its own mean.
    let store = ledger.store();
    let minute = store
        .history(T0, T0 + 60.0, Step::Minute)
        .unwrap_or_else(|e| panic!("{e}"));
    let points: Vec<(Option<Scope>, Option<f64>, f64)> = minute
        .iter()
        .map(|p| (p.scope, p.mean_watts, p.joules))
        .collect();
    assert_eq!(
        points,
        [
            (Some(Scope::Components), Some(60.0), 600.0),
            (Some(Scope::Wall), Some(100.0), 1000.0)
        ]
    );
    // The change is kept, at the first second at the wall.
    assert_eq!(
        store.scope_changes(T0, T0 + 60.0).unwrap_or_default(),
        [ScopeChange {
            t: T0 + 11.0,
            from: Scope::Components,
            to: Scope::Wall
        }]
    );
    drop(ledger);

    // Restarted without the plug: the store says the last scope, so the next session can say
    // the change.
    let (mut ledger, _) = Ledger::open(&path, T0 + 30.0, "EUR").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ledger.store().last_scope().ok().flatten(),
        Some(Scope::Wall)
    );
    ledger.record_scope_change(wattbar_core::session::ScopeChange {
        unix: T0 + 31.0,
        from: Scope::Wall,
        to: Scope::Components,
    });
    ledger.record(second(T0 + 31.0, 60.0, Scope::Components));
    ledger
        .flush(0.0, 0.0, T0 + 31.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let changes = ledger
        .store()
        .scope_changes(T0, T0 + 60.0)
        .unwrap_or_default();
    assert_eq!(
        changes.iter().map(|c| (c.t, c.to)).collect::<Vec<_>>(),
        [(T0 + 11.0, Scope::Wall), (T0 + 31.0, Scope::Components)]
    );
    let today = ledger
        .totals(T0 + 31.0, "EUR", Some(Scope::Components))
        .unwrap_or_else(|e| panic!("{e}"))
        .today;
    assert_eq!(today.scope, Some(Scope::Components));
    assert!((today.joules - 660.0).abs() < 1e-9, "{today:?}");
    assert!((today.joules_in(Some(Scope::Wall)) - 1000.0).abs() < 1e-9);
}

/// A ledger as Wattbar wrote it before scopes were kept (schema 11), with 42 kJ of headline
/// energy in its lifetime, day, month and minute.
fn ledger_before_scopes(path: &std::path::Path) {
    let conn = Connection::open(path).unwrap_or_else(|e| panic!("{e}"));
    for step in &MIGRATIONS[..11] {
        conn.execute_batch(step).unwrap_or_else(|e| panic!("{e}"));
    }
    let (day, month) = crate::store::local_day_month(T0);
    conn.execute_batch(&format!(
        "INSERT INTO lifetime VALUES ('system', 42000.0), ('cpu', 30000.0);
         INSERT INTO daily VALUES ('{day}', 'EUR', 42000.0, 0.5);
         INSERT INTO monthly VALUES ('{month}', 'EUR', 42000.0, 0.5);
         INSERT INTO minutes VALUES ({}, 60, 42000.0, 800.0, 42000.0);
         PRAGMA user_version = 11;",
        T0 as i64 - 60
    ))
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn energy_recorded_before_scopes_keeps_no_scope_and_is_never_added_to_the_walls() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    ledger_before_scopes(&path);

    // Read beside an engine that has not migrated it: the old figures, of no known scope.
    let old = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
    let lifetime = old.lifetime("EUR", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((lifetime.joules, lifetime.cost), (42000.0, 0.5));
    let history = old
        .history(T0 - 60.0, T0, Step::Minute)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        history
            .iter()
            .map(|p| (p.scope, p.joules))
            .collect::<Vec<_>>(),
        [(None, 42000.0)]
    );
    assert_eq!(old.last_scope().ok().flatten(), None);
    drop(old);

    // Migrated, then a second at the wall: the wall's 100 J are the figure, the old 42 kJ beside.
    let (mut ledger, _) = Ledger::open(&path, T0, "EUR").unwrap_or_else(|e| panic!("{e}"));
    ledger.record(second(T0 + 1.0, 100.0, Scope::Wall));
    ledger
        .flush(100.0, 0.0, T0 + 1.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let totals = ledger
        .totals(T0 + 1.0, "EUR", Some(Scope::Wall))
        .unwrap_or_else(|e| panic!("{e}"));
    for total in [&totals.today, &totals.month, &totals.lifetime] {
        assert_eq!((total.scope, total.joules), (Some(Scope::Wall), 100.0));
        assert_eq!(
            total
                .other_scopes
                .iter()
                .map(|t| (t.scope, t.joules, t.cost))
                .collect::<Vec<_>>(),
            [(None, 42000.0, 0.5)],
            "{total:?}"
        );
    }
    // The breakdown's lifetime is untouched, and no longer holds the headline.
    assert_eq!(
        ledger.store().lifetime_by_domain().unwrap_or_default(),
        [("cpu".to_string(), 30000.0)]
    );
    // The first scope a ledger sees is not a change.
    assert!(ledger
        .store()
        .scope_changes(0.0, 2e9)
        .unwrap_or_default()
        .is_empty());
}
