//! macOS sources: parsers of ioreg, powermetrics, pmset and top output (pure, tested on real
//! captures) and, on macOS only, the readers that run them.

pub mod ioreg;
pub mod pmset;
pub mod powermetrics;
pub mod top;
