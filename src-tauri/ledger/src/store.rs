//! The ledger: a SQLite file (WAL) that keeps Wattbar's energy across crashes and restarts.
//!
//! Tables (schema version in `PRAGMA user_version`, migrated forward in order):
//! - `lifetime(domain, joules)`: lifetime energy per breakdown domain (cpu, gpu, wall, …), only
//!   ever increasing; the headline's is `lifetime_scopes(scope, joules)` (v12);
//! - `sessions(id, start, end, joules, cost, currency)`: `end` is NULL while the session runs;
//! - `samples(t, watts, joules, scope, start)`: raw samples, kept 24 h, each with the start of
//!   the measured interval it ends (v14; `t` itself where it ended none, NULL before v14);
//! - `minutes(t, scope, n, sum_watts, max_watts, joules)`: per-minute rollups, kept 30 days;
//! - `hours(t, scope, n, sum_watts, max_watts, joules)`: per-hour rollups, kept forever;
//! - `daily(day, scope, currency, joules, cost)`, `monthly(month, scope, currency, joules,
//!   cost)`: local calendar totals, one row per scope and currency (v4, v12): money in two
//!   currencies, and energy of two scopes, are never added;
//! - `alerts(key)` (v2): budget alerts already given, so each is given once per period;
//! - `low_power(t, enabled, reason, message)` (v3): every change of low-power mode; the last row
//!   is the state restored at start;
//! - `inference(id, model, route, status, start, end, …)`, `inference_models(model, …)` and
//!   `inference_baseline` (v5, typed columns and figures per model in v7, the model asked for
//!   when low-power mode routed a request in v8): one record per measured request, kept 90 days by default, the figures per model over every record, and
//!   the last idle baseline ([`inference`]);
//! - `domain_minutes`, `domain_hours(t, domain, joules, seconds)` (v6): history per breakdown
//!   domain ([`domains`]);
//! - `resident_baselines`, `resident_idle(day, model, …)`, `unloads` (v9): what resident models
//!   cost at idle and what low-power mode unloaded ([`resident`]);
//! - `program_hours(t, program, joules)` (v10): energy per program per hour, kept 30 days
//!   ([`programs`]);
//! - `inference.shared_by`, `inference.held_before_joules` (v11): how many records shared a
//!   record's window, and what records settled before it held of it;
//! - scopes (v12): what the headline covered, kept with every sample and total, and each change
//!   ([`scopes`]);
//! - `calibration` (v13): the newest line from the machine's parts to a whole-machine reference
//!   ([`calibration`]).
//! - `samples.start` (v14): see `samples`.
//! - `server_windows`, `server_totals` (v16): model servers followed by their own counters,
//!   each window and each model's sums ([`server_windows`]).
//! - scopes of records, windows and sums (v17).
//! - `profiles` (v18): graded profiles of models, the evidence of `models --best`
//!   ([`profiles`]).
//! - `feed_slots`, `slot_costs` (v19): prices by the slot ([`feeds`]).
//! - `lifetime_costs` (v20): money paid and credited, two counters that never go back
//!   ([`money`]).
//! - `server_windows.covered` (v21): how much of each window its energy covers.
//! - `slot_costs.price_key` (v22): a row per slot and price ([`feeds`]).
//! - `server_windows.gpu_processes` (v23): what priced each window ([`server_windows`]).
//! - `battery_days` (v25): each battery's health by the local day, kept for good ([`battery`]).
//! - `battery_wear`, `lifetime_wear` (v26): energy drawn from the battery and what it wore
//!   ([`wear`]).
//!
//! Writes come in batches, each one transaction: a kill -9 loses at most the batch in memory and
//! never leaves a half-written one. A file that is not a database, or fails its integrity
//! check, is moved aside as `<name>.corrupt-<unix seconds>` and a fresh one is created; the
//! caller is told so it can tell the user.

use chrono::{Local, TimeZone};
use rusqlite::Connection;
use serde::Serialize;
use std::path::{Path, PathBuf};
use thiserror::Error;
use wattbar_core::Scope;

mod batch;
pub mod battery;
pub mod calibration;
mod coverage;
pub mod domains;
pub mod feeds;
pub mod inference;
pub mod intervals;
pub mod keys;
pub mod money;
pub mod profiles;
pub mod programs;
mod reads;
pub mod resident;
pub mod schema;
pub mod scopes;
pub mod server_windows;
mod total;
pub mod wear;
mod writes;

pub use total::{AcrossScopes, CostRow, Money, Total};

pub const DB_FILE: &str = "wattbar.db";
pub const RAW_KEEP_SECONDS: f64 = 24.0 * 3600.0;
pub const MINUTES_KEEP_SECONDS: f64 = 30.0 * 86_400.0;
/// Prepared statements kept per connection: more than the store has, so none is parsed twice.
const STATEMENT_CACHE_CAPACITY: usize = 64;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "database {path} was written by a newer Wattbar (schema version {found}; this one knows \
         up to {known}): update Wattbar to read it"
    )]
    Newer {
        path: PathBuf,
        found: i64,
        known: i64,
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
    /// Where the measured interval this step ends began, Unix seconds: `joules` is the energy
    /// from then to `t`. `None` where the step measured no headline energy (a first sample, a
    /// gap, a change of scope, no headline at either end).
    pub start: Option<f64>,
    /// The currency `cost` is in.
    pub currency: String,
    /// What the headline covered; `None` without one.
    pub scope: Option<Scope>,
    /// How the interval's energy was measured; `None` where it was not (as in
    /// [`Interval`](wattbar_core::inference::Interval)).
    pub quality: Option<wattbar_core::Quality>,
    pub method: Option<wattbar_core::meter::Method>,
    pub answered: Option<wattbar_core::inference::Answered>,
    /// Its energy and cost per price slot, where a price feed is set (`slot_costs`).
    pub slots: Vec<wattbar_core::SlotPart>,
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
    /// What the headline covered in the bucket; a bucket in which the scope changed comes
    /// once per scope. `None`: recorded before scopes were kept.
    pub scope: Option<Scope>,
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
    /// The schema of the open file: this build's once migrated, older when opened read-only.
    version: i64,
    path: PathBuf,
}

/// Said when a damaged database was moved aside.
#[derive(Debug, Clone, PartialEq)]
pub struct MovedAside {
    pub to: PathBuf,
    pub reason: String,
}

/// Local calendar day (`YYYY-MM-DD`) and month (`YYYY-MM`) of Unix time `t`.
///
/// The answer is kept for the rest of `t`'s minute: a local day starts on a whole minute in
/// every time zone, and the engine asks several times a second at rest, where each lookup of
/// the zone and formatting cost more than the sample's other bookkeeping. A change of time
/// zone shows within the minute.
pub fn local_day_month(t: f64) -> (String, String) {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(i64, (String, String))>> =
            const { std::cell::RefCell::new(None) };
    }
    let minute = (t / 60.0).floor() as i64;
    LAST.with_borrow_mut(|last| match last {
        Some((m, answer)) if *m == minute => answer.clone(),
        _ => {
            let answer = look_up_day_month(t);
            *last = Some((minute, answer.clone()));
            answer
        }
    })
}

fn look_up_day_month(t: f64) -> (String, String) {
    let secs = t.floor() as i64;
    match Local.timestamp_opt(secs, 0).single() {
        Some(dt) => (
            dt.format("%Y-%m-%d").to_string(),
            dt.format("%Y-%m").to_string(),
        ),
        None => ("unknown".into(), "unknown".into()),
    }
}

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
        if is_emptied(path) {
            return Err(sql(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
                Some("the file is empty (0 bytes), and no write-ahead log holds its pages".into()),
            )));
        }
        if let Some(dir) = path.parent() {
            crate::create_private_dir(dir).map_err(|source| StoreError::Io {
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
        // Room for every statement the store prepares (about 30): rusqlite keeps 16 by default, so
        // each batch would evict and parse again the statements it needs.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
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
            version: 0,
            path: path.to_path_buf(),
        };
        store.migrate()?;
        store.version = schema::SCHEMA_VERSION;
        Ok(store)
    }

    /// A read-only view of an existing ledger, for queries beside the engine that writes it. A
    /// ledger from a newer schema is refused ([`StoreError::Newer`]) rather than misread.
    /// A ledger in a folder this user cannot write (a WAL ledger needs its `-shm` file made
    /// there) is read as an immutable file: nobody can be writing it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open = |conn: Connection| {
            let mut store = Store {
                conn,
                version: 0,
                path: path.to_path_buf(),
            };
            store.version = store.check_version()?;
            Ok(store)
        };
        let first = Connection::open_with_flags(path, flags)
            .map_err(|source| sql_at(path, source))
            .and_then(open);
        let cannot_open = |e: &StoreError| {
            matches!(e, StoreError::Sql { source, .. } if matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
            ))
        };
        match first {
            Err(e) if cannot_open(&e) => {
                let mut uri = url_path(path);
                uri.push_str("?immutable=1");
                Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)
                    .map_err(|source| sql_at(path, source))
                    .and_then(open)
                    .map_err(|_| e)
            }
            other => other,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self, source: rusqlite::Error) -> StoreError {
        sql_at(&self.path, source)
    }
}

/// `path` as a `file:` URI, its reserved characters percent-encoded.
fn url_path(path: &Path) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '?' | '#' | '%' => uri.push_str(&format!("%{:02X}", u32::from(c))),
            c => uri.push(c),
        }
    }
    uri
}

fn sql_at(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Sql {
        path: path.to_path_buf(),
        source,
    }
}

/// A ledger file truncated to nothing: SQLite would take it for a new, empty ledger, and the
/// lifetime would start again from 0. A new ledger's pages may all still be in its `-wal` file
/// (none checkpointed yet), so an empty file beside a non-empty log is not damaged.
fn is_emptied(path: &Path) -> bool {
    let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    len(path) == Some(0) && len(&wal).unwrap_or(0) == 0
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

/// The named history ranges the dashboard offers: `1h` and `24h` by minute, `30d` by hour.
pub fn range(name: &str) -> Result<(f64, Step), String> {
    match name {
        "1h" => Ok((3600.0, Step::Minute)),
        "24h" => Ok((86_400.0, Step::Minute)),
        "30d" => Ok((30.0 * 86_400.0, Step::Hour)),
        other => Err(format!("unknown range {other:?}: use 1h, 24h or 30d")),
    }
}

#[cfg(test)]
mod tests;
