//! What readers see: the state the engine publishes after every sample or command, with the
//! histories readers need inside it (recent watts, intervals, records) as shared rings.
//!
//! Rule: this is the whole of the engine's output. Tray, UI, API and CLI read it and nothing
//! else; it is built on the engine thread and handed out behind an `Arc`, never changed after.

use crate::budget::BudgetAlert;
use crate::ring::{Ring, Shared};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::resident::ResidentCost;
use wattbar_core::meter::Method;
use wattbar_core::policy::Advice;
use wattbar_core::{LowPowerState, Part, Preferences, SessionTotals, Snapshot};
use wattbar_ledger::ledger::LedgerTotals;

/// The state every reader sees.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// Increases with every publication.
    pub seq: u64,
    /// The latest sample; `None` before the first one.
    pub snapshot: Option<Snapshot>,
    /// The energy each owned part (domain, device, source) has added since the engine started,
    /// by counter or trapezoid as the ledger counts it: a counter, whose differences between two
    /// states are the energy between them however many samples lie between. A part not here has
    /// added nothing that counts (another source owns its domain).
    pub part_totals: Vec<(Part, f64)>,
    pub session: SessionTotals,
    /// How the last sample's headline energy was found: `counter` or `trapezoid`.
    pub energy_method: Option<Method>,
    /// Low-power mode: on or off, since when and why.
    pub low_power: LowPowerState,
    /// The model to run and a sentence for routers.
    pub advice: Advice,
    /// The last change of low-power mode, as a sentence; `low_power_seq` increases with each.
    pub low_power_event: Option<String>,
    pub low_power_seq: u64,
    /// The last few events with their `low_power_seq`, oldest first, so that one reading shows
    /// every event since the last.
    pub low_power_events: Arc<[(u64, String)]>,
    /// macOS Low Power Mode as the system last said (read once a minute); `None` elsewhere.
    pub os_low_power_mode: Option<bool>,
    /// Shared by every state published until the preferences change.
    pub prefs: Arc<Preferences>,
    pub price_per_kwh: f64,
    /// The sampling interval the preferences ask for.
    pub interval_ms: u64,
    /// The period samples are taken at now: the preference, slower where a source cannot give
    /// new values that fast (half NVML's counter update period), faster while an inference
    /// request is measured.
    pub period_ms: u64,
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
    /// The lifetime counters (per scope, per domain, cost, per model) as the store committed
    /// them: what every exported counter reads, so that none goes back after a crash.
    /// Replaced after each batch written, shared until then.
    pub committed: Arc<crate::recorder::committed::Committed>,
    /// The headline's joules measured since the last batch written: not yet in `committed`.
    pub unwritten_joules: f64,
    /// What calibration learned and whether it stands in for the reference now.
    pub calibration: Arc<crate::calibration::CalibrationView>,
    /// The id of every source in the chain, best first.
    pub sources: Vec<String>,
    /// How often each source was read and how long its reads took, counted live.
    #[serde(skip)]
    pub reads: Arc<[wattbar_core::chain::ReadCounter]>,
    /// Something the user should know, e.g. a damaged database that was replaced.
    pub notice: Option<String>,
    /// Budget alerts given at the last batch; `alert_seq` increases with each new set.
    pub alerts: Vec<BudgetAlert>,
    pub alert_seq: u64,
    /// Inference records, per-model figures and the idle baseline; a new `seq` with each change.
    pub inference: Arc<crate::inference::InferenceView>,
    /// Requests in flight through the proxy.
    pub inflight: usize,
    /// The models they asked for, sorted, each once (what low-power mode must not unload).
    #[serde(skip)]
    pub models_in_flight: Arc<[String]>,
    /// What each model the server holds (or held today) costs by staying loaded; empty until
    /// the proxy has read the loaded models.
    pub resident: Arc<[ResidentCost]>,
    /// Energy per program, as of the last process read.
    pub programs: Arc<crate::programs::ProgramsView>,
    /// Model servers followed by their own counters, and their last windows (`/v1/server-metrics`).
    #[serde(skip)]
    pub server_metrics: Arc<crate::server_metrics::ServerMetricsView>,
    /// Headline watts over the last [`RECENT_WINDOW`], oldest first.
    #[serde(skip)]
    pub history: Shared<Point>,
    /// The measured intervals of the last
    /// [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP), oldest first.
    #[serde(skip)]
    pub intervals: Shared<wattbar_core::inference::Interval>,
    /// The last [`RECENT_RECORDS`](crate::inference::book::RECENT_RECORDS) inference records,
    /// oldest first.
    #[serde(skip)]
    pub records: Shared<wattbar_core::inference::Record>,
}

/// One point of the recent-watts history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Wall-clock time, seconds since the Unix epoch.
    pub t: f64,
    /// `None` where no headline could be read: a hole in the line, not a zero.
    pub watts: Option<f64>,
}

/// How much recent history the engine keeps for sparklines.
pub const RECENT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Adds a point and forgets what is older than [`RECENT_WINDOW`] or, after the wall clock went
/// back, newer than the point itself.
pub(crate) fn remember(recent: &mut Ring<Point>, point: Point) {
    while recent.back().is_some_and(|p| p.t > point.t) {
        recent.pop_back();
    }
    recent.push_back(point);
    let oldest = point.t - RECENT_WINDOW.as_secs_f64();
    while recent.front().is_some_and(|p| p.t < oldest) {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_points_older_than_the_window_or_after_a_backward_step_are_forgotten() {
        let mut recent = Ring::default();
        let at = |t: f64| Point {
            t,
            watts: Some(1.0),
        };
        for t in [0.0, 100.0, 200.0, 301.0] {
            remember(&mut recent, at(t));
        }
        let ts = |r: &Ring<Point>| r.iter().map(|p| p.t).collect::<Vec<_>>();
        assert_eq!(ts(&recent), vec![100.0, 200.0, 301.0]);
        // The wall clock went back by 150 s.
        remember(&mut recent, at(151.0));
        assert_eq!(ts(&recent), vec![100.0, 151.0]);
    }
}
