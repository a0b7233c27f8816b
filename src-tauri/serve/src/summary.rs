//! One machine at a glance (`GET /v1/summary`): what a fleet view asks every machine for, every
//! second or so, so it is small and costs one pass over the published state.
//!
//! Rules:
//! - Unknown is `null`, never 0: no headline gives `watts: null` and the reason in `unavailable`;
//!   no stored totals yet gives `today: null`.
//! - The sample's age is taken here, by this machine's clock: a fleet's clocks need not agree.
//! - Today's energy and cost are the ledger's (this machine's calendar day, as of the last
//!   batch), across scopes with the scopes listed: the same figures as the menu's "Today" line
//!   and the sum of `wattbar_today_energy_joules` over its scopes.

use serde::{Deserialize, Serialize};
use wattbar_core::{Quality, Scope};
use wattbar_engine::programs::Sort;
use wattbar_engine::PublishedState;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// This machine's host name, where it has one.
    pub host: Option<String>,
    /// Time of the last sample, seconds since the Unix epoch; `None` before the first.
    pub at: Option<f64>,
    /// Seconds since the last sample, by this machine's clock.
    pub age_seconds: Option<f64>,
    /// The period samples are taken at now, seconds.
    pub period_seconds: f64,
    /// The headline, what the menu bar shows.
    pub watts: Option<f64>,
    pub scope: Option<Scope>,
    #[serde(default)]
    pub covers: Vec<String>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    /// Why there is no headline (each source's reason), when there is none.
    pub unavailable: Option<String>,
    pub today: Option<Today>,
    pub low_power: bool,
    /// The program drawing the most watts over the last process window.
    pub top_program: Option<TopProgram>,
}

/// Today's energy and cost as one figure: across scopes, as the menu's Today line has it
/// ([`AcrossScopes`](wattbar_ledger::store::AcrossScopes)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Today {
    pub kwh: f64,
    pub cost: f64,
    pub currency: String,
    /// The headline's scope now.
    pub scope: Option<Scope>,
    /// Every scope today's figure holds, the headline's first.
    #[serde(default)]
    pub scopes: Vec<Option<Scope>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopProgram {
    /// `ollama (llama3.1:8b)`: the program, with the models it serves.
    pub name: String,
    pub watts: Option<f64>,
}

impl Summary {
    /// The summary of `p`, `host` and `now_unix` being this machine's.
    pub fn new(p: &PublishedState, host: Option<String>, now_unix: f64) -> Summary {
        let snapshot = p.snapshot.as_ref();
        let head = snapshot.and_then(|s| s.headline.as_ref());
        let coverage = snapshot.and_then(|s| s.coverage());
        let at = snapshot.map(|s| s.at.unix_seconds);
        let watts = head.and_then(|h| h.watts).map(|w| w.0);
        let unavailable = match (watts, snapshot) {
            (None, Some(s)) if !s.unavailable.is_empty() => Some(
                s.unavailable
                    .iter()
                    .map(|u| format!("{}: {}", u.source, u.reason))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            (None, Some(_)) => Some("no source could be read".to_string()),
            (None, None) => Some("no sample yet".to_string()),
            (Some(_), _) => None,
        };
        let top = p.programs.top(1, Sort::Watts);
        Summary {
            host,
            at,
            age_seconds: at.map(|at| (now_unix - at).max(0.0)),
            period_seconds: p.pace.period_ms as f64 / 1000.0,
            watts,
            scope: coverage.as_ref().map(|c| c.scope),
            covers: coverage.map(|c| c.covers).unwrap_or_default(),
            quality: head.map(|h| h.quality),
            source: head.map(|h| h.source.clone()),
            unavailable,
            today: p.kept.totals.as_ref().map(|t| {
                let across = t.today.across_scopes();
                Today {
                    kwh: across.kwh,
                    cost: across.cost,
                    currency: t.today.currency.clone(),
                    scope: t.today.scope,
                    scopes: across.scopes,
                }
            }),
            low_power: p.low_power.state.enabled,
            top_program: top.programs.first().map(|f| TopProgram {
                name: f.shown_name(),
                watts: f.watts,
            }),
        }
    }
}

/// This machine's host name, as the kernel has it now.
pub fn host_name() -> Option<String> {
    sysinfo::System::host_name().filter(|h| !h.is_empty())
}

/// The headline's committed lifetime energy, joules: every scope's, each joule once; `None`
/// without a store.
pub fn lifetime_joules(p: &PublishedState) -> Option<f64> {
    p.kept.committed.joules_across_scopes()
}
