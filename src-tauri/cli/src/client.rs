//! Talking to the running engine. There is at most one per data folder; its lock file names its
//! pid and API address, so commands that change something go through it instead of the store.
//! Every call goes through [`wattbar_client::Client`]: one client, with timeouts.

use anyhow::Result;
pub use wattbar_client::Client;
use wattbar_engine::home::paths;

/// The engine recording into this data folder, if one runs; an error for one that serves no
/// API (`wattbar-cli watch`), saying what to do.
pub fn running() -> Result<Option<Client>> {
    Ok(Client::running(&paths::data_dir()?)?)
}

/// The API at `api` (`host:port`), with this data folder's token for writes.
pub fn at(api: &str) -> Result<Client> {
    Ok(Client::at(api).with_dir(&paths::data_dir()?))
}
