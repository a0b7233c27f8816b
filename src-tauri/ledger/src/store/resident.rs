//! What resident models cost at idle (v9): the idle baseline of each set of loaded models, each
//! model's resident idle time per local day, and each unload low-power mode asked for.
//!
//! - `resident_baselines(set_key, models, shares, watts, spread_watts, samples, from_t, to_t,
//!   method)`: the last baseline of each set (`set_key` `""` is the set with no model loaded);
//!   `models` and `shares` are JSON arrays.
//! - `resident_idle(day, model, idle_seconds, joules, cost, unpriced_seconds)`: the day's
//!   figures, written whole (not added to), so a batch written twice changes nothing; never
//!   lowered (each column keeps the larger of the stored and the written figure), so a day
//!   counted again from 0 after a failed restore cannot write over what was committed. The
//!   lifetime counter `wattbar_model_resident_idle_joules_total` is these rows' sum
//!   ([`Store::resident_idle_totals`]), read back after each batch.
//! - `unloads(t, server, unloaded, kept, error)`: what each engagement unloaded (JSON arrays),
//!   or why it could not.
//!
//! Rows are written in the engine's batch transaction.

use super::{coverage, local_day_month, Store, StoreError};
use rusqlite::{params, Connection};
use std::collections::BTreeMap;
use wattbar_core::inference::resident::{ResidentDay, SetBaseline, StoredResidency, Unload};
use wattbar_core::inference::{Baseline, Record};
use wattbar_core::LowPowerState;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE resident_baselines (set_key TEXT PRIMARY KEY, models TEXT NOT NULL,
                                 shares TEXT NOT NULL, watts REAL NOT NULL, spread_watts REAL,
                                 samples INTEGER NOT NULL, from_t REAL NOT NULL,
                                 to_t REAL NOT NULL, method TEXT NOT NULL);
CREATE TABLE resident_idle (day TEXT NOT NULL, model TEXT NOT NULL, idle_seconds REAL NOT NULL,
                            joules REAL NOT NULL, cost REAL NOT NULL,
                            unpriced_seconds REAL NOT NULL, PRIMARY KEY (day, model));
CREATE TABLE unloads (id INTEGER PRIMARY KEY, t REAL NOT NULL, server TEXT NOT NULL,
                      unloaded TEXT NOT NULL, kept TEXT NOT NULL, error TEXT);
"#;

/// What a batch writes besides its rows.
#[derive(Debug, Default, Clone, Copy)]
pub struct BatchExtras<'a> {
    /// A new whole-machine idle baseline.
    pub baseline: Option<&'a Baseline>,
    pub set_baselines: &'a [SetBaseline],
    pub resident_days: &'a [ResidentDay],
    /// Joules to add per (UTC hour, program).
    pub program_hours: Option<&'a BTreeMap<(i64, String), f64>>,
    /// Inference records, each with its model's figures; one the ledger refuses (an id stored
    /// already) is dropped alone, with an error in the log, never the batch.
    pub records: &'a [Record],
    pub unloads: &'a [Unload],
    /// Changes of low-power mode, each with what was said of it.
    pub low_power: &'a [(LowPowerState, String)],
    /// Record ids to keep reserved, through this one.
    pub reserve_ids_through: Option<u64>,
    /// Changes of the headline's scope.
    pub scope_changes: &'a [super::scopes::ScopeChange],
    /// A new fit from the parts to a whole-machine reference.
    pub calibration: Option<&'a wattbar_core::calibration::Learned>,
    /// Windows of model servers followed by their own counters.
    pub server_windows: &'a [wattbar_core::inference::server_window::ServerWindow],
    /// Graded profiles of models.
    pub profiles: &'a [super::profiles::StoredProfile],
    /// Feeds' answers, to price from after a restart.
    pub feed_slots: &'a [super::feeds::FeedSlots],
    /// Keys a request was refused for, once each request.
    pub key_refusals: &'a [String],
    /// Batteries' figures of a day (the day's last wins).
    pub battery_days: &'a [super::battery::BatteryDay],
    /// Energy drawn from the battery and its wear, per local day.
    pub wear: &'a [(String, super::wear::Worn)],
}

/// Keeps one unload; `conn` may be the batch's transaction.
pub(super) fn put_unload(conn: &Connection, u: &Unload) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO unloads (t, server, unloaded, kept, error) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        u.t,
        u.server,
        json(&u.unloaded),
        json(&u.kept),
        u.error
    ])?;
    Ok(())
}

/// Writes `also`'s residency rows; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, also: &BatchExtras<'_>) -> rusqlite::Result<()> {
    for s in also.set_baselines {
        let b = &s.baseline;
        let (scope, covers) = coverage::columns(b.coverage.as_ref());
        conn.prepare_cached(
            "INSERT OR REPLACE INTO resident_baselines (set_key, models, shares, watts,
                 spread_watts, samples, from_t, to_t, method, scope, covers)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?
        .execute(params![
            s.key,
            json(&s.models),
            json(&s.shares),
            b.watts,
            b.spread_watts,
            i64::try_from(b.samples).unwrap_or(i64::MAX),
            b.from,
            b.to,
            b.method,
            scope,
            covers
        ])?;
    }
    for d in also.resident_days {
        conn.prepare_cached(
            "INSERT INTO resident_idle (day, model, idle_seconds, joules, cost,
                 unpriced_seconds) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(day, model) DO UPDATE SET
                 idle_seconds = MAX(idle_seconds, excluded.idle_seconds),
                 joules = MAX(joules, excluded.joules), cost = MAX(cost, excluded.cost),
                 unpriced_seconds = MAX(unpriced_seconds, excluded.unpriced_seconds)",
        )?
        .execute(params![
            d.day,
            d.model,
            d.idle_seconds,
            d.joules,
            d.cost,
            d.unpriced_seconds
        ])?;
    }
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_string())
}

fn from_json<T: serde::de::DeserializeOwned + Default>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_default()
}

impl Store {
    /// The set baselines, the rows of the local day of `now_unix`, and every model's resident
    /// idle energy.
    pub fn resident_kept(&self, now_unix: f64) -> Result<StoredResidency, StoreError> {
        let (day, _) = local_day_month(now_unix);
        let baselines = self
            .conn
            .prepare(
                "SELECT set_key, models, shares, watts, spread_watts, samples, from_t, to_t,
                        method, scope, covers FROM resident_baselines",
            )
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok(SetBaseline {
                        key: r.get(0)?,
                        models: from_json(&r.get::<_, String>(1)?),
                        shares: from_json(&r.get::<_, String>(2)?),
                        baseline: Baseline {
                            watts: r.get(3)?,
                            spread_watts: r.get(4)?,
                            samples: usize::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                            from: r.get(6)?,
                            to: r.get(7)?,
                            method: r.get(8)?,
                            coverage: coverage::coverage_of(r.get(9)?, r.get(10)?),
                        },
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.sql(e))?;
        let today = self
            .conn
            .prepare(
                "SELECT day, model, idle_seconds, joules, cost, unpriced_seconds
                 FROM resident_idle WHERE day = ?1",
            )
            .and_then(|mut s| {
                s.query_map([&day], |r| {
                    Ok(ResidentDay {
                        day: r.get(0)?,
                        model: r.get(1)?,
                        idle_seconds: r.get(2)?,
                        joules: r.get(3)?,
                        cost: r.get(4)?,
                        unpriced_seconds: r.get(5)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(|e| self.sql(e))?;
        let lifetime = self
            .conn
            .prepare("SELECT model, SUM(joules) FROM resident_idle GROUP BY model")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<BTreeMap<String, f64>>>()
            })
            .map_err(|e| self.sql(e))?;
        // A set whose shares do not match its models was not written by this code: left out.
        let baselines = baselines
            .into_iter()
            .filter(|b: &SetBaseline| b.models.len() == b.shares.len())
            .collect();
        Ok(StoredResidency {
            baselines,
            today,
            lifetime,
        })
    }

    /// Each model's resident idle joules over every stored day: the rows added in the order of
    /// their days in Rust, so that a row that grows, or a new day's, never lowers a sum.
    pub fn resident_idle_totals(&self) -> Result<Vec<(String, f64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT model, joules FROM resident_idle ORDER BY model, day")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)))
            .map_err(|e| self.sql(e))?;
        let mut totals: Vec<(String, f64)> = Vec::new();
        for row in rows {
            let (model, joules) = row.map_err(|e| self.sql(e))?;
            let joules = if joules.is_finite() {
                joules.max(0.0)
            } else {
                0.0
            };
            match totals.last_mut() {
                Some((m, sum)) if *m == model => *sum += joules,
                _ => totals.push((model, joules)),
            }
        }
        Ok(totals)
    }

    /// Records an unload at once, in its own transaction.
    pub fn record_unload(&mut self, u: &Unload) -> Result<(), StoreError> {
        put_unload(&self.conn, u).map_err(|e| self.sql(e))
    }

    /// The newest unloads, newest first.
    pub fn unloads(&self, limit: usize) -> Result<Vec<Unload>, StoreError> {
        self.conn
            .prepare(
                "SELECT t, server, unloaded, kept, error FROM unloads ORDER BY id DESC LIMIT ?1",
            )
            .and_then(|mut s| {
                s.query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                    Ok(Unload {
                        t: r.get(0)?,
                        server: r.get(1)?,
                        unloaded: from_json(&r.get::<_, String>(2)?),
                        kept: from_json(&r.get::<_, String>(3)?),
                        error: r.get(4)?,
                    })
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(day: &str, model: &str, joules: f64) -> ResidentDay {
        ResidentDay {
            day: day.into(),
            model: model.into(),
            idle_seconds: joules / 10.0,
            joules,
            cost: 0.0,
            unpriced_seconds: 0.0,
        }
    }

    #[test]
    fn a_day_counted_again_from_zero_never_writes_over_what_was_committed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut store, _) =
            Store::open(&dir.path().join("ledger.db"), 0.0).unwrap_or_else(|e| panic!("{e}"));
        let id = store
            .start_session(0.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let write = |store: &mut Store, days: &[ResidentDay]| {
            let also = BatchExtras {
                resident_days: days,
                ..BatchExtras::default()
            };
            store
                .write_batch_with(id, &[], 0.0, 0.0, &also)
                .unwrap_or_else(|e| panic!("{e}"));
            store
                .resident_idle_totals()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        // Yesterday 3,600 J (10 W × 360 s) and today 720 J for gemma; 100 J today for qwen.
        let before = write(
            &mut store,
            &[
                day("2026-12-04", "gemma", 3600.0),
                day("2026-12-05", "gemma", 720.0),
                day("2026-12-05", "qwen", 100.0),
            ],
        );
        assert_eq!(
            before,
            [("gemma".to_string(), 4320.0), ("qwen".to_string(), 100.0)]
        );
        // A restart whose restore failed counts today from 0 again: 50 J is not 720 − 670.
        let after = write(&mut store, &[day("2026-12-05", "gemma", 50.0)]);
        assert_eq!(after, before, "nothing went back");
        // Once the new count passes the stored one, the row follows it.
        let later = write(&mut store, &[day("2026-12-05", "gemma", 800.0)]);
        assert_eq!(later[0], ("gemma".to_string(), 4400.0));
    }
}
