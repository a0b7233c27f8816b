//! One push's `ExportMetricsServiceRequest`, made from the engine's published state: the
//! names, units and attributes each figure has, and none for a figure that is unknown.

use super::*;

/// `hw.type` of a breakdown domain, for the parts the conventions name.
fn hw_type(domain: Domain) -> Option<&'static str> {
    match domain {
        Domain::Cpu => Some("cpu"),
        Domain::Gpu => Some("gpu"),
        Domain::Dram => Some("memory"),
        _ => None,
    }
}

fn kv(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// One point, `start` set for a cumulative sum.
fn point(
    value: number_data_point::Value,
    attributes: Vec<KeyValue>,
    start: u64,
    now: u64,
) -> NumberDataPoint {
    NumberDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(value),
        ..NumberDataPoint::default()
    }
}

fn sum(name: &str, unit: &str, description: &str, points: Vec<NumberDataPoint>) -> Option<Metric> {
    (!points.is_empty()).then(|| Metric {
        name: name.to_string(),
        description: description.to_string(),
        unit: unit.to_string(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Metric::default()
    })
}

fn gauge(
    name: &str,
    unit: &str,
    description: &str,
    points: Vec<NumberDataPoint>,
) -> Option<Metric> {
    (!points.is_empty()).then(|| Metric {
        name: name.to_string(),
        description: description.to_string(),
        unit: unit.to_string(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: points,
        })),
        ..Metric::default()
    })
}

/// The push of `p`, its points at `now` (ns since the Unix epoch: the sample's time), cumulative
/// sums counted from `start`.
pub fn request(
    p: &PublishedState,
    host_name: &str,
    start: u64,
    now: u64,
) -> ExportMetricsServiceRequest {
    use number_data_point::Value::{AsDouble, AsInt};
    let at = |value, attributes| point(value, attributes, start, now);
    // A sum is the store's as of its newest committed sample: that is its time.
    let committed_at = p
        .kept
        .committed
        .through_unix
        .map_or(now, |t| (t * 1e9).clamp(0.0, u64::MAX as f64) as u64)
        .max(start);
    let total = |value, attributes| point(value, attributes, start, committed_at);
    let finite = |w: f64| w.is_finite().then_some(w);
    let snapshot = p.snapshot.as_ref();
    let head = snapshot.and_then(|s| s.headline.as_ref());
    let host_energy: Vec<_> = crate::summary::lifetime_joules(p)
        .map(|j| total(AsDouble(j), Vec::new()))
        .into_iter()
        .collect();
    let host_power: Vec<_> = head
        .and_then(|h| h.watts.and_then(|w| finite(w.0)).map(|w| (h, w)))
        .map(|(h, w)| {
            let scope = snapshot
                .and_then(|s| s.coverage())
                .map_or("", |c| c.scope.as_str());
            at(
                AsDouble(w),
                vec![
                    kv("wattbar.scope", scope),
                    kv("wattbar.quality", h.quality.as_str()),
                    kv("wattbar.source", h.source.clone()),
                ],
            )
        })
        .into_iter()
        .collect();
    let part_energy = p
        .kept
        .committed
        .by_domain
        .iter()
        .filter_map(|(name, joules)| {
            let kind = Domain::named(name).and_then(hw_type)?;
            let j = finite(*joules)?;
            Some(total(
                AsDouble(j),
                vec![kv("hw.type", kind), kv("hw.id", name.clone())],
            ))
        })
        .collect();
    let part_power = snapshot
        .iter()
        .flat_map(|s| s.breakdown.iter())
        .filter_map(|r| {
            let kind = hw_type(r.domain)?;
            let w = finite(r.watts?.0)?;
            let id = r
                .device
                .clone()
                .unwrap_or_else(|| r.domain.as_str().to_string());
            Some(at(
                AsDouble(w),
                vec![
                    kv("hw.type", kind),
                    kv("hw.id", id),
                    kv("wattbar.source", r.source.clone()),
                ],
            ))
        })
        .collect();
    let models = &p.kept.committed.models;
    let scope_of = |s: Option<wattbar_core::Scope>| kv("scope", wattbar_core::Scope::label(s));
    let proxy = |m: &wattbar_core::inference::ModelStats| {
        vec![
            kv("model", m.model.clone()),
            kv("source", SOURCE_PROXY),
            scope_of(m.scope),
        ]
    };
    let servers: Vec<_> = p
        .kept
        .committed
        .server_totals
        .iter()
        .map(ServerTotal::listed)
        .collect();
    let counted = |m: &ServerModel| {
        vec![
            kv("model", m.model.clone()),
            kv("source", SOURCE_SERVER_METRICS),
            kv("server", m.server.clone()),
            scope_of(m.scope),
            kv("covers", m.covers.join(",")),
        ]
    };
    let model_energy = models
        .iter()
        .filter_map(|m| Some(total(AsDouble(finite(m.energy_joules)?), proxy(m))))
        .chain(servers.iter().filter_map(|s| {
            let m = &s.figures;
            Some(total(AsDouble(finite(m.energy_joules)?), counted(m)))
        }))
        .collect();
    let tokens = models
        .iter()
        .flat_map(|m| {
            [
                ("prompt", m.prompt_tokens),
                ("completion", m.completion_tokens),
            ]
            .map(|(kind, n)| {
                let mut labels = proxy(m);
                labels.push(kv("kind", kind));
                total(AsInt(i64::try_from(n).unwrap_or(i64::MAX)), labels)
            })
        })
        .chain(servers.iter().flat_map(|s| {
            let m = &s.figures;
            [
                ("prompt", m.prompt_tokens),
                ("completion", m.completion_tokens),
            ]
            .into_iter()
            .filter_map(|(kind, n)| {
                let n = finite(n)?;
                let mut labels = counted(m);
                labels.push(kv("kind", kind));
                // Token counts are whole numbers; a server's counters are floats.
                Some(total(AsInt(n.round() as i64), labels))
            })
        }))
        .collect();
    let requests = models
        .iter()
        .flat_map(|m| {
            m.requests_by_status.iter().map(|(status, n)| {
                let mut labels = proxy(m);
                labels.push(kv("status", status.clone()));
                total(AsInt(i64::try_from(*n).unwrap_or(i64::MAX)), labels)
            })
        })
        .collect();
    let committed = &p.kept.committed;
    let money = |part: fn(&wattbar_ledger::store::money::LifetimeCost) -> f64| {
        committed
            .costs
            .iter()
            .filter(|_| committed.since_unix.is_some())
            .filter_map(|c| {
                let amount = finite(part(c))?.max(0.0);
                Some(total(
                    AsDouble(amount),
                    vec![
                        kv("currency", c.currency.clone()),
                        kv("scope", c.scope.map_or("", wattbar_core::Scope::as_str)),
                    ],
                ))
            })
            .collect::<Vec<_>>()
    };
    let (paid, credited) = (money(|c| c.paid), money(|c| c.credit));
    let metrics = [
        sum(
            "hw.host.energy",
            "J",
            "Energy the machine drew (the headline's lifetime energy)",
            host_energy,
        ),
        gauge(
            "hw.host.power",
            "W",
            "Power the machine draws now (the headline), with what it covers",
            host_power,
        ),
        sum(
            "hw.energy",
            "J",
            "Energy each part drew since the store began",
            part_energy,
        ),
        gauge("hw.power", "W", "Power each part draws now", part_power),
        sum(
            "wattbar.inference.energy",
            "J",
            "Local energy charged to inference requests, per model",
            model_energy,
        ),
        sum(
            "wattbar.inference.tokens",
            "{token}",
            "Tokens the servers reported, per model and kind",
            tokens,
        ),
        sum(
            "wattbar.inference.requests",
            "{request}",
            "Inference requests, per model and status",
            requests,
        ),
        sum(
            "wattbar.cost",
            "{currency}",
            "Money paid for the headline's energy (the parts priced above 0)",
            paid,
        ),
        sum(
            "wattbar.credit",
            "{currency}",
            "Money credited for the headline's energy at negative prices, as a positive amount",
            credited,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", "wattbar"),
                    kv("service.version", env!("CARGO_PKG_VERSION")),
                    kv("host.name", host_name),
                ],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "wattbar".to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

pub(super) fn unix_nanos() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    )
    .unwrap_or(u64::MAX)
}
