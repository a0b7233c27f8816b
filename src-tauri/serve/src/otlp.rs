//! OpenTelemetry metrics pushed over OTLP/HTTP (protobuf), with the OpenTelemetry SDK and its
//! OTLP exporter.
//!
//! Rules:
//! - Names follow OpenTelemetry's hardware semantic conventions: `hw.host.energy` (J, a
//!   monotonic cumulative counter: the headline's lifetime energy, as `/metrics` has it) and
//!   `hw.host.power` (W, a gauge); per part `hw.energy` and `hw.power` with `hw.type` (`cpu`,
//!   `gpu`, `memory`) and `hw.id`. Inference per model: `wattbar.inference.energy` (J),
//!   `wattbar.inference.tokens` (`kind` prompt or completion) and `wattbar.inference.requests`.
//! - Every figure is read from the engine's published state when the SDK collects. A figure
//!   that is unknown is not observed: the receiver sees no point, never 0.
//! - Temporality is cumulative: a receiver that was down gets the whole total with the next push.
//! - The resource names the machine: `service.name=wattbar`, `host.name`.

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{MetricExporter, Protocol, WithExportConfig};
use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::Resource;
use std::time::Duration;
use wattbar_core::Domain;
use wattbar_engine::{EngineReader, Error};

/// The default interval between pushes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The longest a push may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// The metrics URL: `http://host:4318/v1/metrics`.
    pub endpoint: String,
    pub interval: Duration,
    pub host_name: String,
}

impl OtlpConfig {
    /// `url` as a collector's address (`http://host:4318`, to which `/v1/metrics` is added) or
    /// its full metrics URL.
    pub fn new(url: &str, host_name: &str) -> Result<OtlpConfig, Error> {
        let bad = |why: &str| {
            Error::Invalid(wattbar_core::Error::Invalid {
                field: "otlp",
                message: format!("{url:?}: {why}"),
            })
        };
        if url.starts_with("https://") {
            return Err(bad(
                "https is not supported: push to a collector over http (on this machine or \
                 your network), which may forward over TLS",
            ));
        }
        let uri: hyper::Uri = url
            .parse()
            .map_err(|_| bad("not a URL such as http://collector:4318"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none_or(str::is_empty) {
            return Err(bad("give http://host[:port][/v1/metrics]"));
        }
        let endpoint = match uri.path() {
            "" | "/" => format!("{}/v1/metrics", url.trim_end_matches('/')),
            _ => url.to_string(),
        };
        Ok(OtlpConfig {
            endpoint,
            interval: DEFAULT_INTERVAL,
            host_name: host_name.to_string(),
        })
    }
}

/// The running push; [`Otlp::shutdown`] pushes once more and stops.
pub struct Otlp {
    provider: SdkMeterProvider,
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

/// Starts pushing the engine's figures every `config.interval`. Runs on a thread of its own.
pub fn start(config: &OtlpConfig, engine: EngineReader) -> Result<Otlp, Error> {
    let exporter = MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&config.endpoint)
        .with_timeout(PUSH_TIMEOUT)
        .build()
        .map_err(|e| Error::Refused(format!("the OTLP exporter: {e}")))?;
    let reader = PeriodicReader::builder(exporter, opentelemetry_sdk::runtime::TokioCurrentThread)
        .with_interval(config.interval)
        .build();
    let resource = Resource::builder()
        .with_service_name("wattbar")
        .with_attribute(KeyValue::new("host.name", config.host_name.clone()))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource)
        .build();
    let meter = provider.meter("wattbar");

    let e = engine.clone();
    meter
        .f64_observable_counter("hw.host.energy")
        .with_unit("J")
        .with_description("Energy the machine drew (the headline's lifetime energy)")
        .with_callback(move |o| {
            let p = e.current();
            let sum: f64 = p.lifetime_by_scope.iter().map(|(_, j)| *j).sum();
            if !p.lifetime_by_scope.is_empty() && sum.is_finite() {
                o.observe(sum, &[]);
            }
        })
        .build();
    let e = engine.clone();
    meter
        .f64_observable_gauge("hw.host.power")
        .with_unit("W")
        .with_description("Power the machine draws now (the headline), with what it covers")
        .with_callback(move |o| {
            let p = e.current();
            let Some(s) = p.snapshot.as_ref() else {
                return;
            };
            let head = s.headline.as_ref();
            if let Some((h, w)) = head.and_then(|h| h.watts.map(|w| (h, w.0))) {
                if w.is_finite() {
                    let scope = s.coverage().map_or("", |c| c.scope.as_str());
                    o.observe(
                        w,
                        &[
                            KeyValue::new("wattbar.scope", scope),
                            KeyValue::new("wattbar.quality", h.quality.as_str()),
                            KeyValue::new("wattbar.source", h.source.clone()),
                        ],
                    );
                }
            }
        })
        .build();
    let e = engine.clone();
    meter
        .f64_observable_counter("hw.energy")
        .with_unit("J")
        .with_description("Energy each part drew since the store began")
        .with_callback(move |o| {
            for (name, joules) in &e.current().lifetime_by_domain {
                let kind = Domain::named(name).and_then(hw_type);
                if let Some(kind) = kind.filter(|_| joules.is_finite()) {
                    o.observe(
                        *joules,
                        &[
                            KeyValue::new("hw.type", kind),
                            KeyValue::new("hw.id", name.clone()),
                        ],
                    );
                }
            }
        })
        .build();
    let e = engine.clone();
    meter
        .f64_observable_gauge("hw.power")
        .with_unit("W")
        .with_description("Power each part draws now")
        .with_callback(move |o| {
            let p = e.current();
            for r in p.snapshot.iter().flat_map(|s| s.breakdown.iter()) {
                let (Some(kind), Some(w)) = (hw_type(r.domain), r.watts) else {
                    continue;
                };
                if w.0.is_finite() {
                    let id = r
                        .device
                        .clone()
                        .unwrap_or_else(|| r.domain.as_str().to_string());
                    o.observe(
                        w.0,
                        &[
                            KeyValue::new("hw.type", kind),
                            KeyValue::new("hw.id", id),
                            KeyValue::new("wattbar.source", r.source.clone()),
                        ],
                    );
                }
            }
        })
        .build();
    let e = engine.clone();
    meter
        .f64_observable_counter("wattbar.inference.energy")
        .with_unit("J")
        .with_description("Local energy charged to inference requests, per model")
        .with_callback(move |o| {
            for m in &e.current().inference.models {
                if m.energy_joules.is_finite() && m.energy_joules >= 0.0 {
                    o.observe(m.energy_joules, &[KeyValue::new("model", m.model.clone())]);
                }
            }
        })
        .build();
    let e = engine.clone();
    meter
        .u64_observable_counter("wattbar.inference.tokens")
        .with_unit("{token}")
        .with_description("Tokens the servers reported, per model and kind")
        .with_callback(move |o| {
            for m in &e.current().inference.models {
                for (kind, n) in [
                    ("prompt", m.prompt_tokens),
                    ("completion", m.completion_tokens),
                ] {
                    o.observe(
                        n,
                        &[
                            KeyValue::new("model", m.model.clone()),
                            KeyValue::new("kind", kind),
                        ],
                    );
                }
            }
        })
        .build();
    let e = engine;
    meter
        .u64_observable_counter("wattbar.inference.requests")
        .with_unit("{request}")
        .with_description("Inference requests, per model and status")
        .with_callback(move |o| {
            for m in &e.current().inference.models {
                for (status, n) in &m.requests_by_status {
                    o.observe(
                        *n,
                        &[
                            KeyValue::new("model", m.model.clone()),
                            KeyValue::new("status", status.clone()),
                        ],
                    );
                }
            }
        })
        .build();
    Ok(Otlp { provider })
}

impl Otlp {
    /// Pushes the figures once more, then stops. Blocks: call it off the async threads.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("otlp: the last push failed: {e}");
        }
    }
}
