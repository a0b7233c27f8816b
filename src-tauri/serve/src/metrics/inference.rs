//! The per-model inference counters, the resident models' cost, the energy per program and what
//! model servers counted themselves, in the same registry as the rest of `/metrics`.

use super::{label, CounterF, GaugeF, Text};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use wattbar_core::inference::server_totals::UNNAMED_MODEL;
use wattbar_engine::PublishedState;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: Text,
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResidentLabels {
    model: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: Text,
    kind: Text,
    scope: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    model: Text,
    status: Text,
    scope: Text,
}

/// Per-model inference counters, from every record the ledger committed: J per token over any
/// range is `rate(energy) / rate(tokens{kind="completion"})`. Each is per `scope` of the
/// records' energy (empty where not known), so that the joules and the tokens they were spent on
/// pair up, and joules of two scopes are never one series.
pub(super) fn inference(registry: &mut Registry, p: &PublishedState) {
    let energy = Family::<ModelLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_inference_energy",
        "Local energy charged to inference requests, per model",
        Unit::Joules,
        energy.clone(),
    );
    let tokens = Family::<TokenLabels, Counter>::default();
    registry.register(
        "wattbar_inference_tokens",
        "Tokens the servers reported, per model and kind (prompt, completion)",
        tokens.clone(),
    );
    let requests = Family::<StatusLabels, Counter>::default();
    registry.register(
        "wattbar_inference_requests",
        "Inference requests, per model and status (ok, cancelled, error, remote)",
        requests.clone(),
    );
    for m in &p.kept.committed.models {
        let scope = label(wattbar_core::Scope::label(m.scope));
        if m.energy_joules.is_finite() && m.energy_joules >= 0.0 {
            energy
                .get_or_create(&ModelLabels {
                    model: label(&m.model),
                    scope: scope.clone(),
                })
                .inc_by(m.energy_joules);
        }
        for (kind, n) in [
            ("prompt", m.prompt_tokens),
            ("completion", m.completion_tokens),
        ] {
            tokens
                .get_or_create(&TokenLabels {
                    model: label(&m.model),
                    kind: label(kind),
                    scope: scope.clone(),
                })
                .inc_by(n);
        }
        for (status, n) in &m.requests_by_status {
            requests
                .get_or_create(&StatusLabels {
                    model: label(&m.model),
                    status: label(status),
                    scope: scope.clone(),
                })
                .inc_by(*n);
        }
    }
    resident(registry, p);
    programs(registry, p);
    servers(registry, p);
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: Text,
    model: Text,
    scope: Text,
    covers: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerTokenLabels {
    server: Text,
    model: Text,
    scope: Text,
    covers: Text,
    kind: Text,
}

/// What the model servers followed by their own counters made, and the energy of the windows they
/// made it in, over every window the ledger committed with its energy known: they never go back,
/// across crashes and restarts. A server that names no model (llama.cpp, TGI) is
/// `model="(unnamed)"`. Each is per `scope` of the energy (`wall`, `system`, `components`, empty
/// where not known) and the parts it `covers` (`gpu:0` for a server's own share of a GPU):
/// joules of two scopes are different quantities, and the tokens beside each are those its
/// joules were spent on.
fn servers(registry: &mut Registry, p: &PublishedState) {
    let totals = &p.kept.committed.server_totals;
    if totals.is_empty() && p.inference.servers.servers.is_empty() {
        return;
    }
    let tokens = Family::<ServerTokenLabels, CounterF>::default();
    registry.register(
        "wattbar_server_tokens",
        "Tokens a model server counted in the windows Wattbar measured, per model and kind \
         (prompt, completion)",
        tokens.clone(),
    );
    let energy = Family::<ServerLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_server_energy",
        "Energy of those windows, split by completion tokens between models",
        Unit::Joules,
        energy.clone(),
    );
    for t in totals {
        let server = label(&t.server);
        let model = label(t.model.as_deref().unwrap_or(UNNAMED_MODEL));
        let scope = label(wattbar_core::Scope::label(t.scope));
        let covers = label(t.covers.join(","));
        for (kind, n) in [
            ("prompt", t.prompt_tokens),
            ("completion", t.completion_tokens),
        ] {
            if n.is_finite() && n >= 0.0 {
                tokens
                    .get_or_create(&ServerTokenLabels {
                        server: server.clone(),
                        model: model.clone(),
                        scope: scope.clone(),
                        covers: covers.clone(),
                        kind: label(kind),
                    })
                    .inc_by(n);
            }
        }
        if t.energy_joules.is_finite() && t.energy_joules >= 0.0 {
            energy
                .get_or_create(&ServerLabels {
                    server: server.clone(),
                    model: model.clone(),
                    scope: scope.clone(),
                    covers: covers.clone(),
                })
                .inc_by(t.energy_joules);
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProgramLabels {
    program: Text,
}

/// Energy per program since the engine started, with `idle` and `unattributed`, which close the
/// sum to the headline's energy over the same windows; and Wattbar's own.
fn programs(registry: &mut Registry, p: &PublishedState) {
    let view = &p.programs;
    if view.at.is_none() {
        return;
    }
    let energy = Family::<ProgramLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_program_energy",
        "Energy per program since the engine started: the 20 that drew the most (each from when \
         it became one of them), then (other), (idle) and (unattributed)",
        Unit::Joules,
        energy.clone(),
    );
    let series = view.metric_series();
    for (program, joules) in series {
        if joules.is_finite() && joules >= 0.0 {
            energy
                .get_or_create(&ProgramLabels {
                    program: label(program),
                })
                .inc_by(joules);
        }
    }
    let own = CounterF::default();
    registry.register_with_unit(
        "wattbar_self_energy",
        "Energy attributed to this Wattbar process since it started",
        Unit::Joules,
        own.clone(),
    );
    own.inc_by(view.self_joules.max(0.0));
}

/// What keeping each model loaded costs: the energy priced so far, as the store committed it
/// (it only grows, and a crash between batches never takes it back), and the draw, where
/// measured.
fn resident(registry: &mut Registry, p: &PublishedState) {
    let committed = &p.kept.committed.resident_idle;
    if p.inference.resident.is_empty() && committed.is_empty() {
        return;
    }
    let energy = Family::<ResidentLabels, CounterF>::default();
    registry.register_with_unit(
        "wattbar_model_resident_idle",
        "Energy models drew while loaded and idle: the idle draw with each loaded, less the idle \
         draw with none, over the seconds it was loaded with no request in flight; as the store \
         committed it",
        Unit::Joules,
        energy.clone(),
    );
    let watts = Family::<ResidentLabels, GaugeF>::default();
    registry.register_with_unit(
        "wattbar_model_idle_power",
        "What keeping each model loaded adds to the idle draw, where both were measured",
        Unit::Other("watts".into()),
        watts.clone(),
    );
    for (model, joules) in committed {
        if joules.is_finite() && *joules >= 0.0 {
            energy
                .get_or_create(&ResidentLabels {
                    model: label(model),
                })
                .inc_by(*joules);
        }
    }
    for r in p.inference.resident.iter() {
        let labels = ResidentLabels {
            model: label(&r.model),
        };
        // A model loaded now whose idle energy the store holds none of yet starts at 0.
        energy.get_or_create(&labels).inc_by(0.0);
        if let Some(w) = r.idle_watts.filter(|w| w.is_finite()) {
            watts.get_or_create(&labels).set(w);
        }
    }
}
