//! Lifetime money as two counters that only ever grow (v20): `lifetime_costs(scope, currency,
//! paid, credit)`, what the headline's energy was paid (the parts priced above 0) and credited
//! (the parts priced below 0, as a positive amount), per scope and currency.
//!
//! Rules:
//! - A batch adds to each only amounts ≥ 0, each its own row, never a `SUM` over rows: adding a
//!   number ≥ 0 to a float never lowers it, so neither counter can go back, to the last bit. The
//!   net (paid − credit) is the calendar tables' and may fall in a negative hour.
//! - A row priced by the slot splits by its slots' signs; a row priced otherwise (tariffs, which
//!   are never negative) by its own.
//! - Rows from before v20 start the counters from each month's net: a month that netted a credit
//!   gives credit, one that netted a cost gives paid (the split within a month was not kept).

use super::{scopes, Row, Store, StoreError};
use rusqlite::params;
use serde::Serialize;
use std::collections::BTreeMap;
use wattbar_core::Scope;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE lifetime_costs (scope TEXT NOT NULL, currency TEXT NOT NULL, paid REAL NOT NULL,
                             credit REAL NOT NULL, PRIMARY KEY (scope, currency));
INSERT INTO lifetime_costs
    SELECT scope, currency, SUM(MAX(cost, 0.0)), SUM(MAX(-cost, 0.0)) FROM monthly
    GROUP BY scope, currency;
"#;

/// What was paid and credited over the store's life in one scope and currency; both ≥ 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LifetimeCost {
    /// `None`: recorded before scopes were kept.
    pub scope: Option<Scope>,
    pub currency: String,
    pub paid: f64,
    pub credit: f64,
}

/// `(paid, credit)` of one row, each ≥ 0; a part that is not a finite number adds nothing.
fn split(row: &Row) -> (f64, f64) {
    let finite = |c: &f64| c.is_finite();
    let costs: Vec<f64> = if row.slots.is_empty() {
        vec![row.cost]
    } else {
        row.slots.iter().map(|p| p.cost).collect()
    };
    let paid = costs.iter().filter(|c| finite(c)).map(|c| c.max(0.0)).sum();
    let credit = costs
        .iter()
        .filter(|c| finite(c))
        .map(|c| (-c).max(0.0))
        .sum();
    (paid, credit)
}

/// Adds `rows`' money to the lifetime counters; `tx` is the batch's transaction.
pub(super) fn put(tx: &rusqlite::Connection, rows: &[Row]) -> rusqlite::Result<()> {
    let mut sums: BTreeMap<(&'static str, &str), (f64, f64)> = BTreeMap::new();
    for row in rows {
        let (paid, credit) = split(row);
        let e = sums
            .entry((scopes::to_text(row.scope), row.currency.as_str()))
            .or_default();
        e.0 += paid;
        e.1 += credit;
    }
    let mut stmt = tx.prepare_cached(
        "INSERT INTO lifetime_costs (scope, currency, paid, credit) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(scope, currency) DO UPDATE SET paid = paid + ?3, credit = credit + ?4",
    )?;
    for ((scope, currency), (paid, credit)) in sums {
        if paid > 0.0 || credit > 0.0 {
            stmt.execute(params![scope, currency, paid, credit])?;
        }
    }
    Ok(())
}

impl Store {
    /// What was paid and credited over the store's life, per scope and currency.
    pub fn lifetime_costs(&self) -> Result<Vec<LifetimeCost>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT scope, currency, paid, credit FROM lifetime_costs
                 ORDER BY scope, currency",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(LifetimeCost {
                    scope: scopes::from_text(&r.get::<_, String>(0)?),
                    currency: r.get(1)?,
                    paid: r.get(2)?,
                    credit: r.get(3)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::SlotPart;

    fn row(t: f64, parts: &[(f64, f64)]) -> Row {
        Row {
            t,
            watts: Some(100.0),
            joules: 100.0,
            cost: parts.iter().map(|(_, c)| c).sum(),
            by_domain: Vec::new(),
            seconds: 1.0,
            start: Some(t - 1.0),
            currency: "EUR".into(),
            scope: Some(Scope::System),
            quality: None,
            method: None,
            answered: None,
            slots: parts
                .iter()
                .map(|(price, cost)| SlotPart {
                    start: 0.0,
                    end: 900.0,
                    price_per_kwh: Some(*price),
                    joules: 50.0,
                    cost: *cost,
                })
                .collect(),
        }
    }

    #[test]
    fn a_negative_hour_adds_to_credit_and_paid_never_goes_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut store, _) =
            Store::open(&dir.path().join("w.db"), 0.0).unwrap_or_else(|e| panic!("{e}"));
        let session = store
            .start_session(0.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        // 100 W for 36 s at +0.30 EUR/kWh: 3,600 J = 0.001 kWh → 0.0003 EUR paid. Then 36 s
        // at −0.05 EUR/kWh: 0.00005 EUR credited. Then one row across a slot edge: +0.0001
        // and −0.00002.
        let batches = [
            vec![row(36.0, &[(0.30, 0.0003)])],
            vec![row(72.0, &[(-0.05, -0.00005)])],
            vec![row(73.0, &[(0.30, 0.0001), (-0.05, -0.00002)])],
        ];
        let mut seen = Vec::new();
        for batch in &batches {
            store
                .write_batch(session, batch, 0.0, 0.0)
                .unwrap_or_else(|e| panic!("{e}"));
            let costs = store.lifetime_costs().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(costs.len(), 1);
            seen.push((costs[0].paid, costs[0].credit));
        }
        assert!((seen[0].0 - 0.0003).abs() < 1e-15 && seen[0].1 == 0.0);
        assert_eq!(seen[1].0, seen[0].0, "a credit leaves paid as it was");
        assert!((seen[1].1 - 0.00005).abs() < 1e-15);
        assert!((seen[2].0 - 0.0004).abs() < 1e-15);
        assert!((seen[2].1 - 0.00007).abs() < 1e-15);
        assert!(seen
            .windows(2)
            .all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1));
    }
}
