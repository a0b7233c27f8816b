//! The stored samples read back as the measured intervals they end.
//!
//! Rule: a window read from the store has what it had in memory: each sample keeps the start of
//! its interval, its energy per domain, and how it was measured (quality, method, and a slow
//! source's answer period and the power it said), so that `/v1/energy` gives the same joules,
//! coverage, domains and bound from either. Rows written before a column was kept read it as
//! unknown: no start (taken from the row before), no domains, no quality (so no bound), no
//! scope.

use super::{Store, StoreError};
use rusqlite::params;
use wattbar_core::inference::{Answered, Interval};
use wattbar_core::meter::Method;
use wattbar_core::Quality;

/// Longest step between two stored samples that still makes an interval (the longest sampling
/// period, and then some).
pub const MAX_STORED_GAP_S: f64 = 60.0;

/// Schema 15: how each sample's interval was measured, and its energy per domain (JSON
/// `[["cpu", joules], …]`).
pub(super) const MIGRATION: &str = "
ALTER TABLE samples ADD COLUMN quality TEXT;
ALTER TABLE samples ADD COLUMN method TEXT;
ALTER TABLE samples ADD COLUMN answer_period REAL;
ALTER TABLE samples ADD COLUMN answered_watts REAL;
ALTER TABLE samples ADD COLUMN by_domain TEXT;
";

/// The JSON a sample keeps its energy per domain in; `None` for none.
pub(super) fn domains_text(by_domain: &[(String, f64)]) -> Option<String> {
    if by_domain.is_empty() {
        return None;
    }
    serde_json::to_string(by_domain).ok()
}

fn quality_of(text: &str) -> Option<Quality> {
    [
        Quality::Measured,
        Quality::Calibrated,
        Quality::Estimated,
        Quality::Heuristic,
    ]
    .into_iter()
    .find(|q| q.as_str() == text)
}

fn method_of(text: &str) -> Option<Method> {
    [Method::Counter, Method::Trapezoid]
        .into_iter()
        .find(|m| m.as_str() == text)
}

/// One stored sample, as read.
struct Stored {
    t: f64,
    watts: Option<f64>,
    joules: f64,
    start: Option<f64>,
    quality: Option<String>,
    method: Option<String>,
    answer_period: Option<f64>,
    answered_watts: Option<f64>,
    by_domain: Option<String>,
    scope: Option<String>,
}

impl Stored {
    fn interval(&self, start: f64, joules: Option<f64>) -> Interval {
        let by_domain: Vec<(String, f64)> = self
            .by_domain
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        Interval {
            start,
            end: self.t,
            unix_start: start,
            unix_end: self.t,
            joules,
            by_domain: by_domain
                .into_iter()
                .filter(|(_, j)| j.is_finite())
                .collect(),
            quality: self.quality.as_deref().and_then(quality_of),
            source: None,
            method: self.method.as_deref().and_then(method_of),
            answered: match (self.answer_period, self.answered_watts) {
                (Some(period_seconds), Some(watts)) => Some(Answered {
                    period_seconds,
                    watts,
                }),
                _ => None,
            },
            // The parts covered are not kept per sample: the scope alone, which is what the
            // window's rule compares.
            coverage: super::coverage::coverage_of(self.scope.clone(), None),
        }
    }
}

impl Store {
    /// The stored samples between `from` and `to` (Unix seconds) as the measured intervals they
    /// end, each as the engine measured it in memory (see the module docs). Samples are kept
    /// for a day. A row written before intervals were kept has no start: it is taken from the
    /// row before, and gaps longer than [`MAX_STORED_GAP_S`] are not intervals.
    pub fn intervals(&self, from: f64, to: f64) -> Result<Vec<Interval>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT t, watts, joules, start, quality, method, answer_period, answered_watts,
                        by_domain, scope
                 FROM samples WHERE t >= ?1 AND t <= ?2 ORDER BY t",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                params![from - MAX_STORED_GAP_S, to + MAX_STORED_GAP_S],
                |r| {
                    Ok(Stored {
                        t: r.get(0)?,
                        watts: r.get(1)?,
                        joules: r.get(2)?,
                        start: r.get(3)?,
                        quality: r.get(4)?,
                        method: r.get(5)?,
                        answer_period: r.get(6)?,
                        answered_watts: r.get(7)?,
                        by_domain: r.get(8)?,
                        scope: r.get(9)?,
                    })
                },
            )
            .map_err(|e| self.sql(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sql(e))?;
        let mut out = Vec::new();
        let mut prev: Option<(f64, Option<f64>)> = None;
        for row in rows {
            match row.start {
                Some(s) if row.t > s => out.push(row.interval(s, Some(row.joules))),
                Some(_) => {}
                None => {
                    if let Some((p, p_watts)) =
                        prev.filter(|(p, _)| row.t - p > 0.0 && row.t - p <= MAX_STORED_GAP_S)
                    {
                        let measured = p_watts.is_some() && row.watts.is_some();
                        out.push(row.interval(p, measured.then_some(row.joules)));
                    }
                }
            }
            prev = Some((row.t, row.watts));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ledger;
    use crate::store::{Row, DB_FILE};

    const T0: f64 = 1_700_000_400.0;

    /// A tenth of a second at the wall from a plug that answers once a second and last said
    /// 98 W, the counter having settled 0.2 J more (10 J in all); 4 J of it the CPU package's.
    fn tenth(t: f64) -> Row {
        Row {
            t,
            watts: Some(98.0),
            joules: 10.0,
            cost: 0.0,
            by_domain: vec![("cpu".into(), 4.0)],
            seconds: 0.1,
            start: Some(t - 0.1),
            currency: "EUR".into(),
            scope: Some(wattbar_core::Scope::Wall),
            quality: Some(Quality::Measured),
            method: Some(Method::Counter),
            answered: Some(Answered {
                period_seconds: 1.0,
                watts: 98.0,
            }),
            slots: Vec::new(),
        }
    }

    #[test]
    fn a_stored_interval_reads_back_as_it_was_measured() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let (mut ledger, _) = Ledger::open(&path, T0, "EUR").unwrap_or_else(|e| panic!("{e}"));
        ledger.record(tenth(T0 + 1.0));
        // A sample that measured nothing ends no interval.
        ledger.record(Row {
            start: None,
            quality: None,
            method: None,
            answered: None,
            by_domain: Vec::new(),
            ..tenth(T0 + 2.0)
        });
        ledger
            .flush(10.0, 0.0, T0 + 2.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let read = ledger
            .store()
            .intervals(T0, T0 + 3.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.len(), 1, "{read:?}");
        let i = &read[0];
        assert!((i.unix_start - (T0 + 0.9)).abs() < 1e-9, "{i:?}");
        assert_eq!(i.joules, Some(10.0));
        assert_eq!(i.by_domain, [("cpu".to_string(), 4.0)]);
        assert_eq!(
            (i.quality, i.method, i.answered),
            (
                Some(Quality::Measured),
                Some(Method::Counter),
                Some(Answered {
                    period_seconds: 1.0,
                    watts: 98.0
                })
            )
        );
    }

    #[test]
    fn a_corrupt_domain_column_reads_as_no_domains_not_an_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let (mut ledger, _) = Ledger::open(&path, T0, "EUR").unwrap_or_else(|e| panic!("{e}"));
        ledger.record(tenth(T0 + 1.0));
        ledger
            .flush(10.0, 0.0, T0 + 1.0)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(ledger);
        let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
        conn.execute_batch("UPDATE samples SET by_domain = '[[\"cpu\", \"x\"', quality = 'great'")
            .unwrap_or_else(|e| panic!("{e}"));
        drop(conn);
        let store = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        let read = store
            .intervals(T0, T0 + 2.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].joules, read[0].quality), (Some(10.0), None));
        assert!(read[0].by_domain.is_empty());
    }
}
