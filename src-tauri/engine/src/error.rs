//! The one error type of wattbar-engine.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// No folder to keep Wattbar's data in; set `WATTBAR_DATA_DIR`.
    #[error("no data directory: set WATTBAR_DATA_DIR or HOME")]
    NoDataDir,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file was read but its content is wrong; the message says where.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A host name the API should answer to is not one.
    #[error("{name:?} is not a host name: {reason}")]
    HostName { name: String, reason: &'static str },
    /// The engine task has stopped; nothing more will be published.
    #[error("the engine has stopped")]
    Stopped,
    /// Another engine holds this data folder: use it (its API) instead of starting a second.
    #[error("{}", locked_message(dir, *pid, api.as_deref()))]
    Locked {
        dir: PathBuf,
        pid: Option<u32>,
        api: Option<String>,
    },
    /// The ledger could not be read or written.
    #[error(transparent)]
    Store(#[from] wattbar_ledger::store::StoreError),
    /// The engine did not answer in time: what it was asked to do may not be done.
    #[error("the engine did not answer within {} s", .0.as_secs())]
    TimedOut(std::time::Duration),
    /// Too many ledger queries are waiting already: try again in a moment.
    #[error("the ledger is busy with other queries; try again in a moment")]
    Busy,
    /// A request the engine refused, with its reason (a preference out of range, say).
    #[error("{0}")]
    Refused(String),
    /// A machine setting (the power profile, a power limit) could not be read or changed: the
    /// message says which, why, and what privilege it needs.
    #[error("{0}")]
    Setting(String),
    /// A value the preferences schema refused; the error names the field.
    #[error(transparent)]
    Invalid(wattbar_core::Error),
}

fn locked_message(dir: &std::path::Path, pid: Option<u32>, api: Option<&str>) -> String {
    let who = match pid {
        Some(pid) => format!("another Wattbar engine (pid {pid})"),
        None => "another Wattbar engine".to_string(),
    };
    let reach = match api {
        Some(api) => format!("; reach it at http://{api}/"),
        None => String::new(),
    };
    format!(
        "{who} is already recording into {}{reach}. One engine per data folder keeps the \
         numbers right: stop it first, or set WATTBAR_DATA_DIR to another folder",
        dir.display()
    )
}
