//! Preferences in tauri-plugin-store, one key per field of [`Preferences`], in the file that
//! `wattbar-cli` also reads (`<data dir>/preferences.json`).

use std::sync::Arc;
use tauri::{AppHandle, Wry};
use tauri_plugin_store::{Store, StoreExt};
use wattbar_core::Preferences;
use wattbar_engine::paths;

pub const PRICE_PER_KWH: &str = "price_per_kwh";

pub fn open(app: &AppHandle) -> Result<Arc<Store<Wry>>, Box<dyn std::error::Error>> {
    let dir = paths::data_dir()?;
    std::fs::create_dir_all(&dir)?;
    Ok(app.store(dir.join(paths::PREFERENCES_FILE))?)
}

/// Reads what is stored. A value that fails validation is reported and keeps its default; the
/// file is left as it is, so nothing the user wrote is lost.
pub fn load(store: &Store<Wry>) -> Preferences {
    let entries = store.entries();
    let (prefs, problems) = Preferences::from_entries(entries.iter().map(|(k, v)| (k.as_str(), v)));
    for problem in problems {
        tracing::warn!("stored preference refused, default used: {problem}");
    }
    prefs
}

/// Stores one value and writes the file now, so a crash right after keeps it.
pub fn save(store: &Store<Wry>, key: &str, value: serde_json::Value) -> Result<(), String> {
    store.set(key, value);
    store
        .save()
        .map_err(|e| format!("could not save preferences: {e}"))
}
