//! The recorder on a real ledger: the lifetime and totals readers see before and after a batch.

use super::*;

fn row(t: f64, joules: f64, cpu: f64) -> Row {
    Row {
        t,
        watts: Some(joules),
        joules,
        cost: 0.0,
        by_domain: vec![("cpu".into(), cpu)],
        seconds: 1.0,
        currency: "EUR".into(),
        scope: Some(Scope::Components),
    }
}

#[test]
fn the_lifetime_counts_what_is_measured_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let mut r = Recorder::open(Some(&db), Duration::from_secs(5), 1_000.0, "EUR");
    assert_eq!(r.lifetime_by_domain(), vec![]);
    assert_eq!(r.lifetime_by_scope(), vec![]);
    r.record(row(1_001.0, 100.0, 40.0));
    r.record(row(1_002.0, 100.0, 40.0));
    let life = |r: &Recorder| {
        r.lifetime_by_domain()
            .into_iter()
            .collect::<BTreeMap<_, _>>()
    };
    let headline = |r: &Recorder| r.lifetime_by_scope();
    assert_eq!(headline(&r), [(Some(Scope::Components), 200.0)]);
    assert_eq!(life(&r).get("cpu"), Some(&80.0));
    let session = SessionTotals {
        started_unix: 1_000.0,
        joules: wattbar_core::Joules(200.0),
        kwh: 200.0 / 3.6e6,
        cost: 0.0,
        currency: wattbar_core::Currency::default(),
        carbon_g: None,
        gaps: 0,
        scope: Some(Scope::Components),
        other_scopes: Vec::new(),
        scope_changes: Vec::new(),
    };
    r.flush(
        Duration::from_secs(5),
        &session,
        1_002.0,
        &Preferences::default(),
    );
    // Written: the same figures, now from the store, not counted twice.
    assert_eq!(headline(&r), [(Some(Scope::Components), 200.0)]);
    r.record(row(1_003.0, 100.0, 40.0));
    assert_eq!(headline(&r), [(Some(Scope::Components), 300.0)]);
    assert_eq!(life(&r).get("cpu"), Some(&120.0));
    // A plug: the wall's energy starts apart, the sensors' stays what it was.
    r.record(Row {
        scope: Some(Scope::Wall),
        ..row(1_004.0, 150.0, 40.0)
    });
    assert_eq!(
        headline(&r),
        [(Some(Scope::Wall), 150.0), (Some(Scope::Components), 300.0)]
    );
    let totals = r.totals(1_004.0).unwrap_or_else(|| panic!("no totals"));
    assert_eq!(
        (totals.today.scope, totals.today.joules),
        (Some(Scope::Wall), 150.0)
    );
    assert_eq!(totals.today.joules_in(Some(Scope::Components)), 300.0);
}
