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
}
