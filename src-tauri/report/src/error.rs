//! What can go wrong drawing a report.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("a report is at least 1200×600 pixels, not {0}×{1}")]
    TooSmall(u32, u32),
    #[error("the report could not be drawn: {0}")]
    Draw(String),
}
