//! Reads the preferences file that the app's store writes (one JSON object, one key per field),
//! so the CLI and the app share one file and one schema.
//!
//! A missing file means defaults. A file that is not a JSON object is an error naming the file.
//! A field with an invalid value keeps its default and comes back as a problem to show; the file
//! is never rewritten here, so nothing the user wrote is lost.

use crate::error::Error;
use std::path::Path;
use wattbar_core::Preferences;

pub fn load(path: &Path) -> Result<(Preferences, Vec<wattbar_core::Error>), Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Preferences::default(), Vec::new()))
        }
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let parse_error = |message: String| Error::Parse {
        path: path.to_path_buf(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| parse_error(e.to_string()))?;
    let map = value
        .as_object()
        .ok_or_else(|| parse_error("not a JSON object".into()))?;
    Ok(Preferences::from_entries(
        map.iter().map(|(k, v)| (k.as_str(), v)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (p, problems) = load(&dir.path().join("nope.json")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p, Preferences::default());
        assert!(problems.is_empty());
    }

    #[test]
    fn the_app_store_file_is_read_with_the_shared_schema() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("preferences.json");
        std::fs::write(
            &path,
            r#"{"price_per_kwh":0.42,"low_power_threshold_w":20,"currency":"USD"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (p, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.price_per_kwh.per_kwh(), 0.42);
        assert_eq!(p.low_power.threshold_w, 20.0);
        assert_eq!(p.currency.as_str(), "USD");
        assert!(problems.is_empty());
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("preferences.json");
        std::fs::write(&path, "{not json").unwrap_or_else(|e| panic!("{e}"));
        let err = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("preferences.json"), "{err}");
        std::fs::write(&path, "[1,2]").unwrap_or_else(|e| panic!("{e}"));
        assert!(load(&path).is_err());
    }

    #[test]
    fn an_invalid_value_is_reported_and_its_default_kept() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("preferences.json");
        std::fs::write(&path, r#"{"interval_ms": 5, "price_per_kwh": 0.2}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let (p, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.interval_ms, 1000);
        assert_eq!(p.price_per_kwh.per_kwh(), 0.2);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].to_string().contains("interval"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            r#"{"interval_ms": 5, "price_per_kwh": 0.2}"#
        );
    }
}
