//! Model servers followed by their own counters (v16): each counted window, and each model's
//! running sums.
//!
//! - `server_windows(server, model, from_t, to_t, prompt_tokens, completion_tokens,
//!   energy_joules, net_energy_joules, prefill_joules, decode_joules, concurrent, coarse,
//!   shared, proxied)`: one row per model per window, kept as long as inference records.
//! - `server_totals(server, model, scope, covers, prompt_tokens, completion_tokens,
//!   energy_joules)` (v17: keyed by scope and parts as well, [`super::coverage`]): the sums
//!   over every window whose energy was known ([`ServerTotal::add`]), added to in the same
//!   transaction as the window, never pruned: what `/metrics` exports, so it never goes back.
//!   `model` is `''` for a server that names none (llama.cpp, TGI).
//! - `server_windows.covered` (v21): the share of the window its energy covers; NULL for the
//!   windows kept before, whose coverage is unknown.
//! - `server_windows.gpu_processes` (v23): what priced the window: NULL, the headline; else
//!   how many of the server's processes' GPU share did.

use super::{coverage, Store, StoreError};
use rusqlite::{params, Connection, Row};
use wattbar_core::inference::server_totals::ServerTotal;
use wattbar_core::inference::server_window::ServerWindow;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE server_windows (id INTEGER PRIMARY KEY, server TEXT NOT NULL, model TEXT,
                             from_t REAL NOT NULL, to_t REAL NOT NULL, prompt_tokens REAL,
                             completion_tokens REAL, energy_joules REAL, net_energy_joules REAL,
                             prefill_joules REAL, decode_joules REAL,
                             concurrent INTEGER NOT NULL, coarse INTEGER NOT NULL,
                             shared INTEGER NOT NULL, proxied INTEGER NOT NULL);
CREATE INDEX server_windows_to ON server_windows(to_t);
CREATE TABLE server_totals (server TEXT NOT NULL, model TEXT NOT NULL,
                            prompt_tokens REAL NOT NULL, completion_tokens REAL NOT NULL,
                            energy_joules REAL NOT NULL, PRIMARY KEY (server, model));
"#;

pub(super) const COVERED: &str = "ALTER TABLE server_windows ADD COLUMN covered REAL;";

pub(super) const GPU_PROCESSES: &str =
    "ALTER TABLE server_windows ADD COLUMN gpu_processes INTEGER;";

/// Keeps `windows` and adds those with energy to their model's sums; `conn` is the batch's
/// transaction.
pub(super) fn put(conn: &Connection, windows: &[ServerWindow]) -> rusqlite::Result<()> {
    for w in windows {
        conn.prepare_cached(
            "INSERT INTO server_windows (server, model, from_t, to_t, prompt_tokens,
                 completion_tokens, energy_joules, net_energy_joules, prefill_joules,
                 decode_joules, concurrent, coarse, shared, proxied, scope, covers, covered,
                 gpu_processes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                     ?17, ?18)",
        )?
        .execute(params![
            w.server,
            w.model,
            w.from,
            w.to,
            w.prompt_tokens,
            w.completion_tokens,
            w.energy_joules,
            w.net_energy_joules,
            w.prefill_energy_joules,
            w.decode_energy_joules,
            w.concurrent,
            w.coarse,
            w.shared,
            w.proxied,
            coverage::scope_column(w.scope),
            coverage::covers_column(&w.covers),
            w.covered,
            w.gpu_processes
        ])?;
        let mut added = ServerTotal::of(w);
        if added.add(w) {
            conn.prepare_cached(
                "INSERT INTO server_totals (server, model, scope, covers, prompt_tokens,
                                            completion_tokens, energy_joules)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT(server, model, scope, covers) DO UPDATE SET
                   prompt_tokens = prompt_tokens + ?5,
                   completion_tokens = completion_tokens + ?6,
                   energy_joules = energy_joules + ?7",
            )?
            .execute(params![
                w.server,
                w.model.as_deref().unwrap_or(""),
                super::scopes::to_text(w.scope),
                coverage::covers_column(&w.covers).unwrap_or_default(),
                added.prompt_tokens,
                added.completion_tokens,
                added.energy_joules
            ])?;
        }
    }
    Ok(())
}

pub(super) fn prune(conn: &Connection, before: f64) -> rusqlite::Result<usize> {
    conn.prepare_cached("DELETE FROM server_windows WHERE to_t < ?1")?
        .execute(params![before])
}

fn window(r: &Row<'_>) -> rusqlite::Result<ServerWindow> {
    let completion: Option<f64> = r.get(5)?;
    let energy: Option<f64> = r.get(6)?;
    let net: Option<f64> = r.get(7)?;
    let per_token = |j: Option<f64>| match (j, completion) {
        (Some(j), Some(n)) if n > 0.0 => Some(j / n),
        _ => None,
    };
    Ok(ServerWindow {
        server: r.get(0)?,
        model: r.get(1)?,
        from: r.get(2)?,
        to: r.get(3)?,
        prompt_tokens: r.get(4)?,
        completion_tokens: completion,
        energy_joules: energy,
        net_energy_joules: net,
        joules_per_token: per_token(energy),
        net_joules_per_token: per_token(net),
        prefill_energy_joules: r.get(8)?,
        decode_energy_joules: r.get(9)?,
        concurrent: r.get(10)?,
        coarse: r.get(11)?,
        shared: r.get(12)?,
        proxied: r.get(13)?,
        scope: coverage::scope_of(r.get(14)?),
        covers: coverage::covers_of(r.get(15)?),
        covered: r.get(16)?,
        gpu_processes: r.get(17)?,
    })
}

impl Store {
    /// Each model's sums, as committed, by server then model.
    pub fn server_totals(&self) -> Result<Vec<ServerTotal>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT server, model, prompt_tokens, completion_tokens, energy_joules, scope,
                        covers
                 FROM server_totals ORDER BY server, model, scope, covers",
            )
            .and_then(|mut s| {
                s.query_map([], |r| {
                    let model: String = r.get(1)?;
                    Ok(ServerTotal {
                        server: r.get(0)?,
                        model: (!model.is_empty()).then_some(model),
                        prompt_tokens: r.get(2)?,
                        completion_tokens: r.get(3)?,
                        energy_joules: r.get(4)?,
                        scope: coverage::scope_of(r.get(5)?),
                        covers: coverage::covers_of(r.get(6)?),
                    })
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))
    }

    /// The windows that ended in `from..=to` (Unix seconds), oldest first, at most `limit`
    /// (the newest of them).
    pub fn server_windows(
        &self,
        from: f64,
        to: f64,
        limit: usize,
    ) -> Result<Vec<ServerWindow>, StoreError> {
        let mut rows: Vec<ServerWindow> = self
            .conn
            .prepare_cached(
                "SELECT server, model, from_t, to_t, prompt_tokens, completion_tokens,
                        energy_joules, net_energy_joules, prefill_joules, decode_joules,
                        concurrent, coarse, shared, proxied, scope, covers, covered,
                        gpu_processes
                 FROM server_windows WHERE to_t >= ?1 AND to_t <= ?2
                 ORDER BY to_t DESC, id DESC LIMIT ?3",
            )
            .and_then(|mut s| {
                s.query_map(
                    params![from, to, i64::try_from(limit).unwrap_or(i64::MAX)],
                    window,
                )?
                .collect()
            })
            .map_err(|e| self.sql(e))?;
        rows.reverse();
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::resident::BatchExtras;
    use crate::store::DB_FILE;
    use wattbar_core::Scope;

    fn window(to: f64, model: Option<&str>, completion: f64, joules: Option<f64>) -> ServerWindow {
        ServerWindow {
            server: "http://127.0.0.1:8080/metrics".into(),
            model: model.map(str::to_string),
            from: to - 10.0,
            to,
            prompt_tokens: Some(40.0),
            completion_tokens: Some(completion),
            energy_joules: joules,
            net_energy_joules: joules.map(|j| j / 2.0),
            joules_per_token: joules.map(|j| j / completion),
            net_joules_per_token: joules.map(|j| j / 2.0 / completion),
            prefill_energy_joules: None,
            decode_energy_joules: None,
            concurrent: true,
            coarse: false,
            shared: false,
            proxied: false,
            scope: Some(Scope::Wall),
            covers: Vec::new(),
            covered: Some(1.0),
            gpu_processes: Some(2),
        }
    }

    /// Two batches of windows, one of them unmeasured: the sums are 150 + 50 = 200 completion
    /// tokens, 2 × 40 prompt tokens and 3,000 + 1,000 J, read back after a reopen; pruning the
    /// windows leaves the sums whole.
    #[test]
    fn windows_are_kept_and_their_sums_survive_a_reopen_and_a_prune() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let batches = [
            vec![window(1_010.0, None, 150.0, Some(3_000.0))],
            vec![
                window(1_020.0, None, 30.0, None),
                window(1_030.0, None, 50.0, Some(1_000.0)),
                window(1_030.0, Some("qwen3"), 10.0, Some(100.0)),
            ],
        ];
        for windows in &batches {
            let (mut store, _) = Store::open(&path, 1_000.0).unwrap_or_else(|e| panic!("{e}"));
            let session = store
                .start_session(1_000.0, "EUR")
                .unwrap_or_else(|e| panic!("{e}"));
            let also = BatchExtras {
                server_windows: windows,
                ..BatchExtras::default()
            };
            store
                .write_batch_with(session, &[], 0.0, 0.0, &also)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let (mut store, _) = Store::open(&path, 1_100.0).unwrap_or_else(|e| panic!("{e}"));
        let totals = store.server_totals().unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<_> = totals
            .iter()
            .map(|t| {
                (
                    t.model.as_deref(),
                    t.prompt_tokens,
                    t.completion_tokens,
                    t.energy_joules,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (None, 80.0, 200.0, 4_000.0),
                (Some("qwen3"), 40.0, 10.0, 100.0)
            ]
        );
        let kept = store
            .server_windows(1_015.0, 1_030.0, 2)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            kept.iter()
                .map(|w| (w.to, w.completion_tokens, w.joules_per_token))
                .collect::<Vec<_>>(),
            [
                (1_030.0, Some(50.0), Some(20.0)),
                (1_030.0, Some(10.0), Some(10.0))
            ],
            "the newest two of the three that ended in the range, oldest first"
        );
        assert!(kept.iter().all(|w| w.concurrent && !w.coarse));
        store
            .prune_inference(2_000.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            store.server_windows(0.0, 2_000.0, 10).map(|w| w.len()).ok(),
            Some(0)
        );
        assert_eq!(store.server_totals().ok(), Some(totals));
    }

    /// A v16 ledger kept 4,000 J over 200 tokens without saying what they covered. Migrated,
    /// the sums stay whole with no scope, never a guessed one; a window measured at the wall
    /// afterwards (1,000 J over 50 tokens) starts sums of its own beside them.
    #[test]
    fn sums_kept_before_scopes_stay_apart_from_those_of_the_wall() {
        use crate::store::schema::MIGRATIONS;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        {
            let conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
            for step in &MIGRATIONS[..16] {
                conn.execute_batch(step).unwrap_or_else(|e| panic!("{e}"));
            }
            conn.execute_batch(
                "INSERT INTO server_totals VALUES ('http://127.0.0.1:8080/metrics', '', 80.0,
                                                   200.0, 4000.0);
                 PRAGMA user_version = 16;",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let (mut store, _) = Store::open(&path, 1_000.0).unwrap_or_else(|e| panic!("{e}"));
        let session = store
            .start_session(1_000.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let also = BatchExtras {
            server_windows: &[window(1_010.0, None, 50.0, Some(1_000.0))],
            ..BatchExtras::default()
        };
        store
            .write_batch_with(session, &[], 0.0, 0.0, &also)
            .unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<_> = store
            .server_totals()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|t| (t.scope, t.completion_tokens, t.energy_joules))
            .collect();
        assert_eq!(
            got,
            [(None, 200.0, 4_000.0), (Some(Scope::Wall), 50.0, 1_000.0)]
        );
        let kept = store
            .server_windows(0.0, 2_000.0, 10)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kept.first().and_then(|w| w.scope), Some(Scope::Wall));
    }
}
