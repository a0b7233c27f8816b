//! The ledger: a SQLite file (WAL) that keeps Wattbar's energy across crashes and restarts.
//!
//! Tables (schema version in `PRAGMA user_version`, migrated forward in order):
//! - `lifetime(domain, joules)`: lifetime energy, only ever increasing: `system` is the headline
//!   (what the user sees), the other domains (cpu, gpu, …) are metered from the breakdown;
//! - `sessions(id, start, end, joules, cost, currency)`: `end` is NULL while the session runs;
//! - `samples(t, watts, joules)`: raw samples, kept 24 h;
//! - `minutes(t, n, sum_watts, max_watts, joules)`: per-minute rollups, kept 30 days;
//! - `hours(t, n, sum_watts, max_watts, joules)`: per-hour rollups, kept forever;
//! - `daily(day, currency, joules, cost)`, `monthly(month, currency, joules, cost)`: local
//!   calendar totals, one row per currency (v4): money in two currencies is never added;
//! - `alerts(key)` (v2): budget alerts already given, so each is given once per period;
//! - `low_power(t, enabled, reason, message)` (v3): every change of low-power mode; the last row
//!   is the state restored at start;
//! - `inference(id, model, route, status, start, end, …)`, `inference_models(model, …)` and
//!   `inference_baseline` (v5, typed columns and figures per model in v7): one record per
//!   measured request, kept 90 days by default, the figures per model over every record, and
//!   the last idle baseline ([`inference`]);
//! - `domain_minutes`, `domain_hours(t, domain, joules, seconds)` (v6): history per breakdown
//!   domain ([`domains`]).
//!
//! Writes come in batches, each one transaction: a kill -9 loses at most the batch in memory and
//! never leaves a half-written one. A file that is not a database, or fails its integrity
//! check, is moved aside as `<name>.corrupt-<unix seconds>` and a fresh one is created; the
//! caller is told so it can tell the user.

use chrono::{Local, TimeZone};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::path::{Path, PathBuf};
use thiserror::Error;

mod batch;
pub mod domains;
pub mod inference;

use batch::BatchSums;

pub const DB_FILE: &str = "wattbar.db";
const SCHEMA_VERSION: i64 = 7;
pub const RAW_KEEP_SECONDS: f64 = 24.0 * 3600.0;
pub const MINUTES_KEEP_SECONDS: f64 = 30.0 * 86_400.0;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One sample's contribution, as the engine hands it to the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Wall-clock time, Unix seconds.
    pub t: f64,
    /// Headline watts; `None` when nothing could be read.
    pub watts: Option<f64>,
    /// Energy this step added to the headline (joules) and what it cost.
    pub joules: f64,
    pub cost: f64,
    /// Energy this step added per breakdown domain (cpu, gpu, …), counters first.
    pub by_domain: Vec<(String, f64)>,
    /// The length of the interval this step measured, seconds; 0 for a first sample or after a
    /// gap, whose energy is not counted.
    pub seconds: f64,
    /// The currency `cost` is in.
    pub currency: String,
}

/// An amount of money in one currency.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Money {
    pub currency: String,
    pub amount: f64,
}

/// Totals for `wattbar-cli totals` and the UI. Energy adds up across currencies; money never
/// does: `cost` is in `currency` (the one asked for), and what was paid in other currencies is
/// listed apart in `other_costs`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Total {
    pub joules: f64,
    pub kwh: f64,
    pub cost: f64,
    pub currency: String,
    pub other_costs: Vec<Money>,
}

impl Total {
    /// From energy and `(currency, cost)` rows, with `cost` in `currency`.
    fn new(joules: f64, costs: Vec<(String, f64)>, currency: &str) -> Self {
        let mut total = Total {
            joules,
            kwh: joules / wattbar_core::JOULES_PER_KWH,
            cost: 0.0,
            currency: currency.to_string(),
            other_costs: Vec::new(),
        };
        for (c, amount) in costs {
            if c == currency {
                total.cost += amount;
            } else if amount != 0.0 {
                total.other_costs.push(Money {
                    currency: c,
                    amount,
                });
            }
        }
        total
    }
}

/// A session row: start and end in Unix seconds (`end` is `None` while it runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRecord {
    pub start: f64,
    pub end: Option<f64>,
    pub joules: f64,
    pub cost: f64,
    pub currency: String,
}

/// One point of a history series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HistoryPoint {
    /// Start of the bucket, Unix seconds.
    pub t: f64,
    /// Mean of the watts read in the bucket; `None` when none was read.
    pub mean_watts: Option<f64>,
    pub max_watts: Option<f64>,
    pub joules: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Minute,
    Hour,
}

impl Step {
    pub fn seconds(self) -> i64 {
        match self {
            Step::Minute => 60,
            Step::Hour => 3600,
        }
    }
    fn table(self) -> &'static str {
        match self {
            Step::Minute => "minutes",
            Step::Hour => "hours",
        }
    }
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// Said when a damaged database was moved aside.
#[derive(Debug, Clone, PartialEq)]
pub struct MovedAside {
    pub to: PathBuf,
    pub reason: String,
}

/// Local calendar day (`YYYY-MM-DD`) and month (`YYYY-MM`) of Unix time `t`.
pub fn local_day_month(t: f64) -> (String, String) {
    let secs = t.floor() as i64;
    match Local.timestamp_opt(secs, 0).single() {
        Some(dt) => (
            dt.format("%Y-%m-%d").to_string(),
            dt.format("%Y-%m").to_string(),
        ),
        None => ("unknown".into(), "unknown".into()),
    }
}

const MIGRATIONS: [&str; 7] = [
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
];

impl Store {
    /// Opens (or creates) the ledger at `path`. A damaged file is moved aside and a new one
    /// created; the second value then says where it went and why.
    pub fn open(path: &Path, now_unix: f64) -> Result<(Store, Option<MovedAside>), StoreError> {
        match Store::open_checked(path) {
            Ok(store) => Ok((store, None)),
            Err(StoreError::Sql { source, .. }) if is_damage(&source) => {
                let to = path.with_file_name(format!(
                    "{}.corrupt-{}",
                    path.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| DB_FILE.to_string()),
                    now_unix.floor() as i64
                ));
                std::fs::rename(path, &to).map_err(|source| StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                for suffix in ["-wal", "-shm"] {
                    let side = PathBuf::from(format!("{}{suffix}", path.display()));
                    let _ = std::fs::remove_file(side);
                }
                let store = Store::open_checked(path)?;
                Ok((
                    store,
                    Some(MovedAside {
                        to,
                        reason: source.to_string(),
                    }),
                ))
            }
            Err(e) => Err(e),
        }
    }

    fn open_checked(path: &Path) -> Result<Store, StoreError> {
        let sql = |source| StoreError::Sql {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(sql)?;
        restrict_to_user(path).map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(sql)?;
        if check != "ok" {
            return Err(sql(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(check),
            )));
        }
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.migrate().map_err(sql)?;
        Ok(store)
    }

    /// A read-only view of an existing ledger, for queries beside the engine that writes it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| sql_at(path, source))?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        sql_at(&self.path, source)
    }

    /// Starts a session. Sessions a crash left open are ended, each by its id, at its last
    /// sample: the caller holds the data folder's lock, so no other engine is running them.
    pub fn start_session(&mut self, now_unix: f64, currency: &str) -> Result<i64, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let id = (|| {
            end_orphans(&tx, None)?;
            tx.execute(
                "INSERT INTO sessions (start, currency) VALUES (?1, ?2)",
                params![now_unix, currency],
            )?;
            let id = tx.last_insert_rowid();
            tx.commit()?;
            Ok(id)
        })()
        .map_err(|e| sql_at(&path, e))?;
        Ok(id)
    }

    /// `wattbar-cli reset-session` with no engine running (the caller holds the lock): ends the
    /// sessions left open, each by id, and records an empty session from `now_unix`, so that the
    /// session reads 0 until an engine adds energy. Returns how many sessions were ended.
    pub fn reset_session(&mut self, now_unix: f64, currency: &str) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let ended = (|| {
            let ended = end_orphans(&tx, Some(now_unix))?;
            tx.execute(
                "INSERT INTO sessions (start, end, currency) VALUES (?1, ?1, ?2)",
                params![now_unix, currency],
            )?;
            tx.commit()?;
            Ok(ended)
        })()
        .map_err(|e| sql_at(&path, e))?;
        Ok(ended)
    }

    /// True when session `id` has been ended, by this process or another.
    pub fn session_ended(&self, id: i64) -> Result<bool, StoreError> {
        Ok(self.session(id)?.is_some_and(|s| s.end.is_some()))
    }

    pub fn end_session(&mut self, id: i64, now_unix: f64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE sessions SET end = ?2 WHERE id = ?1",
                params![id, now_unix],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Writes one batch in one transaction: raw samples, rollups, lifetime, calendar totals and
    /// the running session's totals.
    pub fn write_batch(
        &mut self,
        session_id: i64,
        rows: &[Row],
        session_joules: f64,
        session_cost: f64,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        let result = (|| {
            let mut sample =
                tx.prepare_cached("INSERT INTO samples (t, watts, joules) VALUES (?1, ?2, ?3)")?;
            let rollup_sql = |table: &str| {
                format!(
                    "INSERT INTO {table} (t, n, sum_watts, max_watts, joules) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT(t) DO UPDATE SET n = n + ?2, sum_watts = sum_watts + ?3,
                       max_watts = CASE WHEN ?4 IS NULL THEN max_watts
                                        WHEN max_watts IS NULL OR ?4 > max_watts THEN ?4
                                        ELSE max_watts END,
                       joules = joules + ?5"
                )
            };
            let mut minute = tx.prepare_cached(&rollup_sql("minutes"))?;
            let mut hour = tx.prepare_cached(&rollup_sql("hours"))?;
            let mut domain_minute = tx.prepare_cached(&domains::upsert_sql(Step::Minute))?;
            let mut domain_hour = tx.prepare_cached(&domains::upsert_sql(Step::Hour))?;
            let mut lifetime = tx.prepare_cached(
                "INSERT INTO lifetime (domain, joules) VALUES (?1, ?2)
                 ON CONFLICT(domain) DO UPDATE SET joules = joules + ?2",
            )?;
            let mut daily = tx.prepare_cached(
                "INSERT INTO daily (day, currency, joules, cost) VALUES (?1, ?4, ?2, ?3)
                 ON CONFLICT(day, currency) DO UPDATE SET joules = joules + ?2, cost = cost + ?3",
            )?;
            let mut monthly = tx.prepare_cached(
                "INSERT INTO monthly (month, currency, joules, cost) VALUES (?1, ?4, ?2, ?3)
                 ON CONFLICT(month, currency) DO UPDATE SET joules = joules + ?2, cost = cost + ?3",
            )?;
            for row in rows {
                sample.execute(params![row.t, row.watts, row.joules])?;
            }
            // Each rollup row once per batch, whatever the number of samples in it.
            let sums = BatchSums::of(rows);
            for (stmt, buckets) in [(&mut minute, &sums.minutes), (&mut hour, &sums.hours)] {
                for (bucket, b) in buckets {
                    stmt.execute(params![bucket, b.n, b.sum_watts, b.max_watts, b.joules])?;
                }
            }
            for (stmt, buckets) in [
                (&mut domain_minute, &sums.domain_minutes),
                (&mut domain_hour, &sums.domain_hours),
            ] {
                for ((bucket, domain), (joules, seconds)) in buckets {
                    stmt.execute(params![bucket, domain, joules, seconds])?;
                }
            }
            for (domain, joules) in &sums.lifetime {
                lifetime.execute(params![domain, joules])?;
            }
            for ((day, currency), (joules, cost)) in &sums.daily {
                daily.execute(params![day, joules, cost, currency])?;
            }
            for ((month, currency), (joules, cost)) in &sums.monthly {
                monthly.execute(params![month, joules, cost, currency])?;
            }
            drop((sample, minute, hour, domain_minute, domain_hour));
            drop((lifetime, daily, monthly));
            tx.prepare_cached("UPDATE sessions SET joules = ?2, cost = ?3 WHERE id = ?1")?
                .execute(params![session_id, session_joules, session_cost])?;
            tx.commit()
        })();
        result.map_err(|e| sql_at(&path, e))
    }

    /// Drops raw samples older than 24 h and minute rollups older than 30 days.
    pub fn prune(&mut self, now_unix: f64) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| sql_at(&path, e))?;
        tx.prepare_cached("DELETE FROM samples WHERE t < ?1")
            .and_then(|mut s| s.execute(params![now_unix - RAW_KEEP_SECONDS]))
            .and_then(|_| tx.prepare_cached("DELETE FROM minutes WHERE t < ?1"))
            .and_then(|mut s| s.execute(params![now_unix - MINUTES_KEEP_SECONDS]))
            .and_then(|_| tx.prepare_cached("DELETE FROM domain_minutes WHERE t < ?1"))
            .and_then(|mut s| s.execute(params![now_unix - MINUTES_KEEP_SECONDS]))
            .and_then(|_| tx.commit())
            .map_err(|e| sql_at(&path, e))
    }

    /// Records that the alert `key` was given; false when it already had been.
    pub fn mark_alert(&mut self, key: &str, now_unix: f64) -> Result<bool, StoreError> {
        let inserted = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO alerts (key, at) VALUES (?1, ?2)",
                params![key, now_unix],
            )
            .map_err(|e| self.sql(e))?;
        Ok(inserted == 1)
    }

    /// Records a change of low-power mode at once, in its own transaction.
    pub fn record_low_power(
        &mut self,
        state: &wattbar_core::LowPowerState,
        message: &str,
    ) -> Result<(), StoreError> {
        let reason = state.reason.map(|r| r.as_str()).unwrap_or("manual");
        self.conn
            .execute(
                "INSERT INTO low_power (t, enabled, reason, message) VALUES (?1, ?2, ?3, ?4)",
                params![state.since.unwrap_or(0.0), state.enabled, reason, message],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The last recorded low-power state; off when none was ever recorded.
    pub fn low_power(&self) -> Result<wattbar_core::LowPowerState, StoreError> {
        let row: Option<(f64, bool, String)> = self
            .conn
            .query_row(
                "SELECT t, enabled, reason FROM low_power ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        Ok(match row {
            Some((t, enabled, reason)) => wattbar_core::LowPowerState {
                enabled,
                since: Some(t),
                reason: wattbar_core::Reason::parse(&reason),
            },
            None => wattbar_core::LowPowerState::off(),
        })
    }

    /// Lifetime headline energy, and its cost with `currency` first.
    pub fn lifetime(&self, currency: &str) -> Result<Total, StoreError> {
        let joules: f64 = self
            .conn
            .prepare_cached("SELECT COALESCE(SUM(joules), 0) FROM lifetime WHERE domain = 'system'")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        let costs = self.costs(
            "SELECT currency, SUM(cost) FROM monthly GROUP BY currency ORDER BY currency",
            None,
        )?;
        Ok(Total::new(joules, costs, currency))
    }

    /// `(currency, cost)` rows of a query that takes `key` as its one parameter, if any.
    fn costs(&self, sql: &str, key: Option<&str>) -> Result<Vec<(String, f64)>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.sql(e))?;
        let map = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?));
        let rows = match key {
            Some(k) => stmt.query_map(params![k], map),
            None => stmt.query_map([], map),
        }
        .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    /// Lifetime joules per domain: `system` (the headline) and each metered part.
    pub fn lifetime_by_domain(&self) -> Result<Vec<(String, f64)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT domain, joules FROM lifetime ORDER BY domain")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }

    pub fn day(&self, unix: f64, currency: &str) -> Result<Total, StoreError> {
        let (day, _) = local_day_month(unix);
        Ok(self
            .recorded_day(&day, currency)?
            .unwrap_or_else(|| Total::new(0.0, Vec::new(), currency)))
    }

    /// The local day `day` (`YYYY-MM-DD`), or `None` when nothing was recorded that day.
    pub fn recorded_day(&self, day: &str, currency: &str) -> Result<Option<Total>, StoreError> {
        let costs = self.costs(
            "SELECT currency, cost FROM daily WHERE day = ?1 ORDER BY currency",
            Some(day),
        )?;
        if costs.is_empty() {
            return Ok(None);
        }
        let joules: f64 = self
            .conn
            .prepare_cached("SELECT COALESCE(SUM(joules), 0) FROM daily WHERE day = ?1")
            .and_then(|mut stmt| stmt.query_row(params![day], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        Ok(Some(Total::new(joules, costs, currency)))
    }

    pub fn month(&self, unix: f64, currency: &str) -> Result<Total, StoreError> {
        let (_, month) = local_day_month(unix);
        self.calendar("monthly", "month", &month, currency)
    }

    fn calendar(
        &self,
        table: &str,
        key: &str,
        value: &str,
        currency: &str,
    ) -> Result<Total, StoreError> {
        let joules: f64 = self
            .conn
            .prepare_cached(&format!(
                "SELECT COALESCE(SUM(joules), 0) FROM {table} WHERE {key} = ?1"
            ))
            .and_then(|mut stmt| stmt.query_row(params![value], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        let costs = self.costs(
            &format!("SELECT currency, cost FROM {table} WHERE {key} = ?1 ORDER BY currency"),
            Some(value),
        )?;
        Ok(Total::new(joules, costs, currency))
    }

    /// The newest session, running or not.
    pub fn latest_session(&self) -> Result<Option<SessionRecord>, StoreError> {
        let id: Option<i64> = self
            .conn
            .query_row("SELECT MAX(id) FROM sessions", [], |r| r.get(0))
            .map_err(|e| self.sql(e))?;
        match id {
            Some(id) => self.session(id),
            None => Ok(None),
        }
    }

    /// A session as stored.
    pub fn session(&self, id: i64) -> Result<Option<SessionRecord>, StoreError> {
        self.conn
            .query_row(
                "SELECT start, end, joules, cost, currency FROM sessions WHERE id = ?1",
                params![id],
                |r| {
                    Ok(SessionRecord {
                        start: r.get(0)?,
                        end: r.get(1)?,
                        joules: r.get(2)?,
                        cost: r.get(3)?,
                        currency: r.get(4)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.sql(e))
    }

    /// `(t, mean watts, max watts, joules)` buckets in `[from, to)`, oldest first.
    pub fn history(&self, from: f64, to: f64, step: Step) -> Result<Vec<HistoryPoint>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT t, n, sum_watts, max_watts, joules FROM {} WHERE t >= ?1 AND t < ?2 ORDER BY t",
                step.table()
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![from.floor() as i64, to.ceil() as i64], |r| {
                let n: i64 = r.get(1)?;
                let sum: f64 = r.get(2)?;
                Ok(HistoryPoint {
                    t: r.get::<_, i64>(0)? as f64,
                    mean_watts: (n > 0).then(|| sum / n as f64),
                    max_watts: r.get(3)?,
                    joules: r.get(4)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

/// Ends every session still open, one by one by id, at `at` or else at its last sample.
fn end_orphans(tx: &rusqlite::Transaction<'_>, at: Option<f64>) -> rusqlite::Result<usize> {
    let ids: Vec<i64> = tx
        .prepare("SELECT id FROM sessions WHERE end IS NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for id in &ids {
        tx.execute(
            "UPDATE sessions SET end = COALESCE(?2, (SELECT MAX(t) FROM samples WHERE t >= start), start)
             WHERE id = ?1",
            params![id, at],
        )?;
    }
    Ok(ids.len())
}

fn sql_at(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Sql {
        path: path.to_path_buf(),
        source,
    }
}

fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

#[cfg(unix)]
fn restrict_to_user(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn restrict_to_user(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Store {
        Store::open(&dir.join(DB_FILE), 1_700_000_000.0)
            .unwrap_or_else(|e| panic!("{e}"))
            .0
    }

    fn row(t: f64, watts: f64, joules: f64, cost: f64) -> Row {
        Row {
            t,
            watts: Some(watts),
            joules,
            cost,
            by_domain: vec![("cpu".into(), joules / 3.0), ("system".into(), joules)],
            seconds: 1.0,
            currency: "EUR".into(),
        }
    }

    #[test]
    fn ten_minutes_at_300_w_roll_up_into_minutes_hours_and_lifetime() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut store = open(dir.path());
        let start = 1_700_000_400.0; // 22:20:00 UTC, on a minute boundary
        let id = store
            .start_session(start, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let rows: Vec<Row> = (1..=600)
            .map(|i| row(start + i as f64, 300.0, 300.0, 300.0 / 3.6e6 * 0.3))
            .collect();
        for batch in rows.chunks(5) {
            store
                .write_batch(id, batch, 0.0, 0.0)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let lifetime = store.lifetime("EUR").unwrap_or_else(|e| panic!("{e}"));
        assert!((lifetime.joules - 180_000.0).abs() < 1e-6);
        let by_domain = store.lifetime_by_domain().unwrap_or_default();
        assert_eq!(by_domain.len(), 2, "{by_domain:?}");
        assert_eq!(by_domain[0].0, "cpu");
        assert!((by_domain[0].1 - 60_000.0).abs() < 1e-6);
        assert!((lifetime.kwh - 0.05).abs() < 1e-12);
        assert!((lifetime.cost - 0.015).abs() < 1e-9);
        let minutes = store
            .history(start, start + 700.0, Step::Minute)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(minutes.len(), 11);
        assert_eq!(minutes[1].mean_watts, Some(300.0));
        assert!((minutes[1].joules - 18_000.0).abs() < 1e-6);
        let hours = store
            .history(start - 3600.0, start + 3600.0, Step::Hour)
            .unwrap_or_else(|e| panic!("{e}"));
        let total: f64 = hours.iter().map(|h| h.joules).sum();
        assert!((total - 180_000.0).abs() < 1e-6);
    }

    #[test]
    fn lifetime_survives_a_reopen_and_a_new_session() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut store = open(dir.path());
        let id = store
            .start_session(100.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .write_batch(id, &[row(101.0, 50.0, 50.0, 0.0)], 50.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        drop(store);
        let mut store = open(dir.path());
        let second = store
            .start_session(200.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(id, second);
        let first = store.session(id).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.map(|s| (s.end, s.joules)), Some((Some(101.0), 50.0)));
        store
            .write_batch(second, &[row(201.0, 10.0, 10.0, 0.0)], 10.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            store.lifetime("EUR").map(|l| l.joules).unwrap_or(-1.0),
            60.0
        );
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_and_a_fresh_one_used() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        std::fs::write(&path, b"this is not a database, just some bytes that are long enough to fill a header page of sqlite......")
            .unwrap_or_else(|e| panic!("{e}"));
        let (store, moved) = Store::open(&path, 1234.0).unwrap_or_else(|e| panic!("{e}"));
        let moved = moved.unwrap_or_else(|| panic!("not moved aside"));
        assert_eq!(moved.to, dir.path().join("wattbar.db.corrupt-1234"));
        assert!(moved.to.exists());
        assert_eq!(store.lifetime("EUR").map(|l| l.joules).unwrap_or(-1.0), 0.0);
    }

    #[cfg(unix)]
    #[test]
    fn the_database_is_readable_by_its_user_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = open(dir.path());
        let mode = std::fs::metadata(store.path())
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn an_alert_is_given_once_even_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut store = open(dir.path());
        assert_eq!(
            store.mark_alert("daily-kwh:2026-11-22", 1.0).ok(),
            Some(true)
        );
        assert_eq!(
            store.mark_alert("daily-kwh:2026-11-22", 2.0).ok(),
            Some(false)
        );
        drop(store);
        let mut store = open(dir.path());
        assert_eq!(
            store.mark_alert("daily-kwh:2026-11-22", 3.0).ok(),
            Some(false)
        );
        assert_eq!(
            store.mark_alert("daily-kwh:2026-11-23", 3.0).ok(),
            Some(true)
        );
    }

    #[test]
    fn the_last_low_power_change_is_what_a_reopen_sees() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        {
            let mut store = open(dir.path());
            assert_eq!(
                store.low_power().ok(),
                Some(wattbar_core::LowPowerState::off())
            );
            for (t, enabled, reason) in [
                (10.0, true, wattbar_core::Reason::AutoThreshold),
                (20.0, false, wattbar_core::Reason::AutoThreshold),
                (30.0, true, wattbar_core::Reason::Manual),
            ] {
                let state = wattbar_core::LowPowerState {
                    enabled,
                    since: Some(t),
                    reason: Some(reason),
                };
                store
                    .record_low_power(&state, "why")
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let store = open(dir.path());
        assert_eq!(
            store.low_power().ok(),
            Some(wattbar_core::LowPowerState {
                enabled: true,
                since: Some(30.0),
                reason: Some(wattbar_core::Reason::Manual)
            })
        );
    }

    #[test]
    fn a_version_1_database_is_migrated_forward_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        {
            let conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
            conn.execute_batch(MIGRATIONS[0])
                .unwrap_or_else(|e| panic!("{e}"));
            conn.execute_batch(
                "INSERT INTO lifetime VALUES ('system', 42.0);
                 INSERT INTO sessions (start, currency) VALUES (0, 'USD');
                 INSERT INTO monthly VALUES ('2026-11', 42.0, 0.5);
                 PRAGMA user_version = 1;",
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let (mut store, moved) = Store::open(&path, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(moved.is_none());
        assert_eq!(
            store.lifetime("EUR").map(|l| l.joules).unwrap_or(-1.0),
            42.0
        );
        // The old calendar rows are taken to be in the newest session's currency.
        assert_eq!(store.lifetime("USD").map(|l| l.cost).unwrap_or(-1.0), 0.5);
        assert_eq!(store.mark_alert("x", 0.0).ok(), Some(true));
        let version: i64 = store
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap_or(-1);
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn raw_samples_older_than_a_day_are_pruned_but_rollups_stay() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut store = open(dir.path());
        let id = store
            .start_session(0.0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .write_batch(id, &[row(1000.0, 5.0, 5.0, 0.0)], 5.0, 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .prune(1000.0 + 2.0 * 86_400.0)
            .unwrap_or_else(|e| panic!("{e}"));
        let raw: i64 = store
            .conn
            .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
            .unwrap_or(-1);
        assert_eq!(raw, 0);
        let hours = store
            .history(0.0, 10_000.0, Step::Hour)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hours.len(), 1);
    }

    #[test]
    fn costs_in_two_currencies_are_kept_apart_never_added() {
        const T0: f64 = 1_700_000_400.0;
        // 1 kWh at 0.30 EUR, then the user switches to USD: 1 kWh at 0.40 USD, the same day.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut store = open(dir.path());
        let id = store
            .start_session(T0, "EUR")
            .unwrap_or_else(|e| panic!("{e}"));
        let kwh = |t: f64, cost: f64, currency: &str| Row {
            currency: currency.into(),
            ..row(t, 3600.0, 3.6e6, cost)
        };
        store
            .write_batch(
                id,
                &[kwh(T0 + 1.0, 0.30, "EUR"), kwh(T0 + 2.0, 0.40, "USD")],
                0.0,
                0.0,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        for total in [
            store.day(T0 + 2.0, "USD"),
            store.month(T0 + 2.0, "USD"),
            store.lifetime("USD"),
        ] {
            let total = total.unwrap_or_else(|e| panic!("{e}"));
            assert!((total.kwh - 2.0).abs() < 1e-9, "{total:?}");
            assert!((total.cost - 0.40).abs() < 1e-9, "{total:?}");
            assert_eq!(total.currency, "USD");
            assert_eq!(
                total.other_costs,
                vec![Money {
                    currency: "EUR".into(),
                    amount: 0.30
                }]
            );
        }
    }
}
