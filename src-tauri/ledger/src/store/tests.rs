//! The ledger on real SQLite files: rollups, reopening, damage, alerts, migrations, pruning.

use super::schema::{MIGRATIONS, SCHEMA_VERSION};
use super::*;

/// The scope of the rows these tests write: a sum of parts.
const CPU: Option<Scope> = Some(Scope::Components);

fn open(dir: &Path) -> Store {
    Store::open(&dir.join(DB_FILE), 1_700_000_000.0)
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

fn row(t: f64, watts: f64, joules: f64, cost: f64) -> Row {
    Row {
        t,
        watts: Some(watts),
        joules,
        cost,
        by_domain: vec![("cpu".into(), joules / 3.0), ("system".into(), joules)],
        seconds: 1.0,
        start: None,
        currency: "EUR".into(),
        scope: CPU,
        quality: None,
        method: None,
        answered: None,
        slots: Vec::new(),
    }
}

#[test]
fn ten_minutes_at_300_w_roll_up_into_minutes_hours_and_lifetime() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut store = open(dir.path());
    let start = 1_700_000_400.0; // 22:20:00 UTC, on a minute boundary
    let id = store
        .start_session(start, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<Row> = (1..=600)
        .map(|i| row(start + i as f64, 300.0, 300.0, 300.0 / 3.6e6 * 0.3))
        .collect();
    for batch in rows.chunks(5) {
        store
            .write_batch(id, batch, 0.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let lifetime = store.lifetime("EUR", CPU).unwrap_or_else(|e| panic!("{e}"));
    assert!((lifetime.joules - 180_000.0).abs() < 1e-6);
    let by_domain = store.lifetime_by_domain().unwrap_or_default();
    // The breakdown's domains only: the headline is kept by scope, not as a domain.
    assert_eq!(by_domain.len(), 1, "{by_domain:?}");
    assert_eq!(by_domain[0].0, "cpu");
    assert!((by_domain[0].1 - 60_000.0).abs() < 1e-6);
    assert!((lifetime.kwh - 0.05).abs() < 1e-12);
    assert!((lifetime.cost - 0.015).abs() < 1e-9);
    let minutes = store
        .history(start, start + 700.0, Step::Minute)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(minutes.len(), 11);
    assert_eq!(minutes[1].mean_watts, Some(300.0));
    assert!((minutes[1].joules - 18_000.0).abs() < 1e-6);
    let hours = store
        .history(start - 3600.0, start + 3600.0, Step::Hour)
        .unwrap_or_else(|e| panic!("{e}"));
    let total: f64 = hours.iter().map(|h| h.joules).sum();
    assert!((total - 180_000.0).abs() < 1e-6);
}

#[test]
fn lifetime_survives_a_reopen_and_a_new_session() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut store = open(dir.path());
    let id = store
        .start_session(100.0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .write_batch(id, &[row(101.0, 50.0, 50.0, 0.0)], 50.0, 0.0)
        .unwrap_or_else(|e| panic!("{e}"));
    drop(store);
    let mut store = open(dir.path());
    let second = store
        .start_session(200.0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(id, second);
    let first = store.session(id).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.map(|s| (s.end, s.joules)), Some((Some(101.0), 50.0)));
    store
        .write_batch(second, &[row(201.0, 10.0, 10.0, 0.0)], 10.0, 0.0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store.lifetime("EUR", CPU).map(|l| l.joules).unwrap_or(-1.0),
        60.0
    );
}

#[test]
fn a_corrupt_file_is_moved_aside_and_a_fresh_one_used() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    std::fs::write(&path, b"this is not a database, just some bytes that are long enough to fill a header page of sqlite......")
        .unwrap_or_else(|e| panic!("{e}"));
    let (store, moved) = Store::open(&path, 1234.0).unwrap_or_else(|e| panic!("{e}"));
    let moved = moved.unwrap_or_else(|| panic!("not moved aside"));
    assert_eq!(moved.to, dir.path().join("wattbar.db.corrupt-1234"));
    assert!(moved.to.exists());
    assert_eq!(
        store.lifetime("EUR", CPU).map(|l| l.joules).unwrap_or(-1.0),
        0.0
    );
}

#[test]
fn an_emptied_file_is_damage_not_a_new_ledger() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    std::fs::write(&path, b"").unwrap_or_else(|e| panic!("{e}"));
    let (_, moved) = Store::open(&path, 1234.0).unwrap_or_else(|e| panic!("{e}"));
    let moved = moved.unwrap_or_else(|| panic!("a 0-byte ledger was taken as new"));
    assert_eq!(moved.to, dir.path().join("wattbar.db.corrupt-1234"));
    assert!(moved.reason.contains("empty"), "{}", moved.reason);
}

#[test]
fn an_empty_file_beside_a_log_that_holds_its_pages_is_not_damage() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    std::fs::write(&path, b"").unwrap_or_else(|e| panic!("{e}"));
    assert!(super::is_emptied(&path));
    // What a kill -9 can leave: every page still in `-wal`, none checkpointed to the file.
    std::fs::write(dir.path().join("wattbar.db-wal"), [1u8; 4096])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!super::is_emptied(&path));
}

#[cfg(unix)]
#[test]
fn the_database_is_readable_by_its_user_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = open(dir.path());
    let mode = std::fs::metadata(store.path())
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600);
}

#[test]
fn an_alert_is_given_once_even_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut store = open(dir.path());
    assert_eq!(
        store.mark_alert("daily-kwh:2026-11-22", 1.0).ok(),
        Some(true)
    );
    assert_eq!(
        store.mark_alert("daily-kwh:2026-11-22", 2.0).ok(),
        Some(false)
    );
    drop(store);
    let mut store = open(dir.path());
    assert_eq!(
        store.mark_alert("daily-kwh:2026-11-22", 3.0).ok(),
        Some(false)
    );
    assert_eq!(
        store.mark_alert("daily-kwh:2026-11-23", 3.0).ok(),
        Some(true)
    );
}

#[test]
fn the_last_low_power_change_is_what_a_reopen_sees() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    {
        let mut store = open(dir.path());
        assert_eq!(
            store.low_power().ok(),
            Some(wattbar_core::LowPowerState::off())
        );
        for (t, enabled, reason) in [
            (10.0, true, wattbar_core::Reason::AutoThreshold),
            (20.0, false, wattbar_core::Reason::AutoThreshold),
            (30.0, true, wattbar_core::Reason::Manual),
        ] {
            let state = wattbar_core::LowPowerState {
                enabled,
                since: Some(t),
                reason: Some(reason),
            };
            store
                .record_low_power(&state, "why")
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let store = open(dir.path());
    assert_eq!(
        store.low_power().ok(),
        Some(wattbar_core::LowPowerState {
            enabled: true,
            since: Some(30.0),
            reason: Some(wattbar_core::Reason::Manual)
        })
    );
}

#[test]
fn a_version_1_database_is_migrated_forward_keeping_its_data() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    {
        let conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch(MIGRATIONS[0])
            .unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch(
            "INSERT INTO lifetime VALUES ('system', 42.0);
             INSERT INTO sessions (start, currency) VALUES (0, 'USD');
             INSERT INTO monthly VALUES ('2026-11', 42.0, 0.5);
             PRAGMA user_version = 1;",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let (mut store, moved) = Store::open(&path, 0.0).unwrap_or_else(|e| panic!("{e}"));
    assert!(moved.is_none());
    // What the rows covered was not recorded: they stay of no known scope, never guessed.
    assert_eq!(
        store
            .lifetime("EUR", None)
            .map(|l| l.joules)
            .unwrap_or(-1.0),
        42.0
    );
    // The old calendar rows are taken to be in the newest session's currency.
    assert_eq!(
        store.lifetime("USD", None).map(|l| l.cost).unwrap_or(-1.0),
        0.5
    );
    assert_eq!(store.mark_alert("x", 0.0).ok(), Some(true));
    let version: i64 = store
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap_or(-1);
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn raw_samples_older_than_a_day_are_pruned_but_rollups_stay() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut store = open(dir.path());
    let id = store
        .start_session(0.0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .write_batch(id, &[row(1000.0, 5.0, 5.0, 0.0)], 5.0, 0.0)
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .prune(1000.0 + 2.0 * 86_400.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let raw: i64 = store
        .conn
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap_or(-1);
    assert_eq!(raw, 0);
    let hours = store
        .history(0.0, 10_000.0, Step::Hour)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(hours.len(), 1);
}

#[test]
fn costs_in_two_currencies_are_kept_apart_never_added() {
    const T0: f64 = 1_700_000_400.0;
    // 1 kWh at 0.30 EUR, then the user switches to USD: 1 kWh at 0.40 USD, the same day.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut store = open(dir.path());
    let id = store
        .start_session(T0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let kwh = |t: f64, cost: f64, currency: &str| Row {
        currency: currency.into(),
        ..row(t, 3600.0, 3.6e6, cost)
    };
    store
        .write_batch(
            id,
            &[kwh(T0 + 1.0, 0.30, "EUR"), kwh(T0 + 2.0, 0.40, "USD")],
            0.0,
            0.0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    for total in [
        store.day(T0 + 2.0, "USD", CPU),
        store.month(T0 + 2.0, "USD", CPU),
        store.lifetime("USD", CPU),
    ] {
        let total = total.unwrap_or_else(|e| panic!("{e}"));
        assert!((total.kwh - 2.0).abs() < 1e-9, "{total:?}");
        assert!((total.cost - 0.40).abs() < 1e-9, "{total:?}");
        assert_eq!(total.currency, "USD");
        assert_eq!(
            total.other_costs,
            vec![Money {
                currency: "EUR".into(),
                amount: 0.30
            }]
        );
    }
}

#[test]
fn a_ledger_from_a_newer_schema_is_refused_by_name_and_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(DB_FILE);
    {
        let (store, _) = Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}"));
        store
            .conn
            .execute_batch("INSERT INTO lifetime VALUES ('gpu', 7.0)")
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .conn
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for opened in [
        Store::open(&path, 1_700_000_100.0).map(|(s, _)| s),
        Store::open_read_only(&path),
    ] {
        match opened {
            Err(e @ StoreError::Newer { found, known, .. }) => {
                assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
                assert!(e.to_string().contains("newer Wattbar"), "{e}");
            }
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("a newer ledger was opened"),
        }
    }
    // Not moved aside as damaged: the newer Wattbar still finds everything it wrote.
    let conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let gpu: f64 = conn
        .query_row(
            "SELECT joules FROM lifetime WHERE domain = 'gpu'",
            [],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gpu, 7.0);
    let moved = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
    assert!(!moved);
}

#[test]
fn the_kept_day_turns_with_the_local_day_second_by_second() {
    // Every 7 s over three days around a month's end (and in the other order too): the kept
    // answer is always the one looked up afresh.
    let start = 1_706_600_000.0; // 2024-01-30
    let mut ts: Vec<f64> = (0..3 * 86_400 / 7)
        .map(|i| start + f64::from(i) * 7.0)
        .collect();
    let forward = ts.clone();
    ts.reverse();
    for t in forward.into_iter().chain(ts) {
        assert_eq!(local_day_month(t), super::look_up_day_month(t), "at {t}");
    }
}
