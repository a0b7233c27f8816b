//! The inference tables' migrations: v5 creates them, v7 types their columns and fills the
//! figures per model, v8 keeps the model a routed request asked for.

use super::{record_of, write_model, Keyed, COLUMNS};
use rusqlite::Transaction;
use std::collections::BTreeMap;
use wattbar_core::inference::ModelStats;

pub(in crate::store) const MIGRATION: &str = r#"
CREATE TABLE inference (id INTEGER PRIMARY KEY, model TEXT NOT NULL, route TEXT NOT NULL,
                        status TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL,
                        record TEXT NOT NULL);
CREATE INDEX inference_end ON inference(end);
CREATE TABLE inference_baseline (id INTEGER PRIMARY KEY CHECK (id = 1), watts REAL NOT NULL,
                                 samples INTEGER NOT NULL, from_t REAL NOT NULL,
                                 to_t REAL NOT NULL, method TEXT NOT NULL);
"#;

/// v8: the model a client asked for, when low-power mode routed its request to another.
pub(in crate::store) const ROUTED: &str = "ALTER TABLE inference ADD COLUMN requested_model TEXT;";

/// v11: how many records shared a record's window, and what records settled before it held.
pub(in crate::store) const SHARES: &str = "ALTER TABLE inference ADD COLUMN shared_by INTEGER;
ALTER TABLE inference ADD COLUMN held_before_joules REAL;";

/// v7: the whole-record JSON of v5 becomes typed columns; a row whose JSON cannot be read keeps
/// what its columns held and says so. The figures per model are filled by [`fill_models`] in
/// the same transaction.
pub(in crate::store) const TYPED: &str = r#"
CREATE TABLE inference_v7 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model TEXT NOT NULL, route TEXT NOT NULL, status TEXT NOT NULL,
    start REAL NOT NULL, end REAL NOT NULL,
    ttft_seconds REAL, prompt_tokens INTEGER, completion_tokens INTEGER, tokens_source TEXT,
    prefill_seconds REAL, decode_seconds REAL, load_seconds REAL, tokens_per_second REAL,
    energy_joules REAL, net_energy_joules REAL,
    energy_bound_joules REAL, net_energy_bound_joules REAL,
    prefill_joules REAL, decode_joules REAL, joules_per_token REAL,
    tokens_per_second_per_watt REAL, score REAL, baseline_watts REAL,
    covered REAL, partial INTEGER NOT NULL DEFAULT 0, quality TEXT,
    sources TEXT NOT NULL DEFAULT '[]', error TEXT);
INSERT INTO inference_v7 (id, model, route, status, start, end, ttft_seconds, prompt_tokens,
    completion_tokens, tokens_source, prefill_seconds, decode_seconds, load_seconds,
    tokens_per_second, energy_joules, net_energy_joules, prefill_joules, decode_joules,
    joules_per_token, tokens_per_second_per_watt, score, baseline_watts, covered, partial,
    quality, sources, error)
SELECT id, model, route, status, start, end,
    json_extract(record, '$.ttft_seconds'), json_extract(record, '$.prompt_tokens'),
    json_extract(record, '$.completion_tokens'), json_extract(record, '$.tokens_source'),
    json_extract(record, '$.prefill_seconds'), json_extract(record, '$.decode_seconds'),
    json_extract(record, '$.load_seconds'), json_extract(record, '$.tokens_per_second'),
    json_extract(record, '$.energy_joules'), json_extract(record, '$.net_energy_joules'),
    json_extract(record, '$.prefill_joules'), json_extract(record, '$.decode_joules'),
    json_extract(record, '$.joules_per_token'),
    json_extract(record, '$.tokens_per_second_per_watt'), json_extract(record, '$.score'),
    json_extract(record, '$.baseline_watts'), json_extract(record, '$.covered'),
    COALESCE(json_extract(record, '$.partial'), 0), json_extract(record, '$.quality'),
    COALESCE(json_extract(record, '$.sources'), '[]'), json_extract(record, '$.error')
FROM inference WHERE json_valid(record);
INSERT INTO inference_v7 (id, model, route, status, start, end, error)
SELECT id, model, route, status, start, end, 'the stored record could not be read'
FROM inference WHERE NOT json_valid(record);
DROP TABLE inference;
ALTER TABLE inference_v7 RENAME TO inference;
CREATE INDEX inference_end ON inference(end);
ALTER TABLE inference_baseline ADD COLUMN spread_watts REAL;
CREATE TABLE inference_models (
    model TEXT PRIMARY KEY, requests INTEGER NOT NULL, ok INTEGER NOT NULL,
    cancelled INTEGER NOT NULL, error INTEGER NOT NULL, remote INTEGER NOT NULL,
    partial INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    energy_joules REAL NOT NULL, last REAL NOT NULL,
    jpt_joules REAL NOT NULL, jpt_tokens REAL NOT NULL, net_joules REAL NOT NULL,
    net_tokens REAL NOT NULL, tps REAL NOT NULL, tps_n REAL NOT NULL,
    eff_tokens REAL NOT NULL, eff_joules REAL NOT NULL);
"#;

/// The figures per model from every record the table holds, for the v7 migration.
pub(in crate::store) fn fill_models(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    let mut models: BTreeMap<String, ModelStats> = BTreeMap::new();
    {
        // The columns of v8 and later do not exist yet: they read as unknown.
        let mut stmt = tx.prepare(&format!(
            "SELECT {COLUMNS}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             NULL FROM inference \
             ORDER BY id"
        ))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            match record_of(row) {
                Ok(r) => models
                    .entry(r.model.clone())
                    .or_insert_with(|| ModelStats::new(&r.model, None))
                    .add(&r, 1.0),
                Err(e) => tracing::warn!("an unreadable inference record was left out: {e}"),
            }
        }
    }
    for m in models.values() {
        write_model(tx, m, Keyed::Model)?;
    }
    Ok(())
}
