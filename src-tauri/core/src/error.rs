//! The one error type of wattbar-core. Variants are named for what the caller does next.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// The source cannot work on this machine or with these rights; skip it and say why.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The source failed this time; try again next sample.
    #[error("transient: {0}")]
    Transient(String),
    /// Bytes were read but do not mean what they should.
    #[error("parse error: {0}")]
    Parse(String),
    /// A value a person entered (or a stored preference) is out of bounds; the old value stays.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}
