//! The one error type of wattbar-sources.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// This source cannot work here; the message says why and, where possible, how to fix it.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Failed this time; try again next sample.
    #[error("transient: {0}")]
    Transient(String),
    /// The bytes are not what they should be. `line` is 1-based where known.
    #[error("{what}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Parse {
        what: &'static str,
        line: Option<usize>,
        message: String,
    },
}

impl From<Error> for wattbar_core::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Unavailable(m) => wattbar_core::Error::Unavailable(m),
            Error::Transient(m) => wattbar_core::Error::Transient(m),
            parse @ Error::Parse { .. } => wattbar_core::Error::Parse(parse.to_string()),
        }
    }
}
