//! OpenTelemetry metrics pushed over OTLP/HTTP (protobuf): each push is an
//! `ExportMetricsServiceRequest` made from OpenTelemetry's own protobuf definitions
//! (`opentelemetry-proto`) and posted under the outbound policy (`wattbar-outbound`: https with
//! the system's roots, a timeout, the answer capped). (The SDK and its exporter cost
//! `serve` about 1.3 MiB more PSS at rest, measured; these figures need none of their aggregation:
//! every one is a total or a reading the engine already keeps.)
//!
//! Rules:
//! - Names follow OpenTelemetry's hardware semantic conventions: `hw.host.energy` (J, a
//!   monotonic cumulative counter: the headline's lifetime energy, as `/metrics` has it) and
//!   `hw.host.power` (W, a gauge); per part `hw.energy` and `hw.power` with `hw.type` (`cpu`,
//!   `gpu`, `memory`) and `hw.id`. Inference per model: `wattbar.inference.energy` (J),
//!   `wattbar.inference.tokens` (`kind` prompt or completion) and `wattbar.inference.requests`,
//!   each with its `source`: `proxy` (its records) or `server-metrics` (a server's own counters,
//!   with its `server`; no requests there). Money as two sums that never go back, per
//!   `currency` and `scope`: `wattbar.cost` (what was paid: the parts priced above 0) and
//!   `wattbar.credit` (what negative prices credited, as a positive amount), as `/metrics` has
//!   them.
//! - Every figure is read from the engine's published state at each push. A figure that is
//!   unknown has no point: the receiver sees none, never 0.
//! - Temporality is cumulative. Every sum is what the store committed
//!   ([`wattbar_engine::recorder::committed`]), so none goes back across a crash, and each starts
//!   when the store's first session began: the same start time across restarts, as a cumulative
//!   stream requires. A receiver that was down gets the whole total with the next push. A failed
//!   push is not retried; the next one carries all.
//! - A push failing for a new reason is logged once; the last push is made on a clean stop.
//! - The resource names the machine: `service.name=wattbar`, `host.name`.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use std::time::Duration;
use tokio::sync::watch;
use wattbar_core::inference::server_totals::{
    ServerModel, ServerTotal, SOURCE_PROXY, SOURCE_SERVER_METRICS,
};
use wattbar_core::secret::Bound;
use wattbar_core::Domain;
use wattbar_engine::Published;
use wattbar_engine::{EngineReader, Error};

/// The default interval between pushes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The longest a push may take.
const PUSH_TIMEOUT: Duration = wattbar_outbound::OTLP.timeout;
/// The most the last push may hold a stop up: a service manager's stop timeout is 10 s, and the
/// store is written before it.
pub const LAST_PUSH_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// The metrics URL: `http://host:4318/v1/metrics`.
    pub endpoint: String,
    pub interval: Duration,
    pub host_name: String,
    /// Headers for each push (`OTEL_EXPORTER_OTLP_HEADERS`' text), bound to the origin they
    /// were given for: sent to the endpoint only while it is of that origin.
    pub headers: Option<Bound>,
}

impl OtlpConfig {
    /// `url` as a collector's address (`http://host:4318`, to which `/v1/metrics` is added) or
    /// its full metrics URL.
    pub fn new(url: &str, host_name: &str) -> Result<OtlpConfig, Error> {
        let bad = |why: &str| {
            Error::Invalid(wattbar_core::Error::Invalid {
                field: "otlp",
                message: format!("{}: {why}", wattbar_outbound::shown(url)),
            })
        };
        let address = wattbar_outbound::address(url, "the OTLP endpoint", None)
            .map_err(|e| bad(&e.to_string()))?;
        let uri: hyper::Uri = address
            .url
            .parse()
            .map_err(|_| bad("not a URL such as http://collector:4318"))?;
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("give http://host[:port][/v1/metrics]"));
        }
        let endpoint = match uri.path() {
            "" | "/" => format!("{}/v1/metrics", address.url.trim_end_matches('/')),
            _ => address.url.clone(),
        };
        Ok(OtlpConfig {
            endpoint,
            interval: DEFAULT_INTERVAL,
            host_name: host_name.to_string(),
            headers: None,
        })
    }

    /// With `headers` (`OTEL_EXPORTER_OTLP_HEADERS`' text), checked and bound to the endpoint.
    pub fn with_headers(mut self, headers: Option<String>) -> Result<OtlpConfig, Error> {
        if let Some(h) = &headers {
            wattbar_core::prefs::integrations::otlp_headers(h).map_err(Error::Invalid)?;
        }
        self.headers = headers.and_then(|h| Bound::new(&self.endpoint, h));
        Ok(self)
    }
}

pub struct Otlp {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

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
    p: &Published,
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

fn unix_nanos() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    )
    .unwrap_or(u64::MAX)
}

/// Starts pushing the engine's figures every `config.interval`, on the current Tokio runtime.
pub fn start(config: &OtlpConfig, engine: EngineReader) -> Result<Otlp, Error> {
    let refused = |e: wattbar_outbound::Error| {
        Error::Refused(format!(
            "{}: {e}",
            wattbar_outbound::shown(&config.endpoint)
        ))
    };
    let address =
        wattbar_outbound::address(&config.endpoint, "the OTLP endpoint", None).map_err(refused)?;
    let agent = wattbar_outbound::agent(&wattbar_outbound::OTLP, &address).map_err(refused)?;
    let (stop, mut stopped) = watch::channel(false);
    let config = config.clone();
    let task = tokio::spawn(async move {
        let started = unix_nanos();
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + config.interval,
            config.interval,
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_error: Option<String> = None;
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                _ = stopped.wait_for(|s| *s) => true,
            };
            let p = engine.current();
            // The figures are as of the last sample: that is their time.
            let at = p.snapshot.as_ref().map_or_else(unix_nanos, |s| {
                (s.at.unix_seconds * 1e9).clamp(0.0, u64::MAX as f64) as u64
            });
            let start = p
                .kept
                .committed
                .since_unix
                .map_or(started, |s| (s * 1e9).clamp(0.0, u64::MAX as f64) as u64);
            let body = request(&p, &config.host_name, start, at).encode_to_vec();
            match push(&agent, &config.endpoint, config.headers.as_ref(), body).await {
                Ok(()) => {
                    if last_error.take().is_some() {
                        tracing::info!(
                            "otlp: pushing to {} again",
                            wattbar_outbound::shown(&config.endpoint)
                        );
                    }
                }
                Err(why) => {
                    if last_error.as_ref() != Some(&why) {
                        tracing::warn!(
                            "otlp: {}: {why}; the next push carries the totals",
                            wattbar_outbound::shown(&config.endpoint)
                        );
                    }
                    last_error = Some(why);
                }
            }
            if last {
                return;
            }
        }
    });
    Ok(Otlp { stop, task })
}

/// One POST of an encoded request under the outbound policy (https with the system's roots, the
/// timeout, the answer capped); a reason when it was not taken.
///
/// The blocking call runs on a thread of its own, not the runtime's blocking pool: a collector
/// that never answers would otherwise hold the runtime's shutdown for the whole timeout after the
/// last push was given up.
async fn push(
    agent: &ureq::Agent,
    url: &str,
    headers: Option<&Bound>,
    body: Vec<u8>,
) -> Result<(), String> {
    let (agent, url) = (agent.clone(), url.to_string());
    // Only where the endpoint is still of the origin they were given for.
    let headers = headers
        .and_then(|b| b.for_address(&url))
        .and_then(|h| wattbar_core::prefs::integrations::otlp_headers(h).ok())
        .unwrap_or_default();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let call = move || {
        let cap = wattbar_outbound::OTLP.max_answer_bytes;
        let mut request = agent
            .post(&url)
            .header("Content-Type", "application/x-protobuf");
        for (name, value) in &headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let answer = request.send(&body[..]);
        let outcome = match answer {
            // Read the answer (a partial success at most) so that the connection can be kept;
            // no more of it than that, so that an endless answer costs nothing.
            Ok(mut answer) => wattbar_outbound::read(answer.body_mut(), &wattbar_outbound::OTLP)
                .map(drop)
                .map_err(|_| {
                    format!(
                        "the collector's answer was cut off past {} KiB or broken",
                        cap / 1024
                    )
                }),
            Err(ureq::Error::StatusCode(status)) => Err(format!("the collector answered {status}")),
            Err(e) => Err(wattbar_outbound::reason(&e)),
        };
        let _ = tx.send(outcome);
    };
    std::thread::Builder::new()
        .name("wattbar-otlp".into())
        .spawn(call)
        .map_err(|e| format!("no thread for the push: {e}"))?;
    match tokio::time::timeout(PUSH_TIMEOUT, rx).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Err("the push ended without an outcome".into()),
        Err(_) => Err(format!("no answer within {} s", PUSH_TIMEOUT.as_secs())),
    }
}

impl Otlp {
    /// Pushes the figures once more, then stops; a collector that does not answer holds this up
    /// [`LAST_PUSH_TIMEOUT`] at most.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(LAST_PUSH_TIMEOUT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
            tracing::warn!(
                "otlp: the last push did not finish within {} s; stopped without it",
                LAST_PUSH_TIMEOUT.as_secs()
            );
        }
    }
}
