//! The lifetime counters others build on, as the store committed them.
//!
//! Rule: a counter read by another program (Prometheus, an OTLP backend, Home Assistant) never
//! goes back. A process killed between two batches restarts from what the store committed, so a
//! counter that showed anything not yet committed would be taken back by a crash, and Prometheus
//! would book the whole counter again as a reset. These figures therefore change only after a
//! batch is committed, and are then read back from the store: a restart reads exactly what was
//! last exported, never less. What was measured since the last batch is published apart, as a
//! gauge ([`CommittedTotals::unwritten_joules`] is the recorder's, not the store's).
//!
//! Without a store nothing is committed and there are no lifetime counters.

use serde::Serialize;
use wattbar_core::inference::server_totals::ServerTotal;
use wattbar_core::inference::ModelStats;
use wattbar_core::Scope;
use wattbar_ledger::store::money::LifetimeCost;
use wattbar_ledger::store::wear::Worn;
use wattbar_ledger::store::Total;

/// What the store holds as of its last committed batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CommittedTotals {
    /// When the store's first session began, Unix seconds: where every lifetime counter starts
    /// (an OTLP sum's start time), the same across restarts.
    pub since_unix: Option<f64>,
    /// The time of the newest sample committed, Unix seconds: the moment the energy figures
    /// are of (`None` where the store holds no recent sample).
    pub through_unix: Option<f64>,
    /// The headline's lifetime joules per scope (`None`: recorded before scopes were kept).
    pub by_scope: Vec<(Option<Scope>, f64)>,
    /// Lifetime joules per breakdown domain (cpu, gpu, wall, …).
    pub by_domain: Vec<(String, f64)>,
    /// The headline's lifetime energy and cost, every scope and currency listed
    /// ([`Total::rows`]).
    pub lifetime: Option<Total>,
    /// What the headline's energy was paid and credited over the store's life, per scope and
    /// currency: two counters that never go back, whatever the sign of a price.
    pub costs: Vec<LifetimeCost>,
    /// Per model, the energy it drew loaded and idle over every stored day.
    pub resident_idle: Vec<(String, f64)>,
    /// Per-model inference totals over every record committed (pruned ones included).
    pub models: Vec<ModelStats>,
    /// Per model server and model: the tokens and energy of every window counted with its
    /// energy known.
    pub server_totals: Vec<ServerTotal>,
    /// Per proxy key, scope and outcome: its requests and the joules it was charged.
    pub keys: Vec<wattbar_ledger::store::keys::KeyTotal>,
    /// Energy drawn from the battery and its wear over the store's life, per currency.
    pub wear: Vec<Worn>,
    /// The same over the local day of the newest sample committed.
    pub wear_today: Vec<Worn>,
}

impl CommittedTotals {
    /// The headline's lifetime joules across scopes, each interval counted in the one scope the
    /// headline had when it was drawn (the rule of
    /// [`AcrossScopes`](wattbar_ledger::store::AcrossScopes)): 0 for a store that holds none
    /// yet, `None` without a store.
    pub fn joules_across_scopes(&self) -> Option<f64> {
        self.since_unix?;
        let sum: f64 = self.by_scope.iter().map(|(_, j)| *j).sum();
        sum.is_finite().then_some(sum)
    }

    /// What was paid in `currency` over the store's life, across scopes; `None` without a
    /// store. Never goes back (see [`LifetimeCost`]).
    pub fn paid_in(&self, currency: &str) -> Option<f64> {
        self.money_in(currency, |c| c.paid)
    }

    /// What was credited in `currency` (negative prices), as a positive amount; never goes
    /// back.
    pub fn credit_in(&self, currency: &str) -> Option<f64> {
        self.money_in(currency, |c| c.credit)
    }

    fn money_in(&self, currency: &str, part: impl Fn(&LifetimeCost) -> f64) -> Option<f64> {
        self.since_unix?;
        let sum: f64 = self
            .costs
            .iter()
            .filter(|c| c.currency == currency)
            .map(part)
            .sum();
        sum.is_finite().then_some(sum)
    }

    /// The lifetime net cost in `currency` across scopes (money in another currency is not
    /// converted): below 0 where credits outweigh; `None` without a store.
    pub fn cost_in(&self, currency: &str) -> Option<f64> {
        let sum: f64 = self
            .lifetime
            .as_ref()?
            .rows()
            .into_iter()
            .filter(|(_, c, _, _)| c == currency)
            .map(|(_, _, _, amount)| amount)
            .sum();
        sum.is_finite().then_some(sum)
    }
}
