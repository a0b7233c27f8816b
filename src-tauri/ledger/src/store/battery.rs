//! Battery health by the day (v25): `battery_days(battery, day, design_joules, full_joules,
//! ratio, cycles)`, one row per battery and local day, the day's last figures. Kept for good:
//! a row is about 60 bytes, so a year of one battery is about 22 KB (the test holds it under
//! 64 KiB of pages).
//!
//! Unknown stays unknown: a figure the gauge does not report is NULL, never 0.

use super::{Store, StoreError};
use rusqlite::{params, Connection};
use serde::Serialize;
use wattbar_core::battery::Health;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE battery_days (battery TEXT NOT NULL, day TEXT NOT NULL, design_joules REAL,
                           full_joules REAL, ratio REAL, cycles INTEGER,
                           PRIMARY KEY (battery, day)) WITHOUT ROWID;
"#;

/// The first schema that keeps battery health.
const SINCE: i64 = 25;

/// One battery's figures on one local day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryDay {
    pub battery: String,
    /// Local calendar day, `YYYY-MM-DD`.
    pub day: String,
    pub design_joules: Option<f64>,
    pub full_joules: Option<f64>,
    /// Full ÷ design; `None` where either is not reported.
    pub ratio: Option<f64>,
    pub cycles: Option<u32>,
}

impl BatteryDay {
    pub fn of(day: &str, h: &Health) -> Self {
        BatteryDay {
            battery: h.battery.clone(),
            day: day.to_string(),
            design_joules: h.design.map(|j| j.0),
            full_joules: h.full.map(|j| j.0),
            ratio: h.ratio,
            cycles: h.cycles.count(),
        }
    }
}

/// Keeps `d` as its battery's figures of its day; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, d: &BatteryDay) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO battery_days (battery, day, design_joules, full_joules, ratio,
           cycles) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        d.battery,
        d.day,
        d.design_joules,
        d.full_joules,
        d.ratio,
        d.cycles
    ])?;
    Ok(())
}

/// Days read back at most: 20 years of one battery, or 10 of two.
pub const MAX_DAYS_READ: usize = 7300;

impl Store {
    /// Every battery's days from `since_day` (`YYYY-MM-DD`) on, oldest first, at most
    /// [`MAX_DAYS_READ`] (the newest); none in a ledger from before health was kept.
    pub fn battery_days(&self, since_day: &str) -> Result<Vec<BatteryDay>, StoreError> {
        if self.version < SINCE {
            return Ok(Vec::new());
        }
        let read = || -> rusqlite::Result<Vec<BatteryDay>> {
            let mut stmt = self.conn.prepare_cached(
                "SELECT battery, day, design_joules, full_joules, ratio, cycles FROM battery_days
                 WHERE day >= ?1 ORDER BY day DESC, battery DESC LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![since_day, MAX_DAYS_READ as i64], |r| {
                Ok(BatteryDay {
                    battery: r.get(0)?,
                    day: r.get(1)?,
                    design_joules: r.get(2)?,
                    full_joules: r.get(3)?,
                    ratio: r.get(4)?,
                    cycles: r
                        .get::<_, Option<i64>>(5)?
                        .and_then(|c| u32::try_from(c).ok()),
                })
            })?;
            let mut days = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            days.reverse();
            Ok(days)
        };
        read().map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests;
