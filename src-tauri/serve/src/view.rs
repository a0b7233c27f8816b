//! What every reader of the engine shows: the payloads the dashboard receives, whether over Tauri
//! IPC in the app or over the HTTP API (`/v1/snapshot`, `/v1/stream`) in a browser. One shape for
//! both, so the UI has one code path.

use serde::{Deserialize, Serialize};
use wattbar_core::{Coverage, Domain, Part, Quality, Scope, Unavailable, JOULES_PER_KWH};
pub use wattbar_engine::advice::LowPowerView;
use wattbar_engine::{Point, PublishedState};
use wattbar_ledger::ledger::LedgerTotals;
use wattbar_ledger::store::{HistoryPoint, Step};

/// Programs the dashboard's "Top programs" lists.
pub const SHOWN_PROGRAMS: usize = 8;

/// The state after one sample: the dashboard's event payload and `/v1/snapshot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatePayload {
    pub seq: u64,
    /// Time of the sample, seconds since the Unix epoch; `None` before the first sample.
    pub at: Option<f64>,
    /// Headline watts; `None` when nothing could be read (shown as "—", never 0).
    pub watts: Option<f64>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    pub domain: Option<Domain>,
    /// What the headline covers: `wall`, `system` (the whole machine) or `components` (only
    /// the parts in `covers`); `None` without a headline.
    pub scope: Option<Scope>,
    #[serde(default)]
    pub covers: Vec<String>,
    /// The same for people: "the whole machine", "the CPU package only".
    pub scope_text: Option<String>,
    /// The wall meter's watts while it reads (then the headline), `None` without one.
    pub wall_watts: Option<f64>,
    /// The machine's own sensors' figure beside a reading wall meter, and what it covers: the
    /// two set side by side ("the sensors see 62 % of the wall here").
    pub sensors_watts: Option<f64>,
    pub sensors_scope_text: Option<String>,
    /// A calibrated headline's bound, watts (the fit's largest held-out error applied to it);
    /// `None` for any other headline.
    pub bound_watts: Option<f64>,
    pub unavailable: Vec<Unavailable>,
    /// The session's energy drawn from the battery and its wear, where the machine has one.
    #[serde(default)]
    pub battery_drawn: Option<BatteryDrawn>,
    /// Readings left out because their counter stopped while the machine was busy, with why.
    #[serde(default)]
    pub stalled: Vec<wattbar_core::chain::Stalled>,
    /// Every reading of the sample, best source first.
    pub breakdown: Vec<BreakdownItem>,
    pub session_kwh: f64,
    /// The same as `session_kwh`, in joules, unrounded.
    pub session_joules: f64,
    /// How the last sample's energy was found: `counter` (hardware energy counters for every
    /// part of the headline) or `trapezoid` (power samples integrated).
    pub energy_method: Option<wattbar_core::meter::Method>,
    pub session_cost: f64,
    /// What the session's energy and cost cover (the headline's scope); what the session
    /// measured in other scopes, never added; and when the scope changed in it.
    pub session_scope: Option<Scope>,
    pub session_other_scopes: Vec<wattbar_core::session::ScopeTally>,
    pub session_scope_changes: Vec<wattbar_core::session::ScopeChange>,
    pub currency: String,
    pub price_per_kwh: f64,
    pub low_power: LowPowerView,
    /// macOS Low Power Mode (`pmset -g`); `None` where there is none.
    pub os_low_power_mode: Option<bool>,
    pub interval_ms: u64,
    /// The period samples are taken at now (see [`PublishedState::period_ms`]).
    pub period_ms: u64,
    /// Something the user should know (e.g. the energy database was damaged and replaced).
    pub notice: Option<String>,
    pub carbon_g: Option<f64>,
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
    /// Inference: the last records, the figures per model, the idle baseline and the score.
    pub inference: std::sync::Arc<wattbar_engine::inference::InferenceView>,
    /// What each model the server holds (or held today) costs by staying loaded.
    pub resident: std::sync::Arc<[wattbar_core::inference::resident::ResidentCost]>,
    /// The programs drawing the most watts over the last process window.
    pub programs: wattbar_engine::programs::Top,
    /// Requests in flight through the inference proxy.
    pub inflight: usize,
    /// Each model's newest graded profile per evaluation, newest first (`wattbar-cli profile`).
    #[serde(default)]
    pub profiles: Vec<wattbar_core::eval::best::KeptProfile>,
    /// Each model's energy class A–G per scope, from its newest profile there.
    #[serde(default)]
    pub energy_classes: Vec<wattbar_core::eval::class::ModelClass>,
    /// Of the session's kWh, what a price feed had no slot for: priced by the fallback.
    #[serde(default)]
    pub session_fallback_kwh: f64,
    /// Prices and grid intensities by the slot, where feeds are set: the slots from a day back,
    /// the value now, the cheapest two hours ahead, and why a feed gave nothing.
    #[serde(default)]
    pub prices: std::sync::Arc<wattbar_engine::stages::prices::PricesView>,
    /// The proxy's keys, each budget's spend and what remains (never a secret).
    #[serde(default)]
    pub keys: std::sync::Arc<[wattbar_engine::keys::KeyView]>,
    /// The models counted from their servers' own `/metrics`, as committed.
    #[serde(default)]
    pub server_models: Vec<
        wattbar_core::inference::server_totals::Sourced<
            wattbar_core::inference::server_totals::ServerModel,
        >,
    >,
}

/// A stretch of stored history (`/v1/history`, the dashboard's history tabs).
#[derive(Debug, Clone, Serialize)]
pub struct HistoryPayload {
    pub range: String,
    pub step_seconds: i64,
    /// The headline (`system`), one point per bucket and scope; empty when a domain filter
    /// leaves it out.
    pub points: Vec<HistoryPoint>,
    /// The headline's energy over the range in `scope`, the newest point's; `None` when a domain
    /// filter leaves it out. Energy of other scopes is in `other_scopes_kwh`, never added.
    pub kwh: Option<f64>,
    pub scope: Option<Scope>,
    /// kWh per other scope (`unrecorded`: kept before scopes were).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub other_scopes_kwh: std::collections::BTreeMap<&'static str, f64>,
    /// When the headline's scope changed in the range (a plug added, unplugged, back).
    pub scope_changes: Vec<wattbar_ledger::store::scopes::ScopeChange>,
    /// Per breakdown domain, when asked for (`?domain=cpu,gpu`, `*` for all).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<wattbar_ledger::store::domains::DomainPoint>,
}

impl HistoryPayload {
    /// The payload of `points`, its energy in `scope` (the headline's now), other scopes apart;
    /// `None` there: the newest point's.
    pub fn new(range: String, step: Step, points: Vec<HistoryPoint>, scope: Option<Scope>) -> Self {
        let scope = scope.or_else(|| points.last().and_then(|p| p.scope));
        let mut joules = 0.0;
        let mut other_scopes_kwh = std::collections::BTreeMap::new();
        for p in &points {
            if p.scope == scope {
                joules += p.joules;
            } else {
                let name = Scope::shown(p.scope);
                *other_scopes_kwh.entry(name).or_default() += p.joules / JOULES_PER_KWH;
            }
        }
        HistoryPayload {
            range,
            step_seconds: step.seconds(),
            kwh: Some(joules / JOULES_PER_KWH),
            scope,
            other_scopes_kwh,
            scope_changes: Vec::new(),
            points,
            domains: Vec::new(),
        }
    }
}

/// One line of the dashboard's breakdown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BreakdownItem {
    pub domain: Domain,
    pub device: Option<String>,
    pub watts: Option<f64>,
    pub source: String,
    pub quality: Quality,
    pub scope: Scope,
    #[serde(default)]
    pub covers: Vec<String>,
    /// The energy this reading's part has added since the engine started, as the ledger counts
    /// it: a counter (take differences between states). `None` where it adds nothing that counts
    /// (another source owns the domain), never 0 J for "not known".
    pub total_joules: Option<f64>,
}

/// The session's energy drawn from the battery so far and what it wore
/// ([`wattbar_engine::stages::wear`]): counters that only grow, so a window's share is the
/// difference of two.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatteryDrawn {
    /// The machine runs on its battery at this sample.
    pub on_battery: bool,
    pub joules: f64,
    /// Drawn with no rate to price its wear.
    pub unpriced_joules: f64,
    pub wear: f64,
    pub currency: String,
    /// The rate in force, per kWh drawn; `None` where wear cannot be priced now.
    #[serde(default)]
    pub per_kwh: Option<f64>,
    /// Why wear is not priced now; `None` while it is.
    #[serde(default)]
    pub unpriced_because: Option<String>,
}

impl From<&PublishedState> for StatePayload {
    fn from(p: &PublishedState) -> Self {
        let head = p.snapshot.as_ref().and_then(|s| s.headline.as_ref());
        let coverage = p.snapshot.as_ref().and_then(|s| s.coverage());
        let wall = p.snapshot.as_ref().and_then(|s| s.wall_and_sensors());
        StatePayload {
            seq: p.seq,
            at: p.snapshot.as_ref().map(|s| s.at.unix_seconds),
            watts: head.and_then(|h| h.watts).map(|w| w.0),
            quality: head.map(|h| h.quality),
            source: head.map(|h| h.source.clone()),
            domain: head.map(|h| h.domain),
            scope: coverage.as_ref().map(|c| c.scope),
            scope_text: coverage.as_ref().map(Coverage::describe),
            wall_watts: wall.as_ref().map(|(w, _, _)| w.0),
            sensors_watts: wall.as_ref().map(|(_, s, _)| s.0),
            sensors_scope_text: wall.as_ref().map(|(_, _, c)| c.describe()),
            bound_watts: p.energy.calibration.bound_watts,
            covers: coverage.map(|c| c.covers).unwrap_or_default(),
            unavailable: p
                .snapshot
                .as_ref()
                .map(|s| s.unavailable.clone())
                .unwrap_or_default(),
            stalled: p
                .snapshot
                .as_ref()
                .map(|s| s.stalled.clone())
                .unwrap_or_default(),
            battery_drawn: p
                .snapshot
                .as_ref()
                .and_then(|s| s.battery)
                .map(|_| BatteryDrawn {
                    on_battery: p.wear.on_battery,
                    joules: p.wear.session.joules,
                    unpriced_joules: p.wear.session.unpriced_joules,
                    wear: p.wear.session.wear,
                    currency: p.wear.session.currency.clone(),
                    per_kwh: p.wear.per_kwh,
                    unpriced_because: p.wear.unpriced_because.as_deref().map(str::to_string),
                }),
            breakdown: p
                .snapshot
                .as_ref()
                .map(|s| {
                    s.breakdown
                        .iter()
                        .map(|r| {
                            // Compared field by field: no Part is built for each reading.
                            let is_its_part = |q: &Part| {
                                q.domain == r.domain && q.source == r.source && q.device == r.device
                            };
                            let coverage = Coverage::of_domain(r.domain, r.device.as_deref());
                            BreakdownItem {
                                domain: r.domain,
                                device: r.device.clone(),
                                watts: r.watts.map(|w| w.0),
                                source: r.source.clone(),
                                quality: r.quality,
                                scope: coverage.scope,
                                covers: coverage.covers,
                                total_joules: p
                                    .energy
                                    .part_totals
                                    .iter()
                                    .find(|(q, _)| is_its_part(q))
                                    .map(|(_, j)| *j),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default(),
            session_kwh: p.energy.session.kwh,
            session_joules: p.energy.session.joules.0,
            energy_method: p.energy.method,
            session_cost: p.energy.session.cost,
            session_scope: p.energy.session.scope,
            session_other_scopes: p.energy.session.other_scopes.clone(),
            session_scope_changes: p.energy.session.scope_changes.clone(),
            currency: p.energy.session.currency.to_string(),
            price_per_kwh: p.energy.price_per_kwh,
            low_power: LowPowerView::from(p),
            os_low_power_mode: p.low_power.os_mode,
            interval_ms: p.pace.interval_ms,
            period_ms: p.pace.period_ms,
            notice: p.kept.notice.clone(),
            carbon_g: p.energy.session.carbon_g,
            totals: p.kept.totals.clone(),
            inference: std::sync::Arc::clone(&p.inference.view),
            resident: std::sync::Arc::clone(&p.inference.resident),
            programs: p
                .programs
                .top(SHOWN_PROGRAMS, wattbar_engine::programs::Sort::Watts),
            inflight: p.inference.inflight,
            profiles: wattbar_core::eval::best::newest_per_model(&p.inference.profiles),
            energy_classes: wattbar_core::eval::class::classes(&p.inference.profiles),
            session_fallback_kwh: p.energy.session.fallback_kwh,
            prices: std::sync::Arc::clone(&p.prices),
            keys: std::sync::Arc::clone(&p.inference.keys),
            server_models: p
                .kept
                .committed
                .server_totals
                .iter()
                .map(wattbar_core::inference::server_totals::ServerTotal::listed)
                .collect(),
        }
    }
}

/// What the dashboard loads first: the state now and the recent watts for the sparklines.
#[derive(Debug, Clone, Serialize)]
pub struct DashboardPayload {
    pub state: StatePayload,
    pub history: Vec<Point>,
}

pub use wattbar_ledger::store::range;

#[cfg(test)]
mod tests;
