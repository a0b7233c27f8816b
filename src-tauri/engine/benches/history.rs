//! History queries over a generated year of data: one sample a minute for 365 days, written
//! through the store's own batch writer, then pruned as the engine prunes (raw 24 h, minutes
//! 30 days, hours forever).
//!
//! `cargo bench -p wattbar-engine --bench history`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use wattbar_engine::store::{Row, Step, Store, DB_FILE};

const NOW: f64 = 1_795_000_000.0;

fn year_of_data(dir: &std::path::Path) -> Store {
    let (mut store, _) = Store::open(&dir.join(DB_FILE), NOW).unwrap_or_else(|e| panic!("{e}"));
    let start = NOW - 365.0 * 86_400.0;
    let id = store
        .start_session(start, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut total = 0.0;
    for day in 0..365 {
        let rows: Vec<Row> = (0..1440)
            .map(|m| {
                let t = start + f64::from(day) * 86_400.0 + f64::from(m) * 60.0;
                let watts = 40.0 + 30.0 * ((t / 3600.0).sin() + 1.0);
                Row {
                    t,
                    watts: Some(watts),
                    joules: watts * 60.0,
                    cost: watts * 60.0 / 3.6e6 * 0.3,
                    by_domain: vec![("cpu".into(), watts * 40.0)],
                    seconds: 60.0,
                    start: None,
                    currency: "EUR".into(),
                    scope: Some(wattbar_core::Scope::Components),
                    quality: None,
                    method: None,
                    answered: None,
                    slots: Vec::new(),
                }
            })
            .collect();
        total += rows.iter().map(|r| r.joules).sum::<f64>();
        store
            .write_batch(id, &rows, total, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    store.prune(NOW).unwrap_or_else(|e| panic!("{e}"));
    store
}

fn history(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = year_of_data(dir.path());
    c.bench_function("history 30 d by hour over a year", |b| {
        b.iter(|| {
            let points = store
                .history(black_box(NOW - 30.0 * 86_400.0), NOW, Step::Hour)
                .unwrap_or_default();
            assert_eq!(points.len(), 720);
            points
        })
    });
    c.bench_function("history 24 h by minute over a year", |b| {
        b.iter(|| {
            let points = store
                .history(black_box(NOW - 86_400.0), NOW, Step::Minute)
                .unwrap_or_default();
            assert!((1439..=1441).contains(&points.len()));
            points
        })
    });
    c.bench_function("totals (today, month, lifetime) over a year", |b| {
        b.iter(|| {
            (
                store
                    .day(black_box(NOW), "EUR", Some(wattbar_core::Scope::Components))
                    .unwrap_or_default(),
                store
                    .month(NOW, "EUR", Some(wattbar_core::Scope::Components))
                    .unwrap_or_default(),
                store
                    .lifetime("EUR", Some(wattbar_core::Scope::Components))
                    .unwrap_or_default(),
            )
        })
    });
}

criterion_group!(benches, history);
criterion_main!(benches);
