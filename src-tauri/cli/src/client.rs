//! Talking to the running engine. There is at most one per data folder; its lock file names its
//! pid and API address, so commands that change something go through it instead of the store.

use anyhow::{bail, Result};
use wattbar_engine::lock::{EngineLock, Holder};
use wattbar_engine::paths;

/// The engine recording into this data folder, if one runs.
pub fn running() -> Result<Option<Holder>> {
    Ok(EngineLock::holder(&paths::data_dir()?))
}

/// Its API address, or a clear error saying how to get one.
pub fn api_of(holder: &Holder) -> Result<String> {
    match &holder.api {
        Some(api) => Ok(api.clone()),
        None => bail!(
            "another Wattbar engine{} records into this data folder without an API \
             (wattbar-cli watch?): stop it, or use `wattbar-cli serve` or the tray app",
            holder
                .pid
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default()
        ),
    }
}

pub fn token() -> Result<String> {
    Ok(wattbar_engine::token::load_or_create(&paths::data_dir()?)?)
}

/// Sends a request and returns its JSON body; an error names the API and the status.
pub fn call(request: ureq::Request, body: Option<serde_json::Value>) -> Result<serde_json::Value> {
    let url = request.url().to_string();
    let reply = match body {
        Some(b) => request.send_json(b),
        None => request.call(),
    };
    match reply {
        Ok(r) => Ok(r.into_json()?),
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            bail!("{url}: {code} {body}")
        }
        Err(e) => bail!("is Wattbar running with its API at {url}? {e}"),
    }
}

/// Ends the running engine's session through its API.
pub fn reset_session(api: &str) -> Result<serde_json::Value> {
    let request = ureq::post(&format!("http://{api}/v1/session/reset"))
        .set("Authorization", &format!("Bearer {}", token()?));
    call(request, None)
}
