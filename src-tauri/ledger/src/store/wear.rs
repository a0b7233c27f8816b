//! The battery's energy and what drawing it wore (v26): `battery_wear(day, currency, joules,
//! unpriced_joules, wear)` by the local day, and `lifetime_wear(currency, joules,
//! unpriced_joules, wear)`, a counter that never goes back.
//!
//! Rules:
//! - `joules` is the headline's energy drawn while the machine ran on its battery; `wear` is
//!   what that energy wore at the rate in force (`battery_price ÷ (rated cycles × design
//!   kWh)`), in the preferences' currency; `unpriced_joules` is the part drawn with no rate
//!   (no `battery_price`, or a battery that reports no design energy): worn, not priced.
//! - A batch adds only amounts ≥ 0, so the lifetime figures never go back (as `money`'s).
//! - The grid's cost of those intervals is 0: their energy comes from the battery, and is priced
//!   from the grid when it charges.

use super::{Store, StoreError};
use rusqlite::{params, Connection};
use serde::Serialize;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE battery_wear (day TEXT NOT NULL, currency TEXT NOT NULL, joules REAL NOT NULL,
                           unpriced_joules REAL NOT NULL, wear REAL NOT NULL,
                           PRIMARY KEY (day, currency)) WITHOUT ROWID;
CREATE TABLE lifetime_wear (currency TEXT PRIMARY KEY, joules REAL NOT NULL,
                            unpriced_joules REAL NOT NULL, wear REAL NOT NULL);
"#;

/// The first schema that keeps wear.
const SINCE: i64 = 26;

/// Energy drawn from the battery and its wear, over a day or a lifetime, in one currency.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Worn {
    pub currency: String,
    pub joules: f64,
    /// Drawn with no rate to price it.
    pub unpriced_joules: f64,
    pub wear: f64,
}

impl Worn {
    /// "wear 0.09 EUR", or "wear not priced" where some of the energy had no rate to price it
    /// (never a wear that leaves it out); `money` writes the amount as its reader does.
    pub fn wear_text(&self, money: impl Fn(f64, &str) -> String) -> String {
        if self.unpriced_joules > 0.0 {
            "wear not priced".to_string()
        } else {
            format!("wear {}", money(self.wear, &self.currency))
        }
    }

    /// Adds another's figures, each only where it is a number ≥ 0.
    pub fn add(&mut self, other: &Worn) {
        let grow = |to: &mut f64, by: f64| {
            if by.is_finite() && by > 0.0 {
                *to += by;
            }
        };
        grow(&mut self.joules, other.joules);
        grow(&mut self.unpriced_joules, other.unpriced_joules);
        grow(&mut self.wear, other.wear);
    }
}

/// Adds `w` to its day and to the lifetime counter; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, day: &str, w: &Worn) -> rusqlite::Result<()> {
    let mut clean = Worn {
        currency: w.currency.clone(),
        ..Worn::default()
    };
    clean.add(w);
    conn.prepare_cached(
        "INSERT INTO battery_wear (day, currency, joules, unpriced_joules, wear)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (day, currency) DO UPDATE SET joules = joules + ?3,
           unpriced_joules = unpriced_joules + ?4, wear = wear + ?5",
    )?
    .execute(params![
        day,
        clean.currency,
        clean.joules,
        clean.unpriced_joules,
        clean.wear
    ])?;
    conn.prepare_cached(
        "INSERT INTO lifetime_wear (currency, joules, unpriced_joules, wear)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (currency) DO UPDATE SET joules = joules + ?2,
           unpriced_joules = unpriced_joules + ?3, wear = wear + ?4",
    )?
    .execute(params![
        clean.currency,
        clean.joules,
        clean.unpriced_joules,
        clean.wear
    ])?;
    Ok(())
}

impl Store {
    /// A local day's figures (`YYYY-MM-DD`), one per currency.
    pub fn wear_on(&self, day: &str) -> Result<Vec<Worn>, StoreError> {
        self.worn(
            "SELECT currency, joules, unpriced_joules, wear FROM battery_wear WHERE day = ?1
             ORDER BY currency",
            Some(day),
        )
    }

    /// The figures of the local days from `first_day` through `last_day` (`YYYY-MM-DD`),
    /// added, one per currency.
    pub fn wear_between(&self, first_day: &str, last_day: &str) -> Result<Vec<Worn>, StoreError> {
        if self.version < SINCE {
            return Ok(Vec::new());
        }
        let read = || -> rusqlite::Result<Vec<Worn>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT currency, SUM(joules), SUM(unpriced_joules), SUM(wear) FROM battery_wear
                 WHERE day >= ?1 AND day <= ?2 GROUP BY currency ORDER BY currency",
            )?;
            let rows = stmt.query_map(params![first_day, last_day], |r| {
                Ok(Worn {
                    currency: r.get(0)?,
                    joules: r.get(1)?,
                    unpriced_joules: r.get(2)?,
                    wear: r.get(3)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(|e| self.sql(e))
    }

    /// The lifetime figures, one per currency: counters that never go back.
    pub fn lifetime_wear(&self) -> Result<Vec<Worn>, StoreError> {
        self.worn(
            "SELECT currency, joules, unpriced_joules, wear FROM lifetime_wear ORDER BY currency",
            None,
        )
    }

    fn worn(&self, sql: &str, day: Option<&str>) -> Result<Vec<Worn>, StoreError> {
        if self.version < SINCE {
            return Ok(Vec::new());
        }
        let read = || -> rusqlite::Result<Vec<Worn>> {
            let mut stmt = self.conn.prepare_cached(sql)?;
            let map = |r: &rusqlite::Row| {
                Ok(Worn {
                    currency: r.get(0)?,
                    joules: r.get(1)?,
                    unpriced_joules: r.get(2)?,
                    wear: r.get(3)?,
                })
            };
            let rows = match day {
                Some(d) => stmt.query_map(params![d], map)?,
                None => stmt.query_map([], map)?,
            };
            rows.collect()
        };
        read().map_err(|e| self.sql(e))
    }
}
