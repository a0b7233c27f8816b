//! What one capture, or one record of a stream, says: power readings and non-power state.

use serde::Serialize;
use wattbar_core::Reading;

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Sample {
    /// Power readings. A value that is not a measurement has `watts: None` or is left out;
    /// it is never 0.
    pub readings: Vec<Reading>,
    /// Non-power facts by name: charge percent, power source, low-power mode, limits.
    pub state: serde_json::Map<String, serde_json::Value>,
}
