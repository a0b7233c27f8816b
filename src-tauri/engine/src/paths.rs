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

pub fn preferences_path() -> Result<PathBuf, Error> {
    Ok(data_dir()?.join(PREFERENCES_FILE))
}

pub fn database_path() -> Result<PathBuf, Error> {
    Ok(data_dir()?.join(crate::store::DB_FILE))
}
