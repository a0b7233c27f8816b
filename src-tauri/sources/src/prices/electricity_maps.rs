//! Electricity Maps `GET /v3/carbon-intensity/latest?zone=…` (header `auth-token`): `{"zone",
//! "carbonIntensity", "datetime", "updatedAt", "isEstimated", …}`, gCO₂eq per kWh for the hour
//! starting at `datetime`. The free tier gives the latest hour of one zone, no forecast.
//! Errors arrive as `{"error": "…"}`.
//!
//! No genuine Electricity Maps answer is in the captures: this follows the vendor's documented
//! shape.

use super::{bad, checked, unix_of};
use crate::Error;
use serde_json::Value;
use wattbar_core::slots::{Quantity, Series, Slot};

const WHAT: &str = "Electricity Maps carbon intensity";

/// The latest hour's intensity.
pub fn parse_latest(bytes: &[u8]) -> Result<Series, Error> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(WHAT, e.to_string()))?;
    if let Some(message) = v["error"].as_str().or(v["message"].as_str()) {
        return Err(Error::Unavailable(format!("Electricity Maps: {message}")));
    }
    let start = v["datetime"]
        .as_str()
        .and_then(unix_of)
        .ok_or_else(|| bad(WHAT, format!("datetime {}", v["datetime"])))?;
    let value = v["carbonIntensity"]
        .as_f64()
        .ok_or_else(|| bad(WHAT, format!("carbonIntensity {}", v["carbonIntensity"])))?;
    checked(
        WHAT,
        Series::from_answer(
            Quantity::GramsPerKwh,
            None,
            vec![Slot {
                start,
                end: start + 3600.0,
                value,
            }],
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_latest_answer_is_one_hour() {
        let answer = br#"{"zone":"DE","carbonIntensity":302,"datetime":"2019-05-21T00:00:00.000Z",
            "updatedAt":"2019-05-21T01:10:05.123Z","emissionFactorType":"lifecycle",
            "isEstimated":true,"estimationMethod":"TIME_SLICER_AVERAGE"}"#;
        let s = parse_latest(answer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.slots.len(), 1);
        assert_eq!(s.at(1_558_396_800.0 + 10.0), Some(302.0));
        assert_eq!(s.at(1_558_396_800.0 + 3600.0), None);
        let err = parse_latest(br#"{"error":"Invalid authentication token"}"#).err();
        assert!(matches!(err, Some(Error::Unavailable(_))), "{err:?}");
    }
}
