//! The ledger as the read-only commands open it (`totals`, `export`, `models`, `inference`,
//! `report`): beside a running engine, never for writing.

use anyhow::{bail, Result};
use wattbar_engine::paths;
use wattbar_engine::store::Store;

pub fn open_read_only() -> Result<Store> {
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    Ok(Store::open_read_only(&db)?)
}
