//! The contract with the UI: event names, command names and payloads. `ui/js/contract.js`
//! mirrors the names; a test keeps the two in step.

pub use wattbar_engine::view::{
    BreakdownItem, DashboardPayload, HistoryPayload, LowPowerView, StatePayload,
};

/// Emitted to the dashboard after every publication, only while the window exists.
pub const STATE_CHANGED: &str = "wattbar:state";

/// Command names, as the UI invokes them.
pub const CMD_GET_DASHBOARD: &str = "get_dashboard";
pub const CMD_SET_PRICE: &str = "set_price";
pub const CMD_SET_LOW_POWER: &str = "set_low_power";
pub const CMD_RESET_SESSION: &str = "reset_session";
pub const CMD_GET_HISTORY: &str = "get_history";
pub const CMD_GET_PREFERENCES: &str = "get_preferences";
pub const CMD_SET_PREFERENCE: &str = "set_preference";
pub const CMD_OPEN_PREFERENCES: &str = "open_preferences";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_js_contract_mirrors_every_name() {
        let js = include_str!("../../ui/js/contract.js");
        for (js_name, value) in [
            ("STATE_CHANGED", STATE_CHANGED),
            ("CMD_GET_DASHBOARD", CMD_GET_DASHBOARD),
            ("CMD_SET_PRICE", CMD_SET_PRICE),
            ("CMD_SET_LOW_POWER", CMD_SET_LOW_POWER),
            ("CMD_RESET_SESSION", CMD_RESET_SESSION),
            ("CMD_GET_HISTORY", CMD_GET_HISTORY),
            ("CMD_GET_PREFERENCES", CMD_GET_PREFERENCES),
            ("CMD_SET_PREFERENCE", CMD_SET_PREFERENCE),
            ("CMD_OPEN_PREFERENCES", CMD_OPEN_PREFERENCES),
        ] {
            let line = format!("export const {js_name} = \"{value}\";");
            assert!(js.contains(&line), "ui/js/contract.js lacks {line}");
        }
    }
}
