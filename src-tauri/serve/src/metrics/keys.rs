//! Each proxy key's energy and requests, from the totals the ledger committed: they never go
//! back, across crashes, restarts and the pruning of records.

use super::{label, CounterF, Text};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use wattbar_engine::PublishedState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EnergyLabels {
    key: Text,
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    key: Text,
    outcome: Text,
}

/// `wattbar_key_energy_joules_total{key,scope}`: what each key was charged, per scope of the
/// records' energy (empty where not known); `wattbar_key_requests_total{key,outcome}`: its
/// requests by outcome (`ok`, `cancelled`, `error`, `budget_exceeded`).
pub(super) fn keys(registry: &mut Registry, p: &PublishedState) {
    let totals = &p.kept.committed.keys;
    if totals.is_empty() {
        return;
    }
    let mut joules: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    let mut requests: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for t in totals {
        if t.outcome != wattbar_ledger::store::keys::BUDGET_EXCEEDED {
            *joules
                .entry((t.key.as_str(), wattbar_core::Scope::label(t.scope)))
                .or_default() += t.joules;
        }
        let n = requests
            .entry((t.key.as_str(), t.outcome.as_str()))
            .or_default();
        *n = n.saturating_add(t.requests);
    }
    let energy = Family::<EnergyLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_key_energy",
        "Energy charged to each proxy key, per scope",
        Unit::Joules,
        energy.clone(),
    );
    for ((key, scope), j) in joules {
        if j.is_finite() && j >= 0.0 {
            energy
                .get_or_create(&EnergyLabels {
                    key: label(key),
                    scope: label(scope),
                })
                .inc_by(j);
        }
    }
    let counted = Family::<OutcomeLabels, Counter>::default();
    registry.register(
        "wattbar_key_requests",
        "Requests made with each proxy key, per outcome",
        counted.clone(),
    );
    for ((key, outcome), n) in requests {
        counted
            .get_or_create(&OutcomeLabels {
                key: label(key),
                outcome: label(outcome),
            })
            .inc_by(n);
    }
}
