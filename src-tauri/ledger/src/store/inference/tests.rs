//! Inference records in the ledger: typed columns, the v6 → v7 migration, figures per model,
//! pruning and ids that are never reused.

use super::*;
use wattbar_core::inference::{Observed, Route, ServerFigures, Share, Status, TokensSource};
use wattbar_core::{Coverage, Quality, Scope};

/// A record of 200 J (2 s at 100 W, components) ending at `end`.
pub(in crate::store) fn record(id: u64, model: &str, end: f64) -> Record {
    Record::build(
        id,
        Observed {
            route: Route::OllamaChat,
            model: model.into(),
            requested_model: None,
            status: Status::Ok,
            error: None,
            start: end - 2.0,
            end,
            ttft_seconds: Some(0.5),
            figures: ServerFigures {
                completion_tokens: Some(50),
                tokens_source: Some(TokensSource::Server),
                ..ServerFigures::default()
            },
            // 2 s at 100 W.
            share: Some(Share {
                joules: 200.0,
                shared_seconds: 2.0,
                covered_seconds: 2.0,
                window_seconds: 2.0,
                quality: Some(Quality::Measured),
                sources: vec!["rapl".into()],
                bound_joules: 7.5,
                coverage: Some(Coverage {
                    scope: Scope::Components,
                    covers: vec!["cpu-package".into(), "dram".into()],
                }),
                ..Share::default()
            }),
            phases_known: false,
            baseline_watts: Some(20.0),
            baseline_spread_watts: Some(1.5),
            ceiling: 5.0,
        },
    )
}

pub(in crate::store) fn open(path: &std::path::Path) -> Store {
    Store::open(path, 0.0).unwrap_or_else(|e| panic!("{e}")).0
}

#[test]
fn records_survive_a_reopen_field_for_field_and_come_back_newest_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    {
        let mut s = open(&path);
        for (id, end) in [(1, 100.0), (2, 200.0), (3, 300.0)] {
            s.insert_inference(&record(id, "llama3", end))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        s.set_baseline(&Baseline {
            watts: 21.5,
            spread_watts: Some(2.25),
            samples: 40,
            from: 10.0,
            to: 50.0,
            method: "median".into(),
            coverage: Some(Coverage {
                scope: Scope::Components,
                covers: vec!["cpu-package".into(), "gpu:0".into()],
            }),
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let s = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
    let recent = s.inference(150.0, 10).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recent.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3, 2]);
    assert_eq!(recent[0], record(3, "llama3", 300.0));
    assert_eq!(recent[0].energy_bound_joules, Some(7.5));
    // 7.5 J and 1.5 W of baseline spread × 2 s.
    assert_eq!(recent[0].net_energy_bound_joules, Some(10.5));
    let b = s.baseline().ok().flatten();
    assert_eq!(
        b.as_ref().map(|b| (b.watts, b.spread_watts)),
        Some((21.5, Some(2.25)))
    );
    assert_eq!(
        b.and_then(|b| b.coverage).map(|c| c.covers),
        Some(vec!["cpu-package".to_string(), "gpu:0".to_string()])
    );
}

#[test]
fn a_routed_record_keeps_the_model_asked_for_and_is_counted_with_its_energy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    {
        let mut s = open(&path);
        let routed = Record {
            requested_model: Some("llama3.1:70b".into()),
            ..record(1, "qwen3:1b", 100.0)
        };
        let unmeasured = Record {
            requested_model: Some("mistral".into()),
            energy_joules: None,
            ..record(2, "qwen3:1b", 110.0)
        };
        for r in [&routed, &unmeasured, &record(3, "llama3", 120.0)] {
            s.insert_inference(r).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let s = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
    let back = s.inference(0.0, 10).unwrap_or_else(|e| panic!("{e}"));
    let asked: Vec<Option<&str>> = back.iter().map(|r| r.requested_model.as_deref()).collect();
    assert_eq!(asked, vec![None, Some("mistral"), Some("llama3.1:70b")]);
    // Two routed, one of them measured: 2 s at 100 W.
    assert_eq!(
        s.routed_inference().ok(),
        Some(Routed {
            requests: 2,
            energy_joules: Some(200.0),
            unmeasured: 1,
        })
    );
}

#[test]
fn start_up_reads_the_figures_per_model_and_only_the_newest_records() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    for id in 1..=30 {
        let mut r = record(id, "llama3", 100.0 * id as f64);
        if id % 2 == 0 {
            r.score = None;
        }
        s.insert_inference(&r).unwrap_or_else(|e| panic!("{e}"));
    }
    // The newest 3, and the newest 4 scored (29, 27, 25, 23): 23, 25, 27, 28, 29, 30.
    let latest = s.latest_inference(3, 4).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        latest.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![23, 25, 27, 28, 29, 30]
    );
    let models = s.inference_models(5.0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(models.len(), 1);
    // 30 × 200 J over 30 × 50 tokens = 4 J per token.
    assert_eq!(
        (models[0].requests, models[0].joules_per_token),
        (30, Some(4.0))
    );
    assert_eq!(models[0].requests_by_status.get("ok"), Some(&30));
}

#[test]
fn pruned_records_leave_their_model_figures_and_their_ids_behind() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    s.insert_inference(&record(1, "llama3", 100.0))
        .unwrap_or_else(|e| panic!("{e}"));
    s.insert_inference(&record(2, "qwen3", 200.0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.prune_inference(1_000.0).ok(), Some(2));
    assert!(s.inference(0.0, 10).unwrap_or_default().is_empty());
    let models = s.inference_models(5.0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(models.len(), 2);
    assert!(models.iter().all(|m| m.energy_joules == 200.0));
    // The newest id was pruned; it is still not handed out again.
    assert_eq!(s.next_inference_id().ok(), Some(3));
}

/// llama3 answered twice on the CPU package and DRAM (200 J over 50 tokens each, 4 J a token)
/// and once at the wall (600 J over 50 tokens, 12 J a token): its figures are two rows, 4 and
/// 12 J a token, never one of 1,000 J over 150 tokens (6.7 J a token), and they survive a
/// reopen.
#[test]
fn a_models_figures_are_kept_per_scope_never_summed_across() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    {
        let mut s = open(&path);
        for id in [1, 2] {
            s.insert_inference(&record(id, "llama3", 100.0 * id as f64))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut wall = record(3, "llama3", 300.0);
        wall.scope = Some(Scope::Wall);
        wall.covers = Vec::new();
        wall.energy_joules = Some(600.0);
        s.insert_inference(&wall).unwrap_or_else(|e| panic!("{e}"));
    }
    let s = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut got: Vec<(Option<Scope>, u64, Option<f64>)> = s
        .inference_models(5.0)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|m| (m.scope, m.requests, m.joules_per_token))
        .collect();
    got.sort_by_key(|(scope, _, _)| *scope);
    assert_eq!(
        got,
        [
            (Some(Scope::Wall), 1, Some(12.0)),
            (Some(Scope::Components), 2, Some(4.0))
        ]
    );
}

#[test]
fn an_id_already_stored_is_refused_and_the_stored_record_kept() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    s.insert_inference(&record(1, "llama3", 100.0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(s.insert_inference(&record(1, "intruder", 500.0)).is_err());
    let all = s.inference(0.0, 10).unwrap_or_default();
    assert_eq!(all, vec![record(1, "llama3", 100.0)]);
    // Nor was it added to any model's figures.
    let models = s.inference_models(5.0).unwrap_or_default();
    assert_eq!(models.iter().map(|m| m.requests).sum::<u64>(), 1);
}

/// Records as the v6 store wrote them: whole-record JSON (an older one without
/// `tokens_source`, `covered` or `partial`, a newer one with), and one that is damaged.
const V6_ROWS: &str = r#"
INSERT INTO inference VALUES (4, 'llama3.2:3b', '/api/generate', 'ok', 1700000000.0,
  1700000004.0, '{"id":4,"model":"llama3.2:3b","route":"/api/generate","status":"ok","start":1700000000.0,"end":1700000004.0,"wall_seconds":4.0,"ttft_seconds":1.0,"prompt_tokens":17,"completion_tokens":60,"prefill_seconds":1.0,"decode_seconds":3.0,"load_seconds":null,"tokens_per_second":20.0,"energy_joules":480.0,"net_energy_joules":400.0,"prefill_joules":180.0,"decode_joules":300.0,"joules_per_token":8.0,"tokens_per_second_per_watt":0.2,"score":0.4,"baseline_watts":20.0,"quality":"measured","sources":["rapl"],"error":null}');
INSERT INTO inference VALUES (9, 'smollm2', '/v1/chat/completions', 'cancelled', 1700000100.0,
  1700000101.5, '{"id":9,"model":"smollm2","route":"/v1/chat/completions","status":"cancelled","start":1700000100.0,"end":1700000101.5,"wall_seconds":1.5,"ttft_seconds":0.2,"prompt_tokens":null,"completion_tokens":12,"tokens_source":"counted","prefill_seconds":0.2,"decode_seconds":1.3,"load_seconds":null,"tokens_per_second":9.2,"energy_joules":75.0,"net_energy_joules":null,"prefill_joules":10.0,"decode_joules":65.0,"joules_per_token":6.25,"tokens_per_second_per_watt":0.18,"score":null,"baseline_watts":null,"covered":0.5,"partial":true,"quality":"estimated","sources":["cpu-proxy","rapl"],"error":null}');
INSERT INTO inference VALUES (7, 'llama3.2:3b', '/api/chat', 'error', 1700000050.0,
  1700000051.0, '{"id":7,"model":"llama3.2:3b","route":"/api/ch');
"#;

#[test]
fn a_version_6_ledger_is_migrated_to_typed_columns_losing_no_record() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
        for step in &super::super::schema::MIGRATIONS[..6] {
            conn.execute_batch(step).unwrap_or_else(|e| panic!("{e}"));
        }
        conn.execute_batch(V6_ROWS)
            .and_then(|()| {
                conn.execute_batch(
                    "INSERT INTO inference_baseline VALUES (1, 19.5, 30, 1.0, 31.0, 'median');
                 PRAGMA user_version = 6;",
                )
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut s = open(&path);
    let mut all = s.inference(0.0, 10).unwrap_or_else(|e| panic!("{e}"));
    all.sort_by_key(|r| r.id);
    assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![4, 7, 9]);
    let old = &all[0];
    assert_eq!(
        (
            old.route,
            old.status,
            old.prompt_tokens,
            old.completion_tokens
        ),
        (Route::OllamaGenerate, Status::Ok, Some(17), Some(60))
    );
    assert_eq!(
        (
            old.energy_joules,
            old.joules_per_token,
            old.score,
            old.quality
        ),
        (Some(480.0), Some(8.0), Some(0.4), Some(Quality::Measured))
    );
    // Fields v6 did not have are unknown, not zero.
    assert_eq!(
        (old.tokens_source, old.covered, old.partial),
        (None, None, false)
    );
    assert_eq!(old.energy_bound_joules, None);
    let damaged = &all[1];
    assert_eq!(
        (damaged.status, damaged.start),
        (Status::Error, 1_700_000_050.0)
    );
    assert_eq!(
        damaged.error.as_deref(),
        Some("the stored record could not be read")
    );
    let newer = &all[2];
    assert_eq!(
        (newer.tokens_source, newer.covered, newer.partial),
        (Some(TokensSource::Counted), Some(0.5), true)
    );
    assert_eq!(
        newer.sources,
        vec!["cpu-proxy".to_string(), "rapl".to_string()]
    );
    // The figures per model are made from the migrated records.
    let models = s.inference_models(5.0).unwrap_or_else(|e| panic!("{e}"));
    let llama = models.iter().find(|m| m.model == "llama3.2:3b");
    assert_eq!(
        llama.map(|m| (m.requests, m.joules_per_token, m.score)),
        Some((2, Some(8.0), Some(0.4)))
    );
    let smol = models.iter().find(|m| m.model == "smollm2");
    assert_eq!(
        smol.map(|m| (m.partial_requests, m.joules_per_token)),
        Some((1, None))
    );
    assert_eq!(s.next_inference_id().ok(), Some(10));
    // A v6 baseline never measured its spread: unknown, not 0 W.
    assert_eq!(
        s.baseline().ok().flatten().map(|b| b.spread_watts),
        Some(None)
    );
    s.insert_inference(&record(10, "smollm2", 1_700_000_200.0))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn reserved_ids_are_never_given_again_even_unwritten() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("w.db");
    let mut store = open(&path);
    assert_eq!(store.next_inference_id().ok(), Some(1));
    // Ids 1–1000 reserved; id 2 given to a request that never became a record (a kill -9).
    store
        .reserve_inference_ids(1000)
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .insert_inference(&record(1, "llama3", 100.0))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(store);
    let mut store = open(&path);
    assert_eq!(store.next_inference_id().ok(), Some(1001));
    // A reservation never lowers what was reserved.
    store
        .reserve_inference_ids(10)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.next_inference_id().ok(), Some(1001));
}

#[test]
fn a_refused_record_in_a_batch_is_dropped_alone_and_the_energy_beside_it_is_written() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = open(&dir.path().join("wattbar.db"));
    let session = s
        .start_session(1_800_000_000.0, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    s.insert_inference(&record(1, "llama3", 100.0))
        .unwrap_or_else(|e| panic!("{e}"));
    // 10 s at 360 W = 3600 J, with a record whose id is taken and one that is new.
    let rows = [crate::store::Row {
        t: 1_800_000_010.0,
        seconds: 10.0,
        start: None,
        watts: Some(360.0),
        joules: 3600.0,
        cost: 0.0003,
        by_domain: Vec::new(),
        currency: "EUR".into(),
        scope: Some(wattbar_core::Scope::Components),
        quality: None,
        method: None,
        answered: None,
        slots: Vec::new(),
    }];
    let records = [record(1, "intruder", 500.0), record(2, "qwen3", 600.0)];
    s.write_batch_with(
        session,
        &rows,
        3600.0,
        0.0003,
        &crate::store::resident::BatchExtras {
            records: &records,
            reserve_ids_through: Some(1000),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kept: Vec<(u64, String)> = s
        .inference(0.0, 10)
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.id, r.model))
        .collect();
    assert_eq!(kept, vec![(2, "qwen3".into()), (1, "llama3".into())]);
    let lifetime = s
        .lifetime("EUR", Some(wattbar_core::Scope::Components))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!((lifetime.kwh - 0.001).abs() < 1e-12, "3600 J is 1 Wh");
    // The reserve went in with the batch.
    assert_eq!(s.next_inference_id().ok(), Some(1001));
}

/// A v16 ledger: llama3's figures (2 requests, 1,000 J over 200 tokens), an idle baseline of
/// 40 W over 100 s, and the samples of that span at the wall. Migrated, the figures stay whole
/// with no scope (never a guessed one), and the baseline takes its samples' scope, so it still
/// nets what is measured at the wall.
#[test]
fn a_version_16_ledger_keeps_its_model_figures_and_its_baseline_learns_its_scope() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("wattbar.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
        for step in &super::super::schema::MIGRATIONS[..16] {
            conn.execute_batch(step).unwrap_or_else(|e| panic!("{e}"));
        }
        conn.execute_batch(
            "INSERT INTO inference_models VALUES ('llama3', 2, 2, 0, 0, 0, 0, 80, 200, 1000.0,
                                                  500.0, 1000.0, 200.0, 600.0, 200.0, 40.0, 2.0,
                                                  200.0, 1000.0);
             INSERT INTO inference_baseline (id, watts, spread_watts, samples, from_t, to_t, method)
                 VALUES (1, 40.0, 2.0, 100, 1000.0, 1100.0, 'median');
             INSERT INTO samples (t, watts, joules, scope) VALUES (1050.0, 40.0, 40.0, 'wall');
             INSERT INTO samples (t, watts, joules, scope) VALUES (1060.0, 40.0, 40.0, 'wall');
             PRAGMA user_version = 16;",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let s = open(&path);
    let models = s.inference_models(5.0).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<_> = models
        .iter()
        .map(|m| (m.model.as_str(), m.scope, m.requests, m.joules_per_token))
        .collect();
    assert_eq!(got, [("llama3", None, 2, Some(5.0))]);
    let b = s.baseline().ok().flatten();
    assert_eq!(
        b.as_ref()
            .and_then(|b| b.coverage.as_ref())
            .map(|c| c.scope),
        Some(Scope::Wall)
    );
    let wall = Coverage::of_domain(wattbar_core::Domain::Wall, None);
    assert_eq!(b.and_then(|b| b.watts_for(Some(&wall))), Some(40.0));
}
