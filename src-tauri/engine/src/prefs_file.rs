//! Reads the preferences file that the app's store writes (one JSON object, one key per field),
//! so the CLI and the app share one file and one schema.
//!
//! A missing file means defaults. A file that does not parse, or holds an invalid value, is an
//! error the caller shows; it is never silently replaced.

use crate::error::Error;
use std::path::Path;
use wattbar_core::Preferences;

pub fn load(path: &Path) -> Result<Preferences, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Preferences::default()),
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let prefs: Preferences = serde_json::from_str(&text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    prefs.validate().map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(prefs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = load(&dir.path().join("nope.json")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p, Preferences::default());
    }

    #[test]
    fn the_app_store_file_is_read_with_the_shared_schema() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("preferences.json");
        std::fs::write(
            &path,
            r#"{"price_per_kwh":0.42,"low_power":true,"currency":"USD"}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let p = load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.price_per_kwh.per_kwh(), 0.42);
        assert!(p.low_power);
        assert_eq!(p.currency.as_str(), "USD");
    }

    #[test]
    fn a_corrupt_or_invalid_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("preferences.json");
        std::fs::write(&path, "{not json").unwrap_or_else(|e| panic!("{e}"));
        let err = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("preferences.json"), "{err}");
        std::fs::write(&path, r#"{"interval_ms": 5}"#).unwrap_or_else(|e| panic!("{e}"));
        let err = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("interval"), "{err}");
    }
}
