//! The ledger as the read-only commands open it (`totals`, `export`, `models`, `inference`,
//! `report`): beside a running engine, never for writing.

use anyhow::{bail, Result};
use wattbar_engine::home::paths;
use wattbar_engine::store::Store;

pub fn open_read_only() -> Result<Store> {
    match open_if_any()? {
        Some(store) => Ok(store),
        None => bail!(
            "no energy recorded yet: {} does not exist",
            paths::database_path()?.display()
        ),
    }
}

/// The ledger, or `None` when none was ever made. One that exists but cannot be read (damaged,
/// from a newer Wattbar, not readable by this user) is an error, never taken for an empty one.
pub fn open_if_any() -> Result<Option<Store>> {
    let db = paths::database_path()?;
    if !db.exists() {
        return Ok(None);
    }
    Ok(Some(Store::open_read_only(&db)?))
}
