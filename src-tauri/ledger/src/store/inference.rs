//! The inference ledger in the store: one row per request in typed columns (v7), the figures
//! per model, and the last idle baseline.
//!
//! Rules:
//! - A record is written at once, with its model's figures, in one transaction: requests are
//!   rare next to samples, and a record is worth more than a sample.
//! - Ids are never reused: the table counts them (`AUTOINCREMENT`), so neither pruning nor a
//!   lost row hands an old id out again, and a second write of one id is refused, never
//!   replaces.
//! - A field added later is a new nullable column: older rows read it as unknown.
//! - Records are kept [`DEFAULT_KEEP_DAYS`] (a preference); a model's figures are sums kept
//!   apart, so pruning its records does not change them.
//! - Start-up reads the figures per model and the few newest records the view shows, never the
//!   whole table.

use super::{coverage, Store, StoreError};
use rusqlite::{params, OptionalExtension};
use std::collections::BTreeMap;
use wattbar_core::inference::{Baseline, ModelStats, RatioSums, Record, Route, Routed, Status};

/// How long inference records are kept by default.
pub const DEFAULT_KEEP_DAYS: u32 = 90;

const COLUMNS: &str = "id, model, route, status, start, end, ttft_seconds, prompt_tokens, \
    completion_tokens, tokens_source, prefill_seconds, decode_seconds, load_seconds, \
    tokens_per_second, energy_joules, net_energy_joules, energy_bound_joules, \
    net_energy_bound_joules, prefill_joules, decode_joules, joules_per_token, \
    tokens_per_second_per_watt, score, baseline_watts, covered, partial, quality, sources, error";

/// The columns added after v7, each nullable: older rows read them as unknown.
const LATER_COLUMNS: &str =
    "requested_model, shared_by, held_before_joules, scope, covers, key, client, key_joules, \
     cost, currency, carbon_g, key_cost";

/// A model's figures as schema 7 to 16 kept them, one row per model.
const V7_MODEL_COLUMNS: &str = "model, requests, ok, cancelled, error, remote, partial, \
    prompt_tokens, completion_tokens, energy_joules, last, jpt_joules, jpt_tokens, net_joules, \
    net_tokens, tps, tps_n, eff_tokens, eff_joules";

/// From schema 17, one row per model and scope (`''` where not known).
const MODEL_COLUMNS: &str = "model, requests, ok, cancelled, error, remote, partial, \
    prompt_tokens, completion_tokens, energy_joules, last, jpt_joules, jpt_tokens, net_joules, \
    net_tokens, tps, tps_n, eff_tokens, eff_joules, scope";

/// An enum as the text serde gives it (`"server"`, `"measured"`).
fn text_of<T: serde::Serialize>(v: &Option<T>) -> Option<String> {
    v.as_ref()
        .and_then(|v| serde_json::to_value(v).ok())
        .and_then(|v| v.as_str().map(str::to_string))
}

fn from_text<T: serde::de::DeserializeOwned>(s: Option<String>) -> Option<T> {
    s.and_then(|s| serde_json::from_value(serde_json::Value::String(s)).ok())
}

fn count(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn unsigned(row: &rusqlite::Row<'_>, k: usize) -> rusqlite::Result<Option<u64>> {
    Ok(row
        .get::<_, Option<i64>>(k)?
        .map(|n| u64::try_from(n).unwrap_or(0)))
}

fn record_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Record> {
    let route: String = row.get(2)?;
    let status: String = row.get(3)?;
    let (start, end): (f64, f64) = (row.get(4)?, row.get(5)?);
    let sources: String = row.get(27)?;
    let unreadable = |what: &str, value: &str| {
        rusqlite::Error::FromSqlConversionFailure(
            2,
            rusqlite::types::Type::Text,
            format!("{what} {value:?} is not one Wattbar knows").into(),
        )
    };
    Ok(Record {
        id: row
            .get::<_, i64>(0)
            .map(|n| u64::try_from(n).unwrap_or(0))?,
        model: row.get(1)?,
        requested_model: row.get(29)?,
        route: Route::parse(&route).ok_or_else(|| unreadable("route", &route))?,
        status: Status::parse(&status).ok_or_else(|| unreadable("status", &status))?,
        start,
        end,
        wall_seconds: (end - start).max(0.0),
        ttft_seconds: row.get(6)?,
        prompt_tokens: unsigned(row, 7)?,
        completion_tokens: unsigned(row, 8)?,
        tokens_source: from_text(row.get(9)?),
        prefill_seconds: row.get(10)?,
        decode_seconds: row.get(11)?,
        load_seconds: row.get(12)?,
        tokens_per_second: row.get(13)?,
        energy_joules: row.get(14)?,
        net_energy_joules: row.get(15)?,
        energy_bound_joules: row.get(16)?,
        net_energy_bound_joules: row.get(17)?,
        prefill_joules: row.get(18)?,
        decode_joules: row.get(19)?,
        joules_per_token: row.get(20)?,
        tokens_per_second_per_watt: row.get(21)?,
        score: row.get(22)?,
        baseline_watts: row.get(23)?,
        covered: row.get(24)?,
        partial: row.get::<_, i64>(25)? != 0,
        quality: from_text(row.get(26)?),
        sources: serde_json::from_str(&sources).unwrap_or_default(),
        error: row.get(28)?,
        shared_by: unsigned(row, 30)?,
        held_before_joules: row.get(31)?,
        scope: coverage::scope_of(row.get(32)?),
        covers: coverage::covers_of(row.get(33)?),
        key: row.get(34)?,
        client: row.get(35)?,
        key_joules: row.get(36)?,
        cost: row.get(37)?,
        currency: row.get(38)?,
        carbon_g: row.get(39)?,
        key_cost: row.get(40)?,
    })
}

fn model_of(row: &rusqlite::Row<'_>, ceiling: f64) -> rusqlite::Result<ModelStats> {
    let n = |k: usize| unsigned(row, k).map(Option::unwrap_or_default);
    let model: String = row.get(0)?;
    let mut by_status = BTreeMap::new();
    for (k, status) in [(2, "ok"), (3, "cancelled"), (4, "error"), (5, "remote")] {
        let c = n(k)?;
        if c > 0 {
            by_status.insert(status.to_string(), c);
        }
    }
    let mut stats = ModelStats {
        requests: n(1)?,
        requests_by_status: by_status,
        partial_requests: n(6)?,
        prompt_tokens: n(7)?,
        completion_tokens: n(8)?,
        energy_joules: row.get(9)?,
        last: row.get(10)?,
        sums: RatioSums {
            jpt_joules: row.get(11)?,
            jpt_tokens: row.get(12)?,
            net_joules: row.get(13)?,
            net_tokens: row.get(14)?,
            tps: row.get(15)?,
            tps_n: row.get(16)?,
            eff_tokens: row.get(17)?,
            eff_joules: row.get(18)?,
        },
        ..ModelStats::new(&model, super::scopes::from_text(&row.get::<_, String>(19)?))
    };
    stats.refresh(ceiling);
    Ok(stats)
}

/// How `inference_models` is keyed: by model (schema 7 to 16), or by model and scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyed {
    Model,
    ModelAndScope,
}

pub(super) fn write_model(
    tx: &rusqlite::Connection,
    m: &ModelStats,
    keyed: Keyed,
) -> rusqlite::Result<()> {
    use rusqlite::types::Value;
    let n = |c: Option<i64>| Value::Integer(c.unwrap_or(0));
    let status = |s: &str| n(count(m.requests_by_status.get(s).copied()));
    let s = &m.sums;
    let mut values = vec![
        Value::Text(m.model.clone()),
        n(count(Some(m.requests))),
        status("ok"),
        status("cancelled"),
        status("error"),
        status("remote"),
        n(count(Some(m.partial_requests))),
        n(count(Some(m.prompt_tokens))),
        n(count(Some(m.completion_tokens))),
        Value::Real(m.energy_joules),
        Value::Real(m.last),
        Value::Real(s.jpt_joules),
        Value::Real(s.jpt_tokens),
        Value::Real(s.net_joules),
        Value::Real(s.net_tokens),
        Value::Real(s.tps),
        Value::Real(s.tps_n),
        Value::Real(s.eff_tokens),
        Value::Real(s.eff_joules),
    ];
    let columns = match keyed {
        Keyed::Model => V7_MODEL_COLUMNS,
        Keyed::ModelAndScope => {
            values.push(Value::Text(super::scopes::to_text(m.scope).to_string()));
            MODEL_COLUMNS
        }
    };
    let marks: Vec<String> = (1..=values.len()).map(|k| format!("?{k}")).collect();
    tx.prepare_cached(&format!(
        "INSERT OR REPLACE INTO inference_models ({columns}) VALUES ({})",
        marks.join(", ")
    ))?
    .execute(rusqlite::params_from_iter(values))?;
    Ok(())
}

/// Writes one record and adds it to its model's figures; `tx` is a transaction (or a savepoint
/// of the batch's), so that both land or neither. An id already stored is refused.
pub(super) fn put_record(tx: &rusqlite::Connection, r: &Record) -> rusqlite::Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO inference ({COLUMNS}, {LATER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5,
         ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
         ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37,
         ?38, ?39, ?40, ?41)"
    ))?
    .execute(params![
        count(Some(r.id)),
        r.model,
        r.route.as_str(),
        r.status.as_str(),
        r.start,
        r.end,
        r.ttft_seconds,
        count(r.prompt_tokens),
        count(r.completion_tokens),
        text_of(&r.tokens_source),
        r.prefill_seconds,
        r.decode_seconds,
        r.load_seconds,
        r.tokens_per_second,
        r.energy_joules,
        r.net_energy_joules,
        r.energy_bound_joules,
        r.net_energy_bound_joules,
        r.prefill_joules,
        r.decode_joules,
        r.joules_per_token,
        r.tokens_per_second_per_watt,
        r.score,
        r.baseline_watts,
        r.covered,
        r.partial,
        text_of(&r.quality),
        serde_json::to_string(&r.sources).unwrap_or_else(|_| "[]".into()),
        r.error,
        r.requested_model,
        count(r.shared_by),
        r.held_before_joules,
        coverage::scope_column(r.scope),
        coverage::covers_column(&r.covers),
        r.key,
        r.client,
        r.key_joules,
        r.cost,
        r.currency,
        r.carbon_g,
        r.key_cost,
    ])?;
    super::keys::count_record(tx, r)?;
    let mut model = tx
        .prepare_cached(&format!(
            "SELECT {MODEL_COLUMNS} FROM inference_models WHERE model = ?1 AND scope = ?2"
        ))?
        .query_row(params![r.model, super::scopes::to_text(r.scope)], |row| {
            model_of(row, 1.0)
        })
        .optional()?
        .unwrap_or_else(|| ModelStats::new(&r.model, r.scope));
    model.add(r, 1.0);
    write_model(tx, &model, Keyed::ModelAndScope)?;
    Ok(())
}

/// Keeps the ids through `through` reserved (`sqlite_sequence`), so that none handed out before
/// a crash is handed out again after it.
pub(super) fn put_reserved_ids(tx: &rusqlite::Connection, through: u64) -> rusqlite::Result<()> {
    let through = count(Some(through));
    let updated = tx.execute(
        "UPDATE sqlite_sequence SET seq = MAX(seq, ?1) WHERE name = 'inference'",
        [through],
    )?;
    if updated == 0 {
        tx.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('inference', ?1)",
            [through],
        )?;
    }
    Ok(())
}

impl Store {
    /// Writes one record and adds it to its model's figures, both or neither. An id already
    /// stored is refused. Tests lay out a ledger with it; the engine writes in batches.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert_inference(&mut self, r: &Record) -> Result<(), StoreError> {
        let result = (|| {
            let tx = self.conn.transaction()?;
            put_record(&tx, r)?;
            tx.commit()
        })();
        result.map_err(|e| self.sql(e))
    }

    fn records(&self, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Record>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sql(e))?;
        let mut rows = stmt.query(args).map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.sql(e))? {
            match record_of(row) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!("an unreadable inference record was skipped: {e}"),
            }
        }
        Ok(out)
    }

    /// Records that ended at or after `since` (Unix seconds), newest first, at most `limit`.
    pub fn inference(&self, since: f64, limit: usize) -> Result<Vec<Record>, StoreError> {
        self.records(
            &format!(
                "SELECT {COLUMNS}, {LATER_COLUMNS} FROM inference WHERE end >= ?1 ORDER BY end DESC, id DESC
                 LIMIT ?2"
            ),
            params![since, i64::try_from(limit).unwrap_or(i64::MAX)],
        )
    }

    /// Record `id`, while the ledger keeps it.
    pub fn inference_record(&self, id: u64) -> Result<Option<Record>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS}, {LATER_COLUMNS} FROM inference WHERE id = ?1"
            ))
            .and_then(|mut stmt| stmt.query_row([count(Some(id))], record_of).optional())
            .map_err(|e| self.sql(e))
    }

    /// The routed requests among the records kept.
    pub fn routed_inference(&self) -> Result<Routed, StoreError> {
        self.conn
            .query_row(
                "SELECT COUNT(*), SUM(energy_joules), COUNT(*) - COUNT(energy_joules)
                 FROM inference WHERE requested_model IS NOT NULL",
                [],
                |row| {
                    Ok(Routed {
                        requests: unsigned(row, 0)?.unwrap_or_default(),
                        energy_joules: row.get(1)?,
                        unmeasured: unsigned(row, 2)?.unwrap_or_default(),
                    })
                },
            )
            .map_err(|e| self.sql(e))
    }

    /// What the engine shows at start, oldest first: the newest `shown` records and the newest
    /// `scored` ones that have a score.
    pub fn latest_inference(&self, shown: usize, scored: usize) -> Result<Vec<Record>, StoreError> {
        let limit = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.records(
            &format!(
                "SELECT {COLUMNS}, {LATER_COLUMNS} FROM inference WHERE id IN (
                     SELECT id FROM (SELECT id FROM inference ORDER BY id DESC LIMIT ?1)
                     UNION
                     SELECT id FROM (SELECT id FROM inference WHERE score IS NOT NULL
                                     ORDER BY id DESC LIMIT ?2))
                 ORDER BY id"
            ),
            params![limit(shown), limit(scored)],
        )
    }

    /// The figures per model, over every record ever stored (pruned ones included), scored
    /// against `ceiling`.
    pub fn inference_models(&self, ceiling: f64) -> Result<Vec<ModelStats>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("SELECT {MODEL_COLUMNS} FROM inference_models"))
            .map_err(|e| self.sql(e))?;
        let models = stmt
            .query_map([], |row| model_of(row, ceiling))
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e));
        models
    }

    /// The id the next record gets: above every id ever stored, pruned or lost ones included.
    pub fn next_inference_id(&self) -> Result<u64, StoreError> {
        let seq: Option<i64> = self
            .conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'inference'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(u64::try_from(seq.unwrap_or(0)).unwrap_or(0) + 1)
    }

    /// Reserves the ids up to `through` durably: [`Store::next_inference_id`] answers above it
    /// from now on, even if no record with those ids is ever written. (The engine reserves in
    /// its batches.)
    #[cfg(test)]
    pub fn reserve_inference_ids(&mut self, through: u64) -> Result<(), StoreError> {
        let result = (|| {
            let tx = self.conn.transaction()?;
            put_reserved_ids(&tx, through)?;
            tx.commit()
        })();
        result.map_err(|e| self.sql(e))
    }

    /// Deletes the records that ended before `before` (Unix seconds); the figures per model
    /// keep them.
    pub fn prune_inference(&mut self, before: f64) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached("DELETE FROM inference WHERE end < ?1")
            .and_then(|mut s| s.execute([before]))
            .and_then(|n| super::server_windows::prune(&self.conn, before).map(|_| n))
            .map_err(|e| self.sql(e))
    }

    #[cfg(test)]
    pub fn set_baseline(&mut self, b: &Baseline) -> Result<(), StoreError> {
        put_baseline(&self.conn, b).map_err(|e| self.sql(e))
    }

    pub fn baseline(&self) -> Result<Option<Baseline>, StoreError> {
        self.conn
            .query_row(
                "SELECT watts, spread_watts, samples, from_t, to_t, method, scope, covers
                 FROM inference_baseline WHERE id = 1",
                [],
                |r| {
                    Ok(Baseline {
                        watts: r.get(0)?,
                        spread_watts: r.get(1)?,
                        samples: usize::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        from: r.get(3)?,
                        to: r.get(4)?,
                        method: r.get(5)?,
                        coverage: coverage::coverage_of(r.get(6)?, r.get(7)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }
}

mod migrations;
pub(super) use migrations::{fill_models, MIGRATION, ROUTED, SHARES, TYPED};

#[cfg(test)]
pub(super) mod tests;

/// Keeps `b` as the one idle baseline; `conn` may be a batch's transaction.
pub(super) fn put_baseline(conn: &rusqlite::Connection, b: &Baseline) -> rusqlite::Result<()> {
    let (scope, covers) = coverage::columns(b.coverage.as_ref());
    conn.prepare_cached(
        "INSERT OR REPLACE INTO inference_baseline
             (id, watts, spread_watts, samples, from_t, to_t, method, scope, covers)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        b.watts,
        b.spread_watts,
        i64::try_from(b.samples).unwrap_or(i64::MAX),
        b.from,
        b.to,
        b.method,
        scope,
        covers
    ])?;
    Ok(())
}
