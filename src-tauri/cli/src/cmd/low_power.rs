//! `wattbar-cli low-power on|off|status`: through the running engine's API.

use anyhow::Result;
use std::net::SocketAddr;

/// `low-power on|off|status` at `api`, or at the running engine's API.
pub fn low_power(state: crate::args::LowPowerArg, api: Option<SocketAddr>) -> Result<()> {
    use crate::args::LowPowerArg;
    let client = match (api, crate::client::running()?) {
        (Some(api), _) => crate::client::at(&api.to_string())?,
        (None, Some(client)) => client,
        (None, None) => crate::client::at(wattbar_serve::api::DEFAULT_LISTEN)?,
    };
    let body = match state {
        LowPowerArg::Status => client.get("/v1/low-power")?,
        on_off => client.put(
            "/v1/low-power",
            &serde_json::json!({ "enabled": on_off == LowPowerArg::On }),
        )?,
    };
    crate::out!("{body}")?;
    Ok(())
}
