//! The engine these windows show: the tray's (or `wattbar-cli serve`'s), reached through its
//! local API with the one client ([`wattbar_client::Client`]). The data folder's lock file names
//! its address; writes carry the folder's token.
//!
//! Calls block, so commands run them on Tauri's blocking pool, never on the main thread.

use serde_json::Value;
use std::time::Duration;
pub use wattbar_client::{Client as Engine, Error as ApiError};

/// How long a window waits for a tray that is still starting (a login item, a first launch)
/// to name its API.
const FIND_TIMEOUT: Duration = Duration::from_secs(10);

/// The engine recording into this user's data folder, waiting up to [`FIND_TIMEOUT`] for one
/// that is starting.
pub fn find() -> Result<Engine, String> {
    let dir = wattbar_engine::home::paths::data_dir().map_err(|e| e.to_string())?;
    Engine::find(&dir, FIND_TIMEOUT).map_err(|e| e.to_string())
}

/// What a person reads of a failed call: the engine's own words for a refusal.
pub fn message(e: &ApiError) -> String {
    match e {
        ApiError::Refused { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Follows the engine's states, calling `on_state` with each one as the engine wrote it, until
/// the engine goes away; returns why. An engine whose stream slots are all taken is asked again
/// when it says to.
pub fn follow(engine: &Engine, mut on_state: impl FnMut(Value)) -> String {
    let stream = loop {
        match engine.stream() {
            Ok(s) => break s,
            Err(ApiError::Refused {
                status: 503,
                retry_after,
                ..
            }) => {
                let wait = retry_after.unwrap_or(Duration::from_secs(5));
                tracing::warn!(
                    "the engine's event streams are all taken: asking again in {} s",
                    wait.as_secs()
                );
                std::thread::sleep(wait.clamp(Duration::from_secs(1), Duration::from_secs(60)));
            }
            Err(e) => return e.to_string(),
        }
    };
    for state in stream {
        match state.map(|s| serde_json::from_str::<Value>(&s)) {
            Ok(Ok(state)) => on_state(state),
            Ok(Err(e)) => tracing::warn!("a state the dashboard cannot read: {e}"),
            Err(e) => return e.to_string(),
        }
    }
    "the engine closed the stream".into()
}
