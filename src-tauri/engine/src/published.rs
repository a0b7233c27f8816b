//! What readers see: the state the engine publishes after every sample or command, with the
//! histories readers need inside it (recent watts, intervals, records) as shared rings.
//!
//! Rule: this is the whole of the engine's output. Tray, UI, API and CLI read it and nothing
//! else; it is built on the engine thread and handed out behind an `Arc`, never changed after.

use crate::budget::BudgetAlert;
use crate::ring::Shared;
pub use crate::stages::low_power::LowPowerNow;
pub use crate::stages::meter::{Energy, Point, RECENT_WINDOW};
use serde::Serialize;
use std::sync::Arc;
use wattbar_core::inference::resident::ResidentCost;
use wattbar_core::{Preferences, Snapshot};
use wattbar_ledger::ledger::LedgerTotals;

/// The state every reader sees, in the groups readers take whole.
#[derive(Debug, Clone, Serialize)]
pub struct PublishedState {
    /// Increases with every publication.
    pub seq: u64,
    /// The latest sample; `None` before the first one.
    pub snapshot: Option<Snapshot>,
    /// Shared by every state published until the preferences change.
    pub prefs: Arc<Preferences>,
    pub pace: Pace,
    pub energy: Energy,
    pub kept: LedgerView,
    pub sources: Sources,
    pub low_power: LowPowerNow,
    /// The session's energy drawn from the battery and what it wore.
    pub wear: crate::stages::wear::WearNow,
    pub inference: InferenceNow,
    /// Energy per program, as of the last process read.
    pub programs: Arc<crate::programs::ProgramsView>,
    /// Prices and grid intensities by the slot, where feeds are set.
    pub prices: Arc<crate::stages::prices::PricesView>,
}

/// How often samples are taken.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pace {
    /// The sampling interval the preferences ask for.
    pub interval_ms: u64,
    /// The period samples are taken at now: the preference, slower where a source cannot give
    /// new values that fast (half NVML's counter update period) or while nobody looks and a
    /// counter keeps the energy exact ([`crate::stages::rest`]), faster while an inference
    /// request is measured.
    pub period_ms: u64,
    /// Why the engine samples at its awake pace rather than resting; `None` while it rests
    /// ([`crate::stages::rest::Rest::awake_because`]).
    pub awake_because: Option<&'static str>,
}

/// What the ledger keeps: totals, the committed counters and what it has to say.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerView {
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
    /// The lifetime counters (per scope, per domain, cost, per model) as the store committed
    /// them: what every exported counter reads, so that none goes back after a crash.
    /// Replaced after each batch written, shared until then.
    pub committed: Arc<crate::recorder::committed::CommittedTotals>,
    /// The headline's joules measured since the last batch written: not yet in `committed`.
    pub unwritten_joules: f64,
    /// Inference records settled since the last batch written, likewise; `None` without a
    /// ledger.
    pub unwritten_records: Option<usize>,
    /// Something the user should know, e.g. a damaged database that was replaced.
    pub notice: Option<String>,
    /// Budget alerts given at the last batch; `alert_seq` increases with each new set.
    pub alerts: Vec<BudgetAlert>,
    pub alert_seq: u64,
}

/// The chain's sources.
#[derive(Debug, Clone, Serialize)]
pub struct Sources {
    /// The id of every source in the chain, best first.
    pub ids: Vec<String>,
    /// How often each source was read and how long its reads took, counted live.
    #[serde(skip)]
    pub reads: Arc<[wattbar_core::chain::ReadCounter]>,
}

/// Inference energy: the records' figures, what is in flight, resident models and servers.
#[derive(Debug, Clone, Serialize)]
pub struct InferenceNow {
    /// Inference records, per-model figures and the idle baseline; a new `seq` with each change.
    pub view: Arc<crate::inference::InferenceView>,
    /// Requests in flight through the proxy.
    pub inflight: usize,
    /// The models they asked for, sorted, each once (what low-power mode must not unload).
    #[serde(skip)]
    pub models_in_flight: Arc<[String]>,
    /// What each model the server holds (or held today) costs by staying loaded; empty until
    /// the proxy has read the loaded models.
    pub resident: Arc<[ResidentCost]>,
    /// Model servers followed by their own counters, and their last windows (`/v1/server-metrics`).
    #[serde(skip)]
    pub servers: Arc<crate::server_metrics::ServerMetricsView>,
    /// The measured intervals of the last
    /// [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP), oldest first.
    #[serde(skip)]
    pub intervals: Shared<wattbar_core::inference::Interval>,
    /// The last [`RECENT_RECORDS`](crate::inference::book::RECENT_RECORDS) inference records,
    /// oldest first.
    #[serde(skip)]
    pub records: Shared<wattbar_core::inference::Record>,
    /// Every graded profile kept, oldest first.
    pub profiles: Arc<[wattbar_core::eval::best::KeptProfile]>,
    /// The proxy's keys and where each budget stands (never a secret).
    pub keys: Arc<[crate::keys::KeyView]>,
}
