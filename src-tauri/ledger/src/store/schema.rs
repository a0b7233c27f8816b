//! The ledger's schema: each version's migration, applied forward in order in one transaction
//! each, and the version check that refuses a ledger a newer Wattbar wrote.

use super::{
    battery, calibration, coverage, domains, feeds, inference, intervals, keys, money, profiles,
    programs, resident, scopes, server_windows, sql_at, wear, Store, StoreError,
};
use rusqlite::Connection;
use std::path::Path;

/// The schema this build writes and reads (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 26;

pub(super) const MIGRATIONS: [&str; 26] = [
    r#"
CREATE TABLE lifetime (domain TEXT PRIMARY KEY, joules REAL NOT NULL);
CREATE TABLE sessions (id INTEGER PRIMARY KEY, start REAL NOT NULL, end REAL,
                       joules REAL NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0,
                       currency TEXT NOT NULL);
CREATE TABLE samples (t REAL NOT NULL, watts REAL, joules REAL NOT NULL);
CREATE INDEX samples_t ON samples(t);
CREATE TABLE minutes (t INTEGER PRIMARY KEY, n INTEGER NOT NULL, sum_watts REAL NOT NULL,
                      max_watts REAL, joules REAL NOT NULL);
CREATE TABLE hours (t INTEGER PRIMARY KEY, n INTEGER NOT NULL, sum_watts REAL NOT NULL,
                    max_watts REAL, joules REAL NOT NULL);
CREATE TABLE daily (day TEXT PRIMARY KEY, joules REAL NOT NULL, cost REAL NOT NULL);
CREATE TABLE monthly (month TEXT PRIMARY KEY, joules REAL NOT NULL, cost REAL NOT NULL);
"#,
    r#"
CREATE TABLE alerts (key TEXT PRIMARY KEY, at REAL NOT NULL);
"#,
    r#"
CREATE TABLE low_power (id INTEGER PRIMARY KEY, t REAL NOT NULL, enabled INTEGER NOT NULL,
                        reason TEXT NOT NULL, message TEXT NOT NULL);
"#,
    // Calendar rows get their currency. Rows written before did not say theirs: they are taken
    // to be in the newest session's currency (the one in force when they were last written).
    r#"
CREATE TABLE daily_v4 (day TEXT NOT NULL, currency TEXT NOT NULL, joules REAL NOT NULL,
                       cost REAL NOT NULL, PRIMARY KEY (day, currency));
INSERT INTO daily_v4 SELECT day,
    COALESCE((SELECT currency FROM sessions ORDER BY id DESC LIMIT 1), 'EUR'), joules, cost FROM daily;
DROP TABLE daily;
ALTER TABLE daily_v4 RENAME TO daily;
CREATE TABLE monthly_v4 (month TEXT NOT NULL, currency TEXT NOT NULL, joules REAL NOT NULL,
                         cost REAL NOT NULL, PRIMARY KEY (month, currency));
INSERT INTO monthly_v4 SELECT month,
    COALESCE((SELECT currency FROM sessions ORDER BY id DESC LIMIT 1), 'EUR'), joules, cost FROM monthly;
DROP TABLE monthly;
ALTER TABLE monthly_v4 RENAME TO monthly;
"#,
    inference::MIGRATION,
    domains::MIGRATION,
    inference::TYPED,
    inference::ROUTED,
    resident::MIGRATION,
    programs::MIGRATION,
    inference::SHARES,
    scopes::MIGRATION,
    calibration::MIGRATION,
    // Each sample keeps the start of the interval it ends, so that a window read from the store
    // has the joules and coverage it had in memory. Rows from before stay NULL.
    "ALTER TABLE samples ADD COLUMN start REAL;",
    intervals::MIGRATION,
    server_windows::MIGRATION,
    coverage::MIGRATION,
    profiles::MIGRATION,
    feeds::MIGRATION,
    money::MIGRATION,
    server_windows::COVERED,
    feeds::PRICE_KEY,
    server_windows::GPU_PROCESSES,
    keys::MIGRATION,
    battery::MIGRATION,
    wear::MIGRATION,
];

impl Store {
    /// The schema version of the open file.
    fn version(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| sql_at(path, e))
    }

    /// Refuses a ledger from a newer schema: its tables may mean what this build cannot know,
    /// and writing to it could damage what that newer Wattbar keeps.
    pub(super) fn check_version(&self) -> Result<i64, StoreError> {
        let found = Store::version(&self.conn, &self.path)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::Newer {
                path: self.path.clone(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(found)
    }

    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
        let version = self.check_version()?;
        let path = self.path.clone();
        self.apply_migrations(version).map_err(|e| sql_at(&path, e))
    }

    fn apply_migrations(&mut self, version: i64) -> rusqlite::Result<()> {
        for (i, step) in MIGRATIONS.iter().enumerate() {
            let target = i as i64 + 1;
            if version < target {
                let tx = self.conn.transaction()?;
                tx.execute_batch(step)?;
                if *step == inference::TYPED {
                    inference::fill_models(&tx)?;
                }
                tx.pragma_update(None, "user_version", target)?;
                tx.commit()?;
            }
        }
        debug_assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
        Ok(())
    }
}
