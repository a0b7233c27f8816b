//! The book of keys: holds under concurrency, settles, secrets that stop working.

use super::*;
use wattbar_core::inference::{Observed, Route, ServerFigures, Share, Status as Outcome};
use wattbar_core::{Coverage, Scope};

/// 2026-12-05 12:00 UTC.
const NOON: f64 = 1_796_472_000.0;
/// 0.36 EUR per kWh: 0.1 µEUR a joule.
const PRICE: f64 = 0.36;

fn nothing(_: &str, _: Unit, _: f64, _: f64) -> f64 {
    0.0
}

fn book_with(budget: &str, committed: CommittedSpend<'_>) -> (Keys, String) {
    let keys = Keys::default();
    let secret = keys
        .add(
            NewKey {
                name: "lab".into(),
                budget: Some(budget.into()),
                ..NewKey::default()
            },
            NOON,
            committed,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    (keys, secret)
}

/// A record of `joules` in `scope`, ending at `end`.
fn record(id: u64, joules: Option<f64>, scope: Scope, end: f64) -> Record {
    Record::build(
        id,
        Observed {
            route: Route::OpenAiChat,
            model: "smollm2".into(),
            requested_model: None,
            status: Outcome::Ok,
            error: None,
            start: end - 1.0,
            end,
            ttft_seconds: None,
            figures: ServerFigures::default(),
            share: joules.map(|j| Share {
                joules: j,
                shared_seconds: 1.0,
                covered_seconds: 1.0,
                window_seconds: 1.0,
                coverage: Some(Coverage {
                    scope,
                    covers: Vec::new(),
                }),
                ..Share::default()
            }),
            phases_known: false,
            baseline_watts: None,
            baseline_spread_watts: None,
            ceiling: 5.0,
        },
    )
}

#[test]
fn sixty_four_threads_at_once_never_hold_past_the_budget() {
    // 1 kJ a day; each request holds 300 J: three fit (900 J), the fourth would make 1.2 kJ.
    let (keys, secret) = book_with("1kJ/day", &nothing);
    let admitted = keys.admit(&secret).map(|a| a.name);
    assert_eq!(admitted.as_deref(), Some("lab"));
    let holds: Vec<Option<Held>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..64)
            .map(|_| s.spawn(|| keys.hold("lab", 300.0, PRICE, NOON).ok()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(None))
            .collect()
    });
    let let_in: Vec<Held> = holds.into_iter().flatten().collect();
    assert_eq!(let_in.len(), 3);
    let status = keys
        .status("lab", NOON)
        .unwrap_or_else(|| panic!("a budget"));
    assert!((status.held_joules - 900.0).abs() < 1e-9);
    assert!((status.remaining_joules - 100.0).abs() < 1e-9);
    // Each request measured 250 J: 750 J spent, and one more 200 J request fits now.
    let mut records: Vec<Record> = let_in
        .into_iter()
        .enumerate()
        .map(|(i, hold)| {
            let id = i as u64 + 1;
            keys.attach(id, Some("lab".into()), None, hold);
            record(id, Some(250.0), Scope::Wall, NOON + 1.0)
        })
        .collect();
    keys.settle(&mut records);
    for r in &records {
        assert_eq!(r.key.as_deref(), Some("lab"));
        assert_eq!(r.client.as_deref(), Some("lab"), "the key's name stands in");
        assert_eq!(r.key_joules, Some(250.0));
    }
    let status = keys
        .status("lab", NOON)
        .unwrap_or_else(|| panic!("a budget"));
    assert!((status.spent_joules - 750.0).abs() < 1e-9);
    assert_eq!(status.held_joules, 0.0);
    assert!(keys.hold("lab", 200.0, PRICE, NOON).is_ok());
    let refused = keys.hold("lab", 100.0, PRICE, NOON).err();
    assert_eq!(
        refused.map(|r| (r.unit, r.exceeded.resets_at)),
        Some((Unit::Joules, NOON + 43_200.0))
    );
}

#[test]
fn unknown_energy_and_another_scope_are_charged_what_was_held_and_an_abandoned_request_nothing() {
    let keys = Keys::default();
    keys.add(
        NewKey {
            name: "wall-only".into(),
            budget: Some("10kJ/day".into()),
            scope: Some(Scope::Wall),
            ..NewKey::default()
        },
        NOON,
        &nothing,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let hold = |j: f64| keys.hold("wall-only", j, PRICE, NOON).unwrap_or_default();
    keys.attach(
        1,
        Some("wall-only".into()),
        Some("aider".into()),
        hold(400.0),
    );
    keys.attach(2, Some("wall-only".into()), None, hold(500.0));
    keys.attach(3, Some("wall-only".into()), None, hold(600.0));
    keys.attach(4, Some("wall-only".into()), None, hold(700.0));
    keys.abandon(4);
    let mut records = vec![
        // Measured at the wall: charged what it drew.
        record(1, Some(120.0), Scope::Wall, NOON + 1.0),
        // Measured, but only the components: not the key's scope, so its hold.
        record(2, Some(80.0), Scope::Components, NOON + 1.0),
        // Not measured at all: its hold.
        record(3, None, Scope::Wall, NOON + 1.0),
    ];
    keys.settle(&mut records);
    let charged: Vec<Option<f64>> = records.iter().map(|r| r.key_joules).collect();
    assert_eq!(charged, vec![Some(120.0), Some(500.0), Some(600.0)]);
    assert_eq!(records[0].client.as_deref(), Some("aider"));
    // 120 + 500 + 600 = 1,220 J; the abandoned request's 700 J went back.
    let status = keys
        .status("wall-only", NOON)
        .unwrap_or_else(|| panic!("a budget"));
    assert!((status.spent_joules - 1220.0).abs() < 1e-9);
    assert_eq!(status.held_joules, 0.0);
}

#[test]
fn a_removed_or_rotated_secret_finds_nothing_and_the_spend_stays() {
    let (keys, secret) = book_with("1kJ/day", &nothing);
    keys.attach(
        1,
        Some("lab".into()),
        None,
        keys.hold("lab", 300.0, PRICE, NOON).unwrap_or_default(),
    );
    let mut r = [record(1, Some(300.0), Scope::Wall, NOON + 1.0)];
    keys.settle(&mut r);
    let rotated = keys.rotate("lab", NOON).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(rotated, secret);
    assert_eq!(keys.admit(&secret), None);
    assert!(keys.admit(&rotated).is_some());
    let spent = keys.status("lab", NOON).map(|s| s.spent_joules);
    assert_eq!(spent, Some(300.0));
    assert_eq!(keys.admit("wb_not-a-key"), None);
    assert_eq!(keys.admit("sk-upstream-secret"), None);
    keys.remove("lab").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(keys.admit(&rotated), None);
    assert!(keys.remove("lab").is_err());
    let listed = keys.list(NOON);
    assert!(listed.is_empty());
}

#[test]
fn a_key_starts_its_window_from_what_the_ledger_committed_so_a_restart_gives_nothing_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = stored::keys_path(dir.path());
    let committed = |name: &str, unit: Unit, from: f64, to: f64| {
        assert_eq!(
            (name, unit, from, to),
            ("lab", Unit::Joules, NOON - 43_200.0, NOON + 43_200.0)
        );
        800.0
    };
    let secret = {
        let keys = Keys::open(Some(path.clone()), NOON, &nothing).unwrap_or_else(|e| panic!("{e}"));
        keys.add(
            NewKey {
                name: "lab".into(),
                budget: Some("1kJ/day".into()),
                ..NewKey::default()
            },
            NOON,
            &nothing,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(!text.contains(&secret), "the secret is never kept");
    let keys = Keys::open(Some(path), NOON, &committed).unwrap_or_else(|e| panic!("{e}"));
    assert!(keys.admit(&secret).is_some());
    let listed = keys.list(NOON);
    let status = listed[0]
        .status
        .clone()
        .unwrap_or_else(|| panic!("a budget"));
    assert_eq!(status.spent_joules, 800.0);
    assert!(
        keys.hold("lab", 300.0, PRICE, NOON).is_err(),
        "800 + 300 J is over 1 kJ"
    );
    assert!(keys.hold("lab", 200.0, PRICE, NOON).is_ok());
}

#[test]
fn a_money_budget_holds_and_charges_at_the_price_the_request_began_at() {
    // 0.001 EUR a day at 0.36 EUR/kWh (1e-7 EUR a joule) is 10 kJ; the energy is not limited.
    let keys = Keys::default();
    keys.add(
        NewKey {
            name: "cheap".into(),
            money: Some("0.001/day".into()),
            ..NewKey::default()
        },
        NOON,
        &nothing,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(keys.list(NOON)[0].money.as_deref(), Some("0.001/day"));
    let first = keys.hold("cheap", 6_000.0, PRICE, NOON).unwrap_or_default();
    // 6 kJ held (0.0006 EUR): another 6 kJ would make 0.0012 EUR.
    let refused = keys.hold("cheap", 6_000.0, PRICE, NOON).err();
    let refused = refused.unwrap_or_else(|| panic!("over the money budget"));
    assert_eq!(refused.unit, Unit::Money);
    assert!(
        (refused.remaining_joules - 4_000.0).abs() < 1e-6,
        "{refused:?}"
    );
    keys.attach(1, Some("cheap".into()), None, first);
    // It measured 5 kJ: charged 0.0005 EUR, and 5 kJ more fit.
    let mut r = [record(1, Some(5_000.0), Scope::Wall, NOON + 1.0)];
    keys.settle(&mut r);
    assert_eq!(r[0].key_joules, Some(5_000.0));
    assert!((r[0].key_cost.unwrap_or(0.0) - 0.0005).abs() < 1e-12);
    let listed = keys.list(NOON);
    let money = listed[0]
        .money_status
        .clone()
        .unwrap_or_else(|| panic!("a money budget"));
    assert!((money.spent_joules - 0.0005).abs() < 1e-12, "{money:?}");
    assert!(keys.hold("cheap", 5_000.0, PRICE, NOON).is_ok());
}
