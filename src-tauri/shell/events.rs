//! The contract with the UI: event names, command names and payloads. `ui/js/contract.js`
//! mirrors the names; a test keeps the two in step.

use serde::Serialize;
use wattbar_core::{Domain, Quality, Unavailable};
use wattbar_engine::ledger::LedgerTotals;
use wattbar_engine::store::{HistoryPoint, Step};
use wattbar_engine::{Point, Published};

/// Emitted to the dashboard after every publication, only while the window exists.
pub const STATE_CHANGED: &str = "wattbar:state";

/// Command names, as the UI invokes them.
pub const CMD_GET_DASHBOARD: &str = "get_dashboard";
pub const CMD_SET_PRICE: &str = "set_price";
pub const CMD_SET_LOW_POWER: &str = "set_low_power";
pub const CMD_RESET_SESSION: &str = "reset_session";
pub const CMD_GET_HISTORY: &str = "get_history";

/// Payload of [`STATE_CHANGED`].
#[derive(Debug, Clone, Serialize)]
pub struct StatePayload {
    pub seq: u64,
    /// Time of the sample, seconds since the Unix epoch; `None` before the first sample.
    pub at: Option<f64>,
    /// Headline watts; `None` when nothing could be read (shown as "—", never 0).
    pub watts: Option<f64>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    pub domain: Option<Domain>,
    pub unavailable: Vec<Unavailable>,
    /// Every reading of the sample, best source first.
    pub breakdown: Vec<BreakdownItem>,
    pub session_kwh: f64,
    pub session_cost: f64,
    pub currency: String,
    pub price_per_kwh: f64,
    pub low_power: bool,
    /// Something the user should know (e.g. the energy database was damaged and replaced).
    pub notice: Option<String>,
    pub carbon_g: Option<f64>,
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
}

/// Reply of [`CMD_GET_HISTORY`].
#[derive(Debug, Clone, Serialize)]
pub struct HistoryPayload {
    pub range: String,
    pub step_seconds: i64,
    pub points: Vec<HistoryPoint>,
    pub kwh: f64,
}

impl HistoryPayload {
    pub fn new(range: String, step: Step, points: Vec<HistoryPoint>) -> Self {
        let joules: f64 = points.iter().map(|p| p.joules).sum();
        HistoryPayload {
            range,
            step_seconds: step.seconds(),
            kwh: joules / wattbar_core::JOULES_PER_KWH,
            points,
        }
    }
}

/// One line of the dashboard's breakdown.
#[derive(Debug, Clone, Serialize)]
pub struct BreakdownItem {
    pub domain: Domain,
    pub device: Option<String>,
    pub watts: Option<f64>,
    pub source: String,
    pub quality: Quality,
}

impl From<&Published> for StatePayload {
    fn from(p: &Published) -> Self {
        let head = p.snapshot.as_ref().and_then(|s| s.headline.as_ref());
        StatePayload {
            seq: p.seq,
            at: p.snapshot.as_ref().map(|s| s.at.unix_seconds),
            watts: head.and_then(|h| h.watts).map(|w| w.0),
            quality: head.map(|h| h.quality),
            source: head.map(|h| h.source.clone()),
            domain: head.map(|h| h.domain),
            unavailable: p
                .snapshot
                .as_ref()
                .map(|s| s.unavailable.clone())
                .unwrap_or_default(),
            breakdown: p
                .snapshot
                .as_ref()
                .map(|s| {
                    s.breakdown
                        .iter()
                        .map(|r| BreakdownItem {
                            domain: r.domain,
                            device: r.device.clone(),
                            watts: r.watts.map(|w| w.0),
                            source: r.source.clone(),
                            quality: r.quality,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            session_kwh: p.session.kwh,
            session_cost: p.session.cost,
            currency: p.session.currency.to_string(),
            price_per_kwh: p.price_per_kwh,
            low_power: p.low_power,
            notice: p.notice.clone(),
            carbon_g: p.session.carbon_g,
            totals: p.totals,
        }
    }
}

/// Reply of [`CMD_GET_DASHBOARD`]: the state now and the recent watts for the sparkline.
#[derive(Debug, Clone, Serialize)]
pub struct DashboardPayload {
    pub state: StatePayload,
    pub history: Vec<Point>,
}

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
        ] {
            let line = format!("export const {js_name} = \"{value}\";");
            assert!(js.contains(&line), "ui/js/contract.js lacks {line}");
        }
    }
}
