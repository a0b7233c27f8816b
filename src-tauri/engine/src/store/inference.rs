//! The inference ledger in the store (v5): one row per request, the record as JSON beside the
//! columns it is looked up by, and the last idle baseline.
//!
//! A record is written at once in its own statement (autocommit is a transaction): requests are
//! rare next to samples, and a record is worth more than a sample.

use super::{Store, StoreError};
use rusqlite::{params, OptionalExtension};
use wattbar_core::inference::{Baseline, Interval, Record};

/// Longest step between two stored samples that still makes an interval (the longest sampling
/// period, and then some).
pub const MAX_STORED_GAP_S: f64 = 60.0;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE inference (id INTEGER PRIMARY KEY, model TEXT NOT NULL, route TEXT NOT NULL,
                        status TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL,
                        record TEXT NOT NULL);
CREATE INDEX inference_end ON inference(end);
CREATE TABLE inference_baseline (id INTEGER PRIMARY KEY CHECK (id = 1), watts REAL NOT NULL,
                                 samples INTEGER NOT NULL, from_t REAL NOT NULL,
                                 to_t REAL NOT NULL, method TEXT NOT NULL);
"#;

impl Store {
    pub fn insert_inference(&mut self, r: &Record) -> Result<(), StoreError> {
        let json = serde_json::to_string(r).map_err(|e| self.sql(to_sql_error(e)))?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO inference (id, model, route, status, start, end, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    i64::try_from(r.id).unwrap_or(i64::MAX),
                    r.model,
                    r.route.as_str(),
                    r.status.as_str(),
                    r.start,
                    r.end,
                    json
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Records that ended at or after `since` (Unix seconds), newest first, at most `limit`.
    pub fn inference(&self, since: f64, limit: usize) -> Result<Vec<Record>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT record FROM inference WHERE end >= ?1 ORDER BY end DESC, id DESC LIMIT ?2",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                params![since, i64::try_from(limit).unwrap_or(i64::MAX)],
                |row| row.get::<_, String>(0),
            )
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for json in rows {
            let json = json.map_err(|e| self.sql(e))?;
            match serde_json::from_str(&json) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!("an unreadable inference record was skipped: {e}"),
            }
        }
        Ok(out)
    }

    /// Every record, oldest first (to rebuild the per-model figures at start).
    pub fn all_inference(&self) -> Result<Vec<Record>, StoreError> {
        let mut all = self.inference(f64::NEG_INFINITY, usize::MAX >> 1)?;
        all.reverse();
        Ok(all)
    }

    /// The stored samples between `from` and `to` (Unix seconds) as energy intervals, each from
    /// one sample to the next (the energy a sample row holds is its step's). Samples are kept
    /// for a day; longer gaps than [`MAX_STORED_GAP_S`] are not intervals.
    pub fn intervals(&self, from: f64, to: f64) -> Result<Vec<Interval>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT t, watts, joules FROM samples WHERE t >= ?1 AND t <= ?2 ORDER BY t",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                params![from - MAX_STORED_GAP_S, to + MAX_STORED_GAP_S],
                |r| {
                    Ok((
                        r.get::<_, f64>(0)?,
                        r.get::<_, Option<f64>>(1)?,
                        r.get::<_, f64>(2)?,
                    ))
                },
            )
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        Ok(rows
            .windows(2)
            .filter(|p| p[1].0 - p[0].0 > 0.0 && p[1].0 - p[0].0 <= MAX_STORED_GAP_S)
            .map(|p| {
                let measured = p[0].1.is_some() && p[1].1.is_some();
                Interval {
                    start: p[0].0,
                    end: p[1].0,
                    unix_start: p[0].0,
                    unix_end: p[1].0,
                    joules: measured.then_some(p[1].2),
                    by_domain: Vec::new(),
                    quality: None,
                    source: None,
                }
            })
            .collect())
    }

    pub fn set_baseline(&mut self, b: &Baseline) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO inference_baseline (id, watts, samples, from_t, to_t, method)
                 VALUES (1, ?1, ?2, ?3, ?4, ?5)",
                params![
                    b.watts,
                    i64::try_from(b.samples).unwrap_or(i64::MAX),
                    b.from,
                    b.to,
                    b.method
                ],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    pub fn baseline(&self) -> Result<Option<Baseline>, StoreError> {
        self.conn
            .query_row(
                "SELECT watts, samples, from_t, to_t, method FROM inference_baseline WHERE id = 1",
                [],
                |r| {
                    Ok(Baseline {
                        watts: r.get(0)?,
                        samples: usize::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                        from: r.get(2)?,
                        to: r.get(3)?,
                        method: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }
}

fn to_sql_error(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::inference::{Observed, Route, ServerFigures, Status};

    fn record(id: u64, model: &str, end: f64) -> Record {
        Record::build(
            id,
            Observed {
                route: Route::OllamaChat,
                model: model.into(),
                status: Status::Ok,
                error: None,
                start: end - 2.0,
                end,
                ttft_seconds: Some(0.5),
                figures: ServerFigures {
                    completion_tokens: Some(50),
                    ..ServerFigures::default()
                },
                share: None,
                phases_known: false,
                baseline_watts: None,
                ceiling: 5.0,
            },
        )
    }

    #[test]
    fn records_survive_a_reopen_and_come_back_newest_first() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("wattbar.db");
        {
            let (mut s, _) = Store::open(&path, 0.0).unwrap_or_else(|e| panic!("{e}"));
            for (id, end) in [(1, 100.0), (2, 200.0), (3, 300.0)] {
                s.insert_inference(&record(id, "llama3", end))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            s.set_baseline(&Baseline {
                watts: 21.5,
                samples: 40,
                from: 10.0,
                to: 50.0,
                method: "median".into(),
            })
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let s = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        let recent = s.inference(150.0, 10).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(recent.iter().map(|r| r.id).collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!(recent[0], record(3, "llama3", 300.0));
        let all = s.all_inference().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.iter().map(|r| r.id).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(s.baseline().ok().flatten().map(|b| b.watts), Some(21.5));
    }
}
