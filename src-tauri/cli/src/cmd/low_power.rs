//! `wattbar-cli low-power on|off|status`: through the running engine's API.

use anyhow::Result;
use std::net::SocketAddr;

/// `low-power on|off|status` at `api`, or at the running engine's API.
pub fn low_power(state: crate::args::LowPowerArg, api: Option<SocketAddr>) -> Result<()> {
    use crate::args::LowPowerArg;
    let api = match (api, crate::client::running()?) {
        (Some(api), _) => api.to_string(),
        (None, Some(holder)) => crate::client::api_of(&holder)?,
        (None, None) => wattbar_engine::api::DEFAULT_LISTEN.to_string(),
    };
    let url = format!("http://{api}/v1/low-power");
    let body = match state {
        LowPowerArg::Status => crate::client::call(ureq::get(&url), None)?,
        on_off => crate::client::call(
            ureq::put(&url).set(
                "Authorization",
                &format!("Bearer {}", crate::client::token()?),
            ),
            Some(serde_json::json!({ "enabled": on_off == LowPowerArg::On })),
        )?,
    };
    crate::out!("{body}")?;
    Ok(())
}
