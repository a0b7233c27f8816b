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
use wattbar_engine::PublishedState;
use wattbar_engine::{EngineReader, Error};

mod request;
pub use request::request;
use request::unix_nanos;

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
