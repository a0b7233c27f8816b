//! Keys' spend and usage, worked by hand.

use super::*;
use crate::store::inference::tests::{open, record};
use wattbar_core::inference::Status;

/// 2026-12-05 00:00 UTC.
const DAY: f64 = 1_796_428_800.0;

/// A record charged `charged` J to `key`, its 200 J priced at 0.36 EUR/kWh (20 µEUR).
fn keyed(id: u64, end: f64, key: &str, client: &str, charged: f64) -> Record {
    Record {
        key: Some(key.into()),
        client: Some(client.into()),
        key_joules: Some(charged),
        key_cost: Some(charged * 1e-7),
        cost: Some(2e-5),
        currency: Some("EUR".into()),
        ..record(id, "smollm2", end)
    }
}

#[test]
fn a_keys_totals_count_its_records_and_refusals_and_pruning_takes_nothing_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    let cancelled = Record {
        status: Status::Cancelled,
        ..keyed(3, DAY + 30.0, "lab", "aider", 40.0)
    };
    for r in [
        keyed(1, DAY + 10.0, "lab", "aider", 200.0),
        keyed(2, DAY + 20.0, "lab", "lab", 200.0),
        cancelled,
        record(4, "smollm2", DAY + 40.0),
    ] {
        s.insert_inference(&r).unwrap_or_else(|e| panic!("{e}"));
    }
    let session = s
        .start_session(DAY + 50.0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let refusals = ["lab".to_string(), "lab".to_string()];
    s.write_batch_with(
        session,
        &[],
        0.0,
        0.0,
        &crate::store::resident::BatchExtras {
            key_refusals: &refusals,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // 200 + 200 J ok, 40 J cancelled; the record without a key counts for no key.
    let expected = |s: &Store| {
        let got: Vec<(String, Option<Scope>, String, u64, f64)> = s
            .key_totals()
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|t| (t.key, t.scope, t.outcome, t.requests, t.joules))
            .collect();
        assert_eq!(
            got,
            vec![
                ("lab".into(), None, BUDGET_EXCEEDED.into(), 2, 0.0),
                (
                    "lab".into(),
                    Some(Scope::Components),
                    "cancelled".into(),
                    1,
                    40.0
                ),
                ("lab".into(), Some(Scope::Components), "ok".into(), 2, 400.0),
            ]
        );
    };
    expected(&s);
    // The day's spend is 440 J; the next day's window holds none of it.
    let spent = s
        .key_spent("lab", DAY, DAY + 86_400.0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!((spent - 440.0).abs() < 1e-9, "{spent}");
    // In money: 440 J at 1e-7 EUR a joule.
    let paid = s
        .key_cost_spent("lab", DAY, DAY + 86_400.0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!((paid - 4.4e-5).abs() < 1e-15, "{paid}");
    assert_eq!(
        s.key_spent("lab", DAY + 86_400.0, DAY + 172_800.0)
            .unwrap_or_else(|e| panic!("{e}")),
        0.0
    );
    s.prune_inference(DAY + 1_000.0)
        .unwrap_or_else(|e| panic!("{e}"));
    expected(&s);
}

/// A usage row as compared: group, scope, requests, completion tokens, joules, charged, unmeasured.
type Row<'a> = (&'a str, Option<Scope>, u64, u64, f64, f64, u64);

#[test]
fn usage_groups_by_day_and_client_with_each_scope_apart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    let unmeasured = Record {
        energy_joules: None,
        net_energy_joules: None,
        scope: None,
        ..keyed(3, DAY + 86_400.0 + 5.0, "lab", "aider", 120.0)
    };
    for r in [
        keyed(1, DAY + 10.0, "lab", "aider", 200.0),
        keyed(2, DAY + 20.0, "lab", "aider", 200.0),
        keyed(5, DAY + 30.0, "lab", "cline", 200.0),
        unmeasured,
    ] {
        s.insert_inference(&r).unwrap_or_else(|e| panic!("{e}"));
    }
    let q = UsageQuery {
        client: Some("aider".into()),
        from: DAY,
        to: DAY + 2.0 * 86_400.0,
        ..UsageQuery::default()
    };
    let usage = s.usage(&q, Group::Day).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<Row> = usage
        .rows
        .iter()
        .map(|r| {
            (
                r.group.as_str(),
                r.scope,
                r.requests,
                r.completion_tokens,
                r.energy_joules,
                r.key_joules,
                r.unmeasured,
            )
        })
        .collect();
    // Day one: two records of 50 tokens and 200 J; day two: one unmeasured, charged its hold.
    assert_eq!(
        got,
        vec![
            (
                "2026-12-05",
                Some(Scope::Components),
                2,
                100,
                400.0,
                400.0,
                0
            ),
            ("2026-12-06", None, 1, 50, 0.0, 120.0, 1),
        ]
    );
    assert!(!usage.truncated);
    // Two records of 20 µEUR each on the first day, in euros.
    assert_eq!(usage.rows[0].currency.as_deref(), Some("EUR"));
    assert!((usage.rows[0].cost - 4e-5).abs() < 1e-15);
    let by_client = s
        .usage(
            &UsageQuery {
                from: DAY,
                to: DAY + 86_400.0,
                ..UsageQuery::default()
            },
            Group::Client,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let clients: Vec<(&str, u64)> = by_client
        .rows
        .iter()
        .map(|r| (r.group.as_str(), r.requests))
        .collect();
    assert_eq!(clients, vec![("aider", 2), ("cline", 1)]);
    assert_eq!(Group::parse(" Week "), Some(Group::Week));
    assert_eq!(Group::parse("fortnight"), None);
}
