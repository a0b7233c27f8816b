//! The ledger's days under daylight saving: a report names each local day once, a 23-hour day
//! included, and that day's energy is its 23 hours. Alone in its own test binary because it sets
//! the process's time zone.

use chrono::{Local, NaiveDate, Offset, TimeZone};
use wattbar_engine::report::{from_store, local_dates};
use wattbar_engine::store::{Row, Store};

/// Local midnight of `y-m-d` in London, Unix seconds.
fn midnight(y: i32, m: u32, d: u32) -> f64 {
    Local
        .with_ymd_and_hms(y, m, d, 0, 0, 0)
        .single()
        .map(|t| t.timestamp() as f64)
        .unwrap_or_else(|| panic!("no midnight on {y}-{m}-{d}"))
}

#[test]
fn a_spring_forward_day_is_reported_once_with_its_23_hours() {
    std::env::set_var("TZ", "Europe/London");
    // The zone must really be in effect (tzdata installed), or this test would prove nothing.
    let summer = Local.with_ymd_and_hms(2025, 7, 1, 12, 0, 0).single();
    let winter = Local.with_ymd_and_hms(2025, 1, 1, 12, 0, 0).single();
    let offsets = summer.zip(winter).map(|(s, w)| {
        (
            s.offset().fix().local_minus_utc(),
            w.offset().fix().local_minus_utc(),
        )
    });
    assert_eq!(offsets, Some((3600, 0)), "Europe/London is not in effect");

    // Clocks went forward at 01:00 GMT on Sunday 30 March 2025: that day had 23 hours.
    let saturday = midnight(2025, 3, 29);
    let sunday = midnight(2025, 3, 30);
    let monday = midnight(2025, 3, 31);
    assert_eq!(monday - sunday, 23.0 * 3600.0);

    // From Saturday 23:30 to Monday 12:00: stepping 24 h from the start would land on Monday
    // 00:30 and skip Sunday.
    let from = saturday + 23.5 * 3600.0;
    let to = monday + 12.0 * 3600.0;
    let day = |d| NaiveDate::from_ymd_opt(2025, 3, d).unwrap_or_else(|| panic!());
    assert_eq!(local_dates(from, to), vec![day(29), day(30), day(31)]);

    // 100 W, one sample a minute, from Saturday midnight to Tuesday midnight:
    // Sunday is 23 h × 100 W = 2.3 kWh; Saturday and Monday 2.4 kWh each.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (mut store, _) =
        Store::open(&dir.path().join("wattbar.sqlite"), saturday).unwrap_or_else(|e| panic!("{e}"));
    let session = store
        .start_session(saturday, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rows = Vec::new();
    let mut t = saturday;
    while t < midnight(2025, 4, 1) {
        rows.push(Row {
            t,
            watts: Some(100.0),
            joules: 6000.0,
            cost: 6000.0 / 3.6e6 * 0.30,
            by_domain: vec![("system".into(), 6000.0)],
            seconds: 60.0,
            start: None,
            currency: "EUR".into(),
            scope: Some(wattbar_core::Scope::System),
            quality: None,
            method: None,
            answered: None,
            slots: Vec::new(),
        });
        t += 60.0;
    }
    store
        .write_batch(session, &rows, 0.0, 0.0)
        .unwrap_or_else(|e| panic!("{e}"));
    let utc = chrono::FixedOffset::east_opt(0).unwrap_or_else(|| panic!());
    let r = from_store(&store, from, to, "EUR", 5.0, utc).unwrap_or_else(|e| panic!("{e}"));
    let days: Vec<(String, Option<f64>)> = r
        .days
        .iter()
        .map(|d| {
            (
                d.label.clone(),
                d.kwh.map(|k| (k * 1000.0).round() / 1000.0),
            )
        })
        .collect();
    assert_eq!(
        days,
        vec![
            ("2025-03-29".to_string(), Some(2.4)),
            ("2025-03-30".to_string(), Some(2.3)),
            ("2025-03-31".to_string(), Some(2.4)),
        ]
    );
}
