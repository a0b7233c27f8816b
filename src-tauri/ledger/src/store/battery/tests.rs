//! Battery days through the engine's one write path, on a real SQLite file.

use crate::ledger::Ledger;
use crate::store::Store;
use std::path::Path;
use std::sync::Arc;
use wattbar_core::battery::{Cycles, Health, Raw};

/// 2024-01-01 12:00 UTC: noon, so each day below is its own local day in any time zone.
const NOON: f64 = 1_704_110_400.0;
const DAY: f64 = 86_400.0;

fn health(full_wh: f64, cycles: u32) -> Arc<[Health]> {
    let h = Health::from_raw(
        "BAT0",
        Raw::Energy {
            design_wh: Some(70.0),
            full_wh: Some(full_wh),
        },
        Cycles::Counted(cycles),
    );
    Arc::from(vec![h])
}

fn open(path: &Path, t: f64) -> Ledger {
    Ledger::open(path, t, "EUR")
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

fn page_bytes(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap_or_else(|e| panic!("{e}"));
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{e}"));
    let size: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{e}"));
    pages * size
}

#[test]
fn a_year_of_days_survives_a_restart_in_under_64_kib() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    let mut ledger = open(&path, NOON);
    ledger
        .flush(0.0, 0.0, NOON)
        .unwrap_or_else(|e| panic!("{e}"));
    let before = page_bytes(&path);
    // 365 days, full capacity falling 0.01 Wh a day from 66.5 Wh, one cycle a day.
    for d in 0..365 {
        let t = NOON + f64::from(d) * DAY;
        let h = health(66.5 - 0.01 * f64::from(d), 100 + d as u32);
        ledger.observe_batteries(t, &h);
        // Seen again later the same day, unchanged: nothing more to write.
        ledger.observe_batteries(t + 60.0, &h);
        ledger.flush(0.0, 0.0, t).unwrap_or_else(|e| panic!("{e}"));
    }
    drop(ledger);
    let grown = page_bytes(&path) - before;
    assert!(
        grown < 64 * 1024,
        "a year of one battery took {grown} bytes"
    );

    let reopened = open(&path, NOON + 366.0 * DAY);
    drop(reopened);
    let store = Store::open(&path, NOON + 366.0 * DAY)
        .unwrap_or_else(|e| panic!("{e}"))
        .0;
    let days = store
        .battery_days("2000-01-01")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(days.len(), 365);
    let (first, last) = (&days[0], &days[364]);
    assert_eq!(first.day, "2024-01-01");
    assert_eq!(last.day, "2024-12-30");
    // 66.5 Wh ÷ 70 Wh = 95 % the first day; 66.5 − 3.64 = 62.86 Wh ÷ 70 = 89.8 % the last.
    assert!((first.ratio.unwrap_or(0.0) - 0.95).abs() < 1e-9);
    assert!((last.ratio.unwrap_or(0.0) - 62.86 / 70.0).abs() < 1e-9);
    assert!((last.full_joules.unwrap_or(0.0) - 62.86 * 3600.0).abs() < 1e-6);
    assert_eq!((first.cycles, last.cycles), (Some(100), Some(464)));
}

#[test]
fn a_day_keeps_its_last_figures_and_unknown_stays_null() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    let mut ledger = open(&path, NOON);
    ledger.observe_batteries(NOON, &health(66.0, 10));
    ledger.observe_batteries(NOON + 3600.0, &health(65.0, 11));
    let unknown = Arc::from(vec![Health::from_raw(
        "BAT1",
        Raw::Energy {
            design_wh: Some(0.0),
            full_wh: None,
        },
        Cycles::from_count(Some(0)),
    )]);
    ledger.observe_batteries(NOON + 7200.0, &unknown);
    ledger
        .flush(0.0, 0.0, NOON + 7200.0)
        .unwrap_or_else(|e| panic!("{e}"));
    drop(ledger);
    let store = Store::open(&path, NOON).unwrap_or_else(|e| panic!("{e}")).0;
    let days = store
        .battery_days("2024-01-01")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(days.len(), 2, "{days:?}");
    assert_eq!(days[0].battery, "BAT0");
    assert_eq!(days[0].cycles, Some(11));
    assert!((days[0].full_joules.unwrap_or(0.0) - 65.0 * 3600.0).abs() < 1e-6);
    assert_eq!(days[1].battery, "BAT1");
    assert_eq!(
        (
            days[1].design_joules,
            days[1].full_joules,
            days[1].ratio,
            days[1].cycles
        ),
        (None, None, None, None)
    );
}
