//! Prices and intensities by the slot (v19): the feeds' slots as fetched, and what was drawn and
//! paid in each price slot.
//!
//! - `feed_slots(feed, start, end, value, currency, fetched)`: a feed's slots (spot prices per
//!   kWh before charges and tax, or gCO₂/kWh), keyed by the feed ([`FeedPref::key`]), so a
//!   restart or an offline day prices from them. A fetch replaces the slots it overlaps; slots
//!   that ended more than [`FEED_SLOTS_KEPT_SECONDS`] ago are dropped.
//! - `slot_costs(start, end, currency, fed, price, price_key, joules, cost)`: the headline's
//!   energy and cost per price slot and price, added to in the batch that holds the samples,
//!   never pruned. `fed` is 0 where the feed had no price and the fallback priced the UTC hour's
//!   energy (`price` NULL). A slot whose price changed (a feed's revision, new charges) has a
//!   row for each price (v22, keyed by `price_key`: the price, 0 where there is none), so that
//!   each row's cost is its joules at its price.
//!
//! [`FeedPref::key`]: wattbar_core::prefs::FeedPref::key

use super::{sql_at, Store, StoreError};
use rusqlite::{params, Connection};
use serde::Serialize;
use std::collections::BTreeMap;
use wattbar_core::slots::{Quantity, Series, Slot};

pub(super) const MIGRATION: &str = r#"
CREATE TABLE feed_slots (feed TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL,
                         value REAL NOT NULL, currency TEXT, fetched REAL NOT NULL,
                         PRIMARY KEY (feed, start));
CREATE TABLE slot_costs (start REAL NOT NULL, end REAL NOT NULL, currency TEXT NOT NULL,
                         fed INTEGER NOT NULL, price REAL, joules REAL NOT NULL,
                         cost REAL NOT NULL, PRIMARY KEY (start, currency, fed));
"#;

/// v22: `slot_costs` keyed by its price as well.
pub(super) const PRICE_KEY: &str = r#"
CREATE TABLE slot_costs_v22 (start REAL NOT NULL, end REAL NOT NULL, currency TEXT NOT NULL,
                             fed INTEGER NOT NULL, price REAL, price_key REAL NOT NULL,
                             joules REAL NOT NULL, cost REAL NOT NULL,
                             PRIMARY KEY (start, currency, fed, price_key));
INSERT INTO slot_costs_v22
    SELECT start, end, currency, fed, price, IFNULL(price, 0.0), joules, cost FROM slot_costs;
DROP TABLE slot_costs;
ALTER TABLE slot_costs_v22 RENAME TO slot_costs;
"#;

/// A feed's slots are kept this long after they end: a week of looking back.
pub const FEED_SLOTS_KEPT_SECONDS: f64 = 7.0 * 86_400.0;

/// A feed's answer, to be kept.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedSlots {
    pub feed: String,
    pub series: Series,
    pub fetched_unix: f64,
}

/// What one price slot cost, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotCost {
    pub start: f64,
    pub end: f64,
    pub currency: String,
    /// The slot's retail price; `None` where the feed had none and the fallback priced it.
    pub price_per_kwh: Option<f64>,
    pub joules: f64,
    pub cost: f64,
}

/// A batch's energy and cost per (slot start in ms, currency, the price's bits where fed):
/// summed first, so each row is written once per batch.
pub(super) type SlotSums = BTreeMap<(i64, String, Option<u64>), (f64, Option<f64>, f64, f64)>;

/// Adds each row's slot parts to `sums`.
pub(super) fn sum(rows: &[super::Row]) -> SlotSums {
    let mut sums = SlotSums::new();
    for row in rows {
        for p in &row.slots {
            let key = (
                (p.start * 1000.0).round() as i64,
                row.currency.clone(),
                p.price_per_kwh.map(f64::to_bits),
            );
            let e = sums
                .entry(key)
                .or_insert((p.end, p.price_per_kwh, 0.0, 0.0));
            e.2 += p.joules;
            e.3 += p.cost;
        }
    }
    sums
}

/// Adds a batch's sums; `conn` is the batch's transaction.
pub(super) fn put_costs(conn: &Connection, sums: &SlotSums) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO slot_costs (start, end, currency, fed, price, price_key, joules, cost)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(start, currency, fed, price_key)
         DO UPDATE SET joules = joules + ?7, cost = cost + ?8",
    )?;
    for ((start_ms, currency, _), (end, price, joules, cost)) in sums {
        stmt.execute(params![
            *start_ms as f64 / 1000.0,
            end,
            currency,
            price.is_some(),
            price,
            price.unwrap_or(0.0),
            joules,
            cost
        ])?;
    }
    Ok(())
}

/// Keeps feeds' answers: each replaces the slots of its feed it overlaps; `conn` is the batch's
/// transaction.
pub(super) fn put_slots(conn: &Connection, feeds: &[FeedSlots]) -> rusqlite::Result<()> {
    for f in feeds {
        let Some((from, to)) = f.series.span() else {
            continue;
        };
        conn.prepare_cached("DELETE FROM feed_slots WHERE feed = ?1 AND start < ?3 AND end > ?2")?
            .execute(params![f.feed, from, to])?;
        let mut stmt = conn.prepare_cached(
            "INSERT OR REPLACE INTO feed_slots (feed, start, end, value, currency, fetched)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for s in &f.series.slots {
            stmt.execute(params![
                f.feed,
                s.start,
                s.end,
                s.value,
                f.series.currency,
                f.fetched_unix
            ])?;
        }
        conn.prepare_cached("DELETE FROM feed_slots WHERE feed = ?1 AND end < ?2")?
            .execute(params![f.feed, f.fetched_unix - FEED_SLOTS_KEPT_SECONDS])?;
    }
    Ok(())
}

impl Store {
    /// Feed `feed`'s kept slots that end after `since`, as a series of `quantity`; `None`
    /// where none are kept. Slots a bad row would make overlap are not read.
    pub fn feed_slots(
        &self,
        feed: &str,
        quantity: Quantity,
        since: f64,
    ) -> Result<Option<Series>, StoreError> {
        let path = self.path.clone();
        let read = || -> rusqlite::Result<Vec<(Slot, Option<String>)>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT start, end, value, currency FROM feed_slots
                 WHERE feed = ?1 AND end > ?2 ORDER BY start",
            )?;
            let rows = stmt.query_map(params![feed, since], |r| {
                Ok((
                    Slot {
                        start: r.get(0)?,
                        end: r.get(1)?,
                        value: r.get(2)?,
                    },
                    r.get(3)?,
                ))
            })?;
            rows.collect()
        };
        let rows = read().map_err(|e| sql_at(&path, e))?;
        let currency = rows.iter().find_map(|(_, c)| c.clone());
        let mut slots: Vec<Slot> = Vec::with_capacity(rows.len());
        for (s, _) in rows {
            if slots.last().is_none_or(|l| s.start >= l.end) {
                slots.push(s);
            }
        }
        if slots.is_empty() {
            return Ok(None);
        }
        Ok(Series::new(quantity, currency, slots).ok())
    }

    /// What was drawn and paid per price slot from `from` to `to` (Unix seconds), oldest first.
    pub fn slot_costs(&self, from: f64, to: f64) -> Result<Vec<SlotCost>, StoreError> {
        let path = self.path.clone();
        let read = || -> rusqlite::Result<Vec<SlotCost>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT start, end, currency, price, joules, cost FROM slot_costs
                 WHERE end > ?1 AND start < ?2 ORDER BY start, fed DESC, price",
            )?;
            let rows = stmt.query_map(params![from, to], |r| {
                Ok(SlotCost {
                    start: r.get(0)?,
                    end: r.get(1)?,
                    currency: r.get(2)?,
                    price_per_kwh: r.get(3)?,
                    joules: r.get(4)?,
                    cost: r.get(5)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(|e| sql_at(&path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Row;
    use wattbar_core::SlotPart;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (store, _) =
            Store::open(&dir.path().join("ledger.db"), 0.0).unwrap_or_else(|e| panic!("{e}"));
        (dir, store)
    }

    fn hourly(from: f64, prices: &[f64]) -> Series {
        let slots = prices
            .iter()
            .enumerate()
            .map(|(i, p)| Slot {
                start: from + i as f64 * 3600.0,
                end: from + (i + 1) as f64 * 3600.0,
                value: *p,
            })
            .collect();
        Series::new(Quantity::PricePerKwh, Some("EUR".into()), slots)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_newer_answer_replaces_the_slots_it_covers_and_keeps_the_rest() {
        let (_dir, mut store) = store();
        let write = |store: &mut Store, series: Series| {
            let tx = store.conn.transaction().unwrap_or_else(|e| panic!("{e}"));
            put_slots(
                &tx,
                &[FeedSlots {
                    feed: "energy-charts:DE-LU".into(),
                    series,
                    fetched_unix: 0.0,
                }],
            )
            .unwrap_or_else(|e| panic!("{e}"));
            tx.commit().unwrap_or_else(|e| panic!("{e}"));
        };
        write(&mut store, hourly(0.0, &[0.10, 0.20, 0.30]));
        // The second fetch gives 15-minute slots from 1 h: the hour at 0.10 stays.
        let quarters = Series::new(
            Quantity::PricePerKwh,
            Some("EUR".into()),
            (0..8)
                .map(|i| Slot {
                    start: 3600.0 + f64::from(i) * 900.0,
                    end: 3600.0 + f64::from(i + 1) * 900.0,
                    value: -0.01,
                })
                .collect(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        write(&mut store, quarters);
        let kept = store
            .feed_slots("energy-charts:DE-LU", Quantity::PricePerKwh, 0.0)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("nothing kept"));
        assert_eq!(kept.slots.len(), 9);
        assert_eq!(kept.at(100.0), Some(0.10));
        assert_eq!(kept.at(3700.0), Some(-0.01));
        assert_eq!(kept.span(), Some((0.0, 3.0 * 3600.0)));
        assert_eq!(kept.currency.as_deref(), Some("EUR"));
        let other = store.feed_slots("awattar:de", Quantity::PricePerKwh, 0.0);
        assert_eq!(other.ok(), Some(None));
    }

    #[test]
    fn slot_costs_add_up_across_batches() {
        let (_dir, mut store) = store();
        let id = store
            .start_session(0.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let part = |joules: f64, price: Option<f64>| SlotPart {
            start: 0.0,
            end: 900.0,
            price_per_kwh: price,
            joules,
            cost: joules / 3.6e6 * price.unwrap_or(0.30),
        };
        let row = |t: f64, parts: Vec<SlotPart>| Row {
            t,
            watts: Some(100.0),
            joules: parts.iter().map(|p| p.joules).sum(),
            cost: parts.iter().map(|p| p.cost).sum(),
            by_domain: Vec::new(),
            seconds: 1.0,
            start: Some(t - 1.0),
            currency: "EUR".into(),
            scope: Some(wattbar_core::Scope::Wall),
            quality: None,
            method: None,
            answered: None,
            slots: parts,
        };
        for batch in 0..2 {
            let rows: Vec<Row> = (0..3)
                .map(|i| row(f64::from(batch * 3 + i + 1), vec![part(100.0, Some(0.2))]))
                .collect();
            store
                .write_batch(id, &rows, 0.0, 0.0)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        store
            .write_batch(id, &[row(7.0, vec![part(50.0, None)])], 0.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let costs = store
            .slot_costs(0.0, 900.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(costs.len(), 2, "{costs:?}");
        // Six samples of 100 J at 0.20: 600 J; the fallback's 50 J apart, flagged.
        assert_eq!(
            (costs[0].joules, costs[0].price_per_kwh),
            (600.0, Some(0.2))
        );
        assert!((costs[0].cost - 600.0 / 3.6e6 * 0.2).abs() < 1e-15);
        assert_eq!((costs[1].joules, costs[1].price_per_kwh), (50.0, None));

        // The feed revised the slot to 0.25: 2 samples of 100 J at it are a row of their own,
        // 200 J × 0.25 / 3.6e6, never added to the 0.20 row's joules under its old price.
        store
            .write_batch(
                id,
                &[
                    row(8.0, vec![part(100.0, Some(0.25))]),
                    row(9.0, vec![part(100.0, Some(0.25))]),
                ],
                0.0,
                0.0,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let costs = store
            .slot_costs(0.0, 900.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let by_price: Vec<(Option<f64>, f64)> =
            costs.iter().map(|c| (c.price_per_kwh, c.joules)).collect();
        assert_eq!(
            by_price,
            vec![(Some(0.2), 600.0), (Some(0.25), 200.0), (None, 50.0)]
        );
        for c in costs.iter().filter(|c| c.price_per_kwh.is_some()) {
            let priced = c.joules / 3.6e6 * c.price_per_kwh.unwrap_or_default();
            assert!((c.cost - priced).abs() < 1e-15, "{c:?}");
        }
    }
}
