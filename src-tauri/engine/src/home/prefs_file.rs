//! The preferences file (`<data dir>/preferences.json`): one JSON object, one key per field of
//! the one schema, read by the app and the CLI and written only by the engine.
//!
//! A missing file means defaults. A file that is not a JSON object (or not a regular file, such
//! as a FIFO that would block the read) is an error naming the file; an engine about to start
//! moves such a file aside and starts on defaults ([`load_or_set_aside`]), saying so, so that
//! one stray comma stops nothing. A file over [`MAX_KEPT_FILE_BYTES`] (1 MiB) is such an error,
//! found before more than that is read. A UTF-8 byte order mark is accepted.
//! A field with an invalid value keeps its default and comes back as a problem to show. Loading
//! never rewrites the file; saving a field changes that key alone and keeps every other key as
//! written (unknown ones and refused ones too), so nothing the user wrote is lost. A save goes to
//! a temporary file first and is renamed over the old one: a crash leaves one or the other. A
//! symlinked file is written where the link points, and the link stays.

use super::kept_apart;
#[cfg(doc)]
use super::paths::MAX_KEPT_FILE_BYTES;
use crate::error::Error;
use std::path::Path;
use wattbar_core::Preferences;

pub fn load(path: &Path) -> Result<(Preferences, Vec<wattbar_core::Error>), Error> {
    let parse_error = |message: String| Error::Parse {
        path: path.to_path_buf(),
        message,
    };
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(parse_error("not a regular file".into()));
    }
    let text = match super::paths::read_at_most(path, super::paths::MAX_KEPT_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Preferences::default(), Vec::new()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            return Err(parse_error(e.to_string()))
        }
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?;
    let map = value
        .as_object()
        .ok_or_else(|| parse_error("not a JSON object".into()))?;
    let (mut prefs, problems) = Preferences::from_entries(map.iter().map(|(k, v)| (k.as_str(), v)));
    kept_apart::fill(path, &mut prefs);
    Ok((prefs, problems))
}

/// [`load`], then any secret written into the file by hand moved apart: into its own file
/// (0600) and out of the preferences file. Only the engine, which owns the file, does this.
fn load_moving_secrets(path: &Path) -> Result<(Preferences, Vec<wattbar_core::Error>), Error> {
    let (prefs, problems) = load(path)?;
    let text =
        super::paths::read_at_most(path, super::paths::MAX_KEPT_FILE_BYTES).unwrap_or_default();
    let written: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .unwrap_or(serde_json::Value::Null);
    for key in SECRET_KEYS {
        if holds_secret(written.get(key)) {
            match save_field(path, &prefs, key) {
                Ok(()) => tracing::info!("a secret written into {key} by hand was moved apart"),
                Err(e) => tracing::warn!("a secret written into {key} could not be moved: {e}"),
            }
        }
    }
    Ok((prefs, problems))
}

/// The preferences that may hold a secret.
const SECRET_KEYS: [&str; 5] = [
    "wall_meter",
    "mqtt",
    "price_feed",
    "carbon_feed",
    "server_metrics",
];

/// Whether a preference as written holds a password or token.
fn holds_secret(value: Option<&serde_json::Value>) -> bool {
    let secret = |v: &serde_json::Value| {
        ["password", "token"].iter().any(|k| {
            v.get(k)
                .is_some_and(|s| s.as_str().is_some_and(|s| !s.is_empty()))
        })
    };
    match value {
        Some(serde_json::Value::Array(items)) => items.iter().any(secret),
        Some(v) => secret(v),
        None => false,
    }
}

/// [`load`] for an engine about to start: a file it cannot read as preferences is moved aside to
/// `<name>.bad-<now_unix>` and the defaults are used; the third value says so, for the log and
/// the dashboard. Only a file that cannot be moved is an error.
pub fn load_or_set_aside(
    path: &Path,
    now_unix: u64,
) -> Result<(Preferences, Vec<wattbar_core::Error>, Option<String>), Error> {
    match load_moving_secrets(path) {
        Ok((prefs, problems)) => Ok((prefs, problems, None)),
        Err(Error::Parse { message, .. }) => {
            let mut aside = path.as_os_str().to_owned();
            aside.push(format!(".bad-{now_unix}"));
            let aside = std::path::PathBuf::from(aside);
            std::fs::rename(path, &aside).map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let notice = format!(
                "The preferences file could not be read ({message}): it was kept as {} and \
                 the defaults are in use",
                aside.display()
            );
            Ok((Preferences::default(), Vec::new(), Some(notice)))
        }
        Err(e) => Err(e),
    }
}

/// Writes `key` as `prefs` has it (the schema's canonical form) into the file at `path`, keeping
/// every other key. A file that is not a JSON object is not overwritten: that is an error.
pub fn save_field(path: &Path, prefs: &Preferences, key: &str) -> Result<(), Error> {
    kept_apart::save(path, prefs, key)?;
    let io = |source: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut map = match super::paths::read_at_most(path, super::paths::MAX_KEPT_FILE_BYTES) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) | Err(_) => {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    message: "not a JSON object; left as it is, so the change was not saved".into(),
                })
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Map::new(),
        Err(e) => return Err(io(e)),
    };
    let all = serde_json::to_value(prefs).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let value = all.get(key).cloned().ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        message: format!("{key:?} is not a preference"),
    })?;
    map.insert(key.to_string(), value);
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(map)).map_err(|e| {
        Error::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    })?;
    let linked = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = match linked {
        true => std::fs::canonicalize(path).map_err(io)?,
        false => path.to_path_buf(),
    };
    crate::home::paths::write_whole(&target, &text).map_err(io)
}

#[cfg(test)]
mod tests;
