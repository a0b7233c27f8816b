//! History per domain (v6): `domain_minutes` and `domain_hours` keep, per bucket and breakdown
//! domain (cpu, gpu, dram, …), the energy metered and the seconds it was metered over, so that a
//! domain's mean watts are its own energy over its own time, not over the bucket's.
//! `system` (the headline) stays in `minutes` and `hours`. Minutes are kept 30 days like the
//! headline's; hours forever.

use super::{sql_at, Step, Store, StoreError};
use rusqlite::params;
use serde::Serialize;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE domain_minutes (t INTEGER NOT NULL, domain TEXT NOT NULL, joules REAL NOT NULL,
                             seconds REAL NOT NULL, PRIMARY KEY (t, domain));
CREATE TABLE domain_hours (t INTEGER NOT NULL, domain TEXT NOT NULL, joules REAL NOT NULL,
                           seconds REAL NOT NULL, PRIMARY KEY (t, domain));
"#;

pub(super) fn table(step: Step) -> &'static str {
    match step {
        Step::Minute => "domain_minutes",
        Step::Hour => "domain_hours",
    }
}

pub(super) fn upsert_sql(step: Step) -> String {
    format!(
        "INSERT INTO {} (t, domain, joules, seconds) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(t, domain) DO UPDATE SET joules = joules + ?3, seconds = seconds + ?4",
        table(step)
    )
}

/// One domain's share of one bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainPoint {
    /// Start of the bucket, Unix seconds.
    pub t: f64,
    pub domain: String,
    pub joules: f64,
    /// Energy over the time the domain was metered in the bucket; `None` if never.
    pub mean_watts: Option<f64>,
}

impl Store {
    /// Whether this ledger keeps history per domain: one written before v6 and opened read-only
    /// (so not migrated) does not, and has none to give.
    fn keeps_domains(&self) -> Result<bool, StoreError> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        Ok(version >= 6)
    }

    /// Per-domain history from `from` to `to`, oldest first; only `domains` when some are given.
    pub fn domain_history(
        &self,
        from: f64,
        to: f64,
        step: Step,
        domains: &[String],
    ) -> Result<Vec<DomainPoint>, StoreError> {
        if !self.keeps_domains()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT t, domain, joules, seconds FROM {} WHERE t >= ?1 AND t < ?2 ORDER BY t, domain",
                table(step)
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![from.floor() as i64, to.ceil() as i64], |r| {
                let seconds: f64 = r.get(3)?;
                let joules: f64 = r.get(2)?;
                Ok(DomainPoint {
                    t: r.get::<_, i64>(0)? as f64,
                    domain: r.get(1)?,
                    joules,
                    mean_watts: (seconds > 0.0).then(|| joules / seconds),
                })
            })
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        for row in rows {
            let p = row.map_err(|e| self.sql(e))?;
            if domains.is_empty() || domains.contains(&p.domain) {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The domains with stored history, in name order.
    pub fn history_domains(&self) -> Result<Vec<String>, StoreError> {
        if !self.keeps_domains()? {
            return Ok(Vec::new());
        }
        let path = self.path.clone();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT domain FROM domain_hours ORDER BY domain")
            .map_err(|e| sql_at(&path, e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| sql_at(&path, e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| sql_at(&path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Row;

    #[test]
    fn a_ledger_from_before_v6_opened_read_only_has_no_domain_history_and_no_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("wattbar.db");
        {
            let (mut store, _) =
                Store::open(&path, 1_700_000_000.0).unwrap_or_else(|e| panic!("{e}"));
            let id = store
                .start_session(1_700_000_000.0, "EUR")
                .unwrap_or_else(|e| panic!("{e}"));
            let row = Row {
                t: 1_700_000_030.0,
                watts: Some(100.0),
                joules: 100.0,
                cost: 0.0,
                by_domain: vec![("cpu".into(), 40.0)],
                seconds: 1.0,
                start: None,
                currency: "EUR".into(),
                scope: Some(wattbar_core::Scope::Components),
                quality: None,
                method: None,
                answered: None,
                slots: Vec::new(),
            };
            store
                .write_batch(id, &[row], 100.0, 0.0)
                .unwrap_or_else(|e| panic!("{e}"));
            let read = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(read.history_domains().ok(), Some(vec!["cpu".to_string()]));
            // As version 5 wrote it: no per-domain tables.
            store
                .conn
                .execute_batch(
                    "DROP TABLE domain_minutes; DROP TABLE domain_hours; PRAGMA user_version = 5;",
                )
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let read = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.history_domains().ok(), Some(Vec::new()));
        let points = read.domain_history(0.0, 2e9, Step::Minute, &[]);
        assert_eq!(points.ok(), Some(Vec::new()));
        // The headline's history is still there.
        assert_eq!(
            read.history(0.0, 2e9, Step::Minute).map(|h| h.len()).ok(),
            Some(1)
        );
    }
}
