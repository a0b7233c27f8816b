//! Where Wattbar keeps its files: `WATTBAR_DATA_DIR` when set, else the platform data folder
//! (`~/.local/share/wattbar` on Linux, `~/Library/Application Support/dev.wattbar.Wattbar` on macOS).

use crate::error::Error;
use std::path::PathBuf;

pub const DATA_DIR_ENV: &str = "WATTBAR_DATA_DIR";
pub const PREFERENCES_FILE: &str = "preferences.json";

pub fn data_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("dev", "wattbar", "Wattbar")
        .map(|p| p.data_dir().to_path_buf())
        .ok_or(Error::NoDataDir)
}

pub use wattbar_ledger::create_private_dir;

pub fn preferences_path() -> Result<PathBuf, Error> {
    Ok(data_dir()?.join(PREFERENCES_FILE))
}

pub fn database_path() -> Result<PathBuf, Error> {
    Ok(data_dir()?.join(wattbar_ledger::store::DB_FILE))
}

/// The file routers that do not speak HTTP read the low-power advice from (the JSON of
/// `GET /v1/low-power`): in the runtime folder (`$XDG_RUNTIME_DIR/wattbar` on Linux), else in
/// the data folder (macOS, or with `WATTBAR_DATA_DIR` set).
pub const ADVICE_FILE: &str = "low-power.json";

pub fn advice_path() -> Result<PathBuf, Error> {
    if std::env::var_os(DATA_DIR_ENV).is_some_and(|d| !d.is_empty()) {
        return Ok(data_dir()?.join(ADVICE_FILE));
    }
    match directories::ProjectDirs::from("dev", "wattbar", "Wattbar")
        .and_then(|p| p.runtime_dir().map(|d| d.to_path_buf()))
    {
        Some(dir) => Ok(dir.join(ADVICE_FILE)),
        None => Ok(data_dir()?.join(ADVICE_FILE)),
    }
}

/// The most a preferences or secrets file Wattbar keeps may hold: a person's file of many
/// tariffs is a few KiB.
pub const MAX_KEPT_FILE_BYTES: u64 = 1024 * 1024;

/// The most a file a person gives on the command line may hold (a replay trace, prompts, a
/// calibration CSV, a run's or a profile's summary, the fleet's host file): a day's trace at
/// 10 Hz is about 30 MB.
pub const MAX_GIVEN_FILE_BYTES: u64 = 64 * 1024 * 1024;

pub use wattbar_sources::capped::{read_at_most, read_bytes_at_most};

/// Writes `text` to `path` whole or not at all: a temporary file beside it (readable by its
/// user alone, as the rename keeps it), synced, then renamed over it.
pub fn write_whole(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    create_private_dir(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_limit_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("f");
        std::fs::write(&path, "x".repeat(10)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_at_most(&path, 10).ok().map(|t| t.len()), Some(10));
        let refused = read_at_most(&path, 9).err();
        assert_eq!(
            refused.as_ref().map(std::io::Error::kind),
            Some(std::io::ErrorKind::FileTooLarge)
        );
        assert!(refused.is_some_and(|e| e.to_string().contains("9 bytes")));
        // A file with no end is refused after its limit, never read whole.
        let endless = read_at_most(std::path::Path::new("/dev/zero"), 1024).err();
        assert_eq!(
            endless.map(|e| e.kind()),
            Some(std::io::ErrorKind::FileTooLarge)
        );
    }
}
