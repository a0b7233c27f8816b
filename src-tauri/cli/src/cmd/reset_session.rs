//! `wattbar-cli reset-session`: through the running engine, or, with none running, by taking the
//! data folder's lock and changing the ledger itself.

use anyhow::{bail, Result};
use wattbar_engine::home::lock::EngineLock;
use wattbar_engine::home::paths;
use wattbar_engine::store::Store;
use wattbar_engine::unix_now;

pub fn reset_session() -> Result<()> {
    if let Some(client) = crate::client::running()? {
        let reply = client.post("/v1/session/reset", None)?;
        crate::out!(
            "{}",
            serde_json::json!({"ended_sessions": 1, "by": format!("the engine at {}", client.base().trim_start_matches("http://")), "started": reply["started"]})
        )?;
        return Ok(());
    }
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    let _lock = EngineLock::acquire(&paths::data_dir()?, None)?;
    let prefs = crate::engine::read_prefs()?;
    let (mut store, _) = Store::open(&db, unix_now())?;
    let ended = store.reset_session(unix_now(), prefs.currency.as_str())?;
    crate::out!("{}", serde_json::json!({ "ended_sessions": ended }))?;
    Ok(())
}
