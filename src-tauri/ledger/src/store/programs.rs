//! Energy per program per hour (v10): `program_hours(t, program, joules)`, `t` the start of the
//! UTC hour, kept [`PROGRAMS_KEEP_SECONDS`]. The parts that close the sum are kept beside the
//! programs under the names [`IDLE`] and [`UNATTRIBUTED`]. Rows are added to in the engine's
//! batch transaction.

use super::{local_day_month, Store, StoreError};
use rusqlite::{params, Connection};
use std::collections::BTreeMap;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE program_hours (t INTEGER NOT NULL, program TEXT NOT NULL, joules REAL NOT NULL,
                            PRIMARY KEY (t, program));
"#;

pub const PROGRAMS_KEEP_SECONDS: f64 = 30.0 * 86_400.0;
/// The stored names of the parts no program owns (parentheses: no command name has them
/// around it, so they cannot collide with a program's).
pub const IDLE: &str = "(idle)";
pub const UNATTRIBUTED: &str = "(unattributed)";

/// The UTC hour `t` falls in, as stored.
pub fn hour_of(t: f64) -> i64 {
    (t / 3600.0).floor() as i64 * 3600
}

/// Adds each `(hour, program) → joules`; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, rows: &BTreeMap<(i64, String), f64>) -> rusqlite::Result<()> {
    for ((hour, program), joules) in rows {
        conn.prepare_cached(
            "INSERT INTO program_hours (t, program, joules) VALUES (?1, ?2, ?3)
             ON CONFLICT(t, program) DO UPDATE SET joules = joules + ?3",
        )?
        .execute(params![hour, program, joules])?;
    }
    Ok(())
}

pub(super) fn prune(conn: &Connection, now_unix: f64) -> rusqlite::Result<usize> {
    conn.prepare_cached("DELETE FROM program_hours WHERE t < ?1")?
        .execute(params![now_unix - PROGRAMS_KEEP_SECONDS])
}

impl Store {
    /// Joules per program in the hours from `from_hour` (the start of a UTC hour) on, the idle
    /// and unattributed parts included under their stored names.
    pub fn program_since(&self, from_hour: i64) -> Result<BTreeMap<String, f64>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT program, SUM(joules) FROM program_hours WHERE t >= ?1 GROUP BY program",
            )
            .and_then(|mut s| {
                s.query_map(params![from_hour], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(|e| self.sql(e))
    }

    /// Joules per program on the local day of `now_unix` (an hour counts for the day it starts
    /// in), the idle and unattributed parts included under their stored names.
    pub fn program_day(&self, now_unix: f64) -> Result<BTreeMap<String, f64>, StoreError> {
        let (today, _) = local_day_month(now_unix);
        let rows: Vec<(i64, String, f64)> = self
            .conn
            .prepare_cached("SELECT t, program, joules FROM program_hours WHERE t >= ?1")
            .and_then(|mut s| {
                s.query_map(params![hour_of(now_unix) - 2 * 86_400], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect()
            })
            .map_err(|e| self.sql(e))?;
        let mut out = BTreeMap::new();
        for (t, program, joules) in rows {
            if local_day_month(t as f64).0 == today {
                *out.entry(program).or_default() += joules;
            }
        }
        Ok(out)
    }
}
