//! The local HTTP API (axum), served by `wattbar-cli serve` and by the tray app.
//!
//! Routes: `GET /metrics` (OpenMetrics), `GET /v1/snapshot`, `/v1/dashboard`, `/v1/totals`,
//! `/v1/history?from=&to=&step=` (or `?range=1h|24h|30d`), `/v1/stream` (Server-Sent Events, one
//! `state` event per sample), `GET|PUT /v1/low-power`, `POST /v1/session/reset`,
//! `GET|POST /v1/inference`, `GET /v1/models`, `GET /v1/energy?from=&to=` ([`inference`]),
//! `GET /v1/report.svg?from=&to=` ([`report`]), and `GET /` the dashboard's files.
//!
//! Security rules, each checked before any handler runs:
//! - `Host` must name this server, with this port or none: `localhost`, `127.0.0.1`, `[::1]`, or
//!   one of [`ApiConfig::extra_hosts`], which [`remote_hosts`] fills for a non-loopback listen with
//!   this machine's names and addresses (the rule is in [`hosts`]). Anything else gets 421: a
//!   DNS-rebinding page reaches us under its own host name.
//! - A write (PUT, POST, PATCH, DELETE) with an `Origin` that is not this server gets 403, and
//!   without `Authorization: Bearer <token>` gets 401.
//! - Bodies over 64 KiB get 413; malformed JSON gets 400 with the parser's message; an unknown
//!   route gets 404, all as `{"error": "..."}`. A panicking handler answers 500.
//!
//! Limits ([`Limits`], defaults in brackets), so that no client can hold the server:
//! - At most [`MAX_STREAMS`] (32) `/v1/stream` clients at once; the next gets 503 with
//!   `Retry-After` until one leaves (its slot is freed when its connection closes).
//! - A connection must send a request's headers within [`HEADER_TIMEOUT`] (10 s) of opening or
//!   of its previous response, else it is closed: a silent, idle or trickling client goes away.
//! - A request must be answered within [`REQUEST_TIMEOUT`] (10 s), body upload included, else
//!   408 and the connection closes. The event stream is answered at once and then lasts as long
//!   as its client, so neither timeout cuts it.
//! - Each published state is serialized once, whatever the number of stream clients.

use crate::metrics::{self, SelfUsage};
use crate::store::{Step, Store};
use crate::view::{DashboardPayload, HistoryPayload, LowPowerView, StatePayload};
use crate::{unix_now, Command, EngineReader, Published};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::Stream;

pub mod hosts;
mod inference;
mod report;
pub use hosts::{parse_host_name, remote_hosts, HostGuard};

pub const DEFAULT_PORT: u16 = 9471;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9471";
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest span `/v1/history` answers in one request.
pub const MAX_HISTORY_SECONDS: f64 = 400.0 * 86_400.0;
/// How long a write waits for the engine to publish its effect.
const APPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// `/v1/stream` clients at once, by default: a dashboard tab or router each. The state is
/// serialized once for all of them, so each costs only its socket.
pub const MAX_STREAMS: usize = 32;
/// Time to send a request's headers, by default; generous for any real client, even on a LAN.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to answer a request, by default; the slowest handler (a write) gives up after 2 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// What a stream client turned away is told to wait, in seconds.
const STREAM_RETRY_AFTER_S: u32 = 5;

/// What one server gives its clients at most; the module documentation says how each is applied.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `/v1/stream` clients at once (0: none).
    pub max_streams: usize,
    /// How long a connection may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long a request may take, from its headers to its response.
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: MAX_STREAMS,
            header_timeout: HEADER_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ApiConfig {
    /// The bearer token writes must carry.
    pub token: String,
    /// Host names accepted besides the loopback ones: [`remote_hosts`] gives them for a listen
    /// address. Compared as [`hosts`] says; a port here never matches.
    pub extra_hosts: Vec<String>,
    /// The SQLite ledger, read for `/v1/history`.
    pub db_path: Option<PathBuf>,
    /// The dashboard's files, served at `/`.
    pub ui_dir: Option<PathBuf>,
    /// Stream clients and timeouts; `Limits::default()` for the documented defaults.
    pub limits: Limits,
}

struct Shared {
    engine: EngineReader,
    config: ApiConfig,
    /// The names `Host` may carry: loopback and `config.extra_hosts`, with this port or none.
    hosts: HostGuard,
    closing: watch::Receiver<bool>,
    usage: Mutex<Usage>,
    /// One permit per open event stream.
    streams: Arc<tokio::sync::Semaphore>,
    state_json: Arc<StateJson>,
}

/// The last published state as the JSON the event stream sends, made once per `seq` for every
/// client.
#[derive(Default)]
struct StateJson {
    slot: Mutex<Option<(u64, Arc<str>)>>,
}

impl StateJson {
    fn get(&self, p: &Published) -> Result<Arc<str>, String> {
        // Serializing under the lock makes clients woken by the same publication wait for the
        // first one's JSON instead of each making their own.
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seq, json)) = slot.as_ref() {
            if *seq == p.seq {
                return Ok(Arc::clone(json));
            }
        }
        let json: Arc<str> = serde_json::to_string(&StatePayload::from(p))
            .map_err(|e| e.to_string())?
            .into();
        // A client that saw an older state than the cached one does not evict the newer JSON
        // that every other client is about to ask for.
        if slot.as_ref().is_none_or(|(seq, _)| *seq < p.seq) {
            *slot = Some((p.seq, Arc::clone(&json)));
        }
        Ok(json)
    }
}

/// Every state `states` publishes from now on (the current one first), as JSON from `cache`.
fn state_json_stream(
    states: watch::Receiver<Arc<Published>>,
    cache: Arc<StateJson>,
) -> impl Stream<Item = (u64, Result<Arc<str>, String>)> {
    WatchStream::new(states).map(move |p: Arc<Published>| (p.seq, cache.get(&p)))
}

struct Usage {
    system: sysinfo::System,
    pid: Option<sysinfo::Pid>,
}

impl Usage {
    fn read(&mut self) -> Option<SelfUsage> {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate};
        let pid = self.pid?;
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[pid]),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let p = self.system.process(pid)?;
        Some(SelfUsage {
            cpu_seconds: p.accumulated_cpu_time() as f64 / 1000.0,
            resident_bytes: p.memory(),
        })
    }
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

/// Builds the router for a server listening on `port`. `closing` turns true when the server
/// shuts down, which ends open event streams.
pub fn router(
    engine: EngineReader,
    config: ApiConfig,
    port: u16,
    closing: watch::Receiver<bool>,
) -> Router {
    let ui_dir = config.ui_dir.clone();
    // Beyond MAX_PERMITS the semaphore would panic; no machine has that many sockets anyway.
    let max_streams = config
        .limits
        .max_streams
        .min(tokio::sync::Semaphore::MAX_PERMITS);
    let hosts = HostGuard::new(&config.extra_hosts, port);
    let shared = Arc::new(Shared {
        engine,
        config,
        hosts,
        closing,
        usage: Mutex::new(Usage {
            system: sysinfo::System::new(),
            pid: sysinfo::get_current_pid().ok(),
        }),
        streams: Arc::new(tokio::sync::Semaphore::new(max_streams)),
        state_json: Arc::default(),
    });
    let api = Router::new()
        .route("/metrics", get(get_metrics))
        .route("/v1/snapshot", get(get_snapshot))
        .route("/v1/dashboard", get(get_dashboard))
        .route("/v1/totals", get(get_totals))
        .route("/v1/history", get(get_history))
        .route("/v1/stream", get(get_stream))
        .route("/v1/low-power", get(get_low_power).put(put_low_power))
        .route("/v1/session/reset", post(post_reset))
        .route(
            "/v1/inference",
            get(inference::get_inference).post(inference::post_inference),
        )
        .route("/v1/models", get(inference::get_models))
        .route("/v1/energy", get(inference::get_energy))
        .route("/v1/report.svg", get(report::get_report))
        .route("/v1/{*rest}", any(not_found))
        .method_not_allowed_fallback(method_not_allowed);
    let with_ui = match ui_dir {
        Some(dir) => api.fallback_service(
            tower_http::services::ServeDir::new(dir)
                .not_found_service(axum::routing::any(not_found).with_state(shared.clone())),
        ),
        None => api.fallback(not_found),
    };
    with_ui
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            },
        ))
        .with_state(shared)
}

/// Serves until `shutdown` completes, then stops accepting, ends open event streams, lets
/// requests in flight finish and returns when every connection has closed.
///
/// Connections are served by hyper directly rather than `axum::serve`, which sets no header-read
/// timeout: that is what closes connections that never send a whole request.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: EngineReader,
    config: ApiConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    let port = listener.local_addr()?.port();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(config.limits.header_timeout);
    let (close_tx, close_rx) = watch::channel(false);
    let app = router(engine, config, port, close_rx);
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small responses and events go out at once rather than waiting for more to send.
        let _ = stream.set_nodelay(true);
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    let _ = close_tx.send(true);
    connections.shutdown().await;
    Ok(())
}

/// After a failed accept: a connection that went away before it was accepted is nothing; any
/// other error (out of file descriptors) is logged and waited out, so the loop does not spin.
pub(crate) async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    tracing::warn!("accepting a connection failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Where the dashboard's files are: `explicit`, else `WATTBAR_UI_DIR`, else `share/wattbar/ui`
/// or `ui` beside the executable (an install), else the source tree's `ui/` (a build from it).
pub fn find_ui_dir(explicit: Option<PathBuf>) -> Option<PathBuf> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.to_path_buf()));
    let candidates = explicit
        .into_iter()
        .chain(std::env::var_os(UI_DIR_ENV).map(PathBuf::from))
        .chain(
            exe_dir
                .iter()
                .flat_map(|d| [d.join("../share/wattbar/ui"), d.join("ui")]),
        )
        .chain(std::iter::once(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../ui"),
        ));
    candidates
        .into_iter()
        .find(|d| d.join("index.html").is_file())
}

pub const UI_DIR_ENV: &str = "WATTBAR_UI_DIR";

/// Whether `addr` may be listened on without the explicit remote flag.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(h) if shared.hosts.allows(h) => {}
        Some(h) => {
            return error(
                StatusCode::MISDIRECTED_REQUEST,
                // The accepted names are not listed: a rebinding page could read them.
                format!("this server does not answer to {h:?}"),
            );
        }
        None => return error(StatusCode::MISDIRECTED_REQUEST, "a Host header is required"),
    }
    let limit = shared.config.limits.request_timeout;
    let writes = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if writes {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let ok = origin.to_str().is_ok_and(|o| shared.hosts.allows_origin(o));
            if !ok {
                return error(
                    StatusCode::FORBIDDEN,
                    "writes from another origin are refused",
                );
            }
        }
        if !authorised(&shared, headers) {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "writes need the bearer token that `wattbar-cli token` prints",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut r = error(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request was not answered within {} s",
                    limit.as_secs_f64()
                ),
            );
            // The body may be half read: the connection cannot carry another request.
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            r
        }
    }
}

fn authorised(shared: &Shared, headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(t) => {
            !shared.config.token.is_empty() && crate::token::matches(&shared.config.token, t)
        }
        None => false,
    }
}

async fn not_found(request: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such route: {} {}",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

async fn get_metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let usage = shared
        .usage
        .lock()
        .map(|mut u| u.read())
        .unwrap_or_else(|mut e| e.get_mut().read());
    let body = metrics::render(&shared.engine.current(), unix_now(), usage);
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)],
            body,
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::TEXT_CONTENT_TYPE)],
            metrics::to_prometheus_text(&body),
        )
            .into_response()
    }
}

async fn get_snapshot(State(shared): State<Arc<Shared>>) -> Json<StatePayload> {
    Json(StatePayload::from(shared.engine.current().as_ref()))
}

async fn get_dashboard(State(shared): State<Arc<Shared>>) -> Json<DashboardPayload> {
    Json(DashboardPayload {
        state: StatePayload::from(shared.engine.current().as_ref()),
        history: shared.engine.recent(),
    })
}

#[derive(Serialize)]
struct TotalsBody {
    session: wattbar_core::SessionTotals,
    /// Today, this month and lifetime from the store, as of the last batch.
    stored: Option<crate::ledger::LedgerTotals>,
    lifetime_joules_by_domain: std::collections::BTreeMap<String, f64>,
}

async fn get_totals(State(shared): State<Arc<Shared>>) -> Json<TotalsBody> {
    let p = shared.engine.current();
    Json(TotalsBody {
        session: p.session.clone(),
        stored: p.totals.clone(),
        lifetime_joules_by_domain: p.lifetime_by_domain.iter().cloned().collect(),
    })
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    range: Option<String>,
    from: Option<f64>,
    to: Option<f64>,
    step: Option<String>,
    /// Domains, comma-separated: `system` is the headline, `*` every domain stored.
    domain: Option<String>,
}

/// Most domains one history request names.
const MAX_DOMAINS: usize = 16;

/// The domains a history request names; `None` without a filter.
fn domain_filter(text: Option<&str>) -> Result<Option<Vec<String>>, String> {
    let Some(text) = text else { return Ok(None) };
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    if names.is_empty() || names.len() > MAX_DOMAINS {
        return Err(format!(
            "domain: name 1 to {MAX_DOMAINS} domains, comma-separated"
        ));
    }
    if let Some(bad) = names.iter().find(|n| {
        *n != "*"
            && !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }) {
        return Err(format!(
            "domain {bad:?} is not a domain name such as cpu or gpu"
        ));
    }
    Ok(Some(names))
}

async fn get_history(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let now = unix_now();
    let (label, from, to, step) = match history_window(&q, now) {
        Ok(w) => w,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let domains = match domain_filter(q.domain.as_deref()) {
        Ok(d) => d,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let Some(db) = shared.config.db_path.clone() else {
        return Json(HistoryPayload::new(label, step, Vec::new())).into_response();
    };
    let result = tokio::task::spawn_blocking(move || {
        if !db.exists() {
            return Ok::<_, crate::store::StoreError>(Ok(HistoryPayload::new(
                label,
                step,
                Vec::new(),
            )));
        }
        let store = Store::open_read_only(&db)?;
        let Some(names) = domains else {
            return Ok(Ok(HistoryPayload::new(
                label,
                step,
                store.history(from, to, step)?,
            )));
        };
        let all = names.iter().any(|n| n == "*");
        let with_headline = all || names.iter().any(|n| n == "system");
        // A domain with nothing stored yet answers empty; a name that is no domain is refused.
        if let Some(unknown) = names
            .iter()
            .find(|n| *n != "*" && wattbar_core::Domain::named(n).is_none())
        {
            let known: Vec<&str> = wattbar_core::Domain::ALL
                .iter()
                .map(|d| d.as_str())
                .collect();
            return Ok(Err(format!(
                "{unknown:?} is not a domain: use {} or *",
                known.join(", ")
            )));
        }
        let headline = if with_headline {
            store.history(from, to, step)?
        } else {
            Vec::new()
        };
        let wanted: Vec<String> = if all { Vec::new() } else { names };
        let mut payload = HistoryPayload::new(label, step, headline);
        if !with_headline {
            payload.kwh = None;
        }
        payload.domains = store.domain_history(from, to, step, &wanted)?;
        Ok(Ok(payload))
    })
    .await;
    match result {
        Ok(Ok(Ok(payload))) => Json(payload).into_response(),
        Ok(Ok(Err(message))) => error(StatusCode::BAD_REQUEST, message),
        Ok(Err(e)) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

/// The window a history request asks for: a named range, or `from`/`to` (Unix seconds; `to`
/// defaults to now, `from` to a day before `to`) with `step` `minute` or `hour` (by default,
/// minutes up to two days, hours beyond).
fn history_window(q: &HistoryQuery, now: f64) -> Result<(String, f64, f64, Step), String> {
    if let Some(range) = &q.range {
        let (seconds, step) = crate::view::range(range)?;
        return Ok((range.clone(), now - seconds, now + 1.0, step));
    }
    let to = q.to.unwrap_or(now + 1.0);
    let from = q.from.unwrap_or(to - 86_400.0);
    if !from.is_finite() || !to.is_finite() || from >= to {
        return Err("from must be before to, both in seconds since 1970".into());
    }
    if to - from > MAX_HISTORY_SECONDS {
        return Err("ask for at most 400 days at a time".into());
    }
    let step = match q.step.as_deref() {
        None if to - from <= 2.0 * 86_400.0 => Step::Minute,
        None => Step::Hour,
        Some("minute" | "1m" | "60") => Step::Minute,
        Some("hour" | "1h" | "3600") => Step::Hour,
        Some(other) => return Err(format!("step {other:?}: use minute or hour")),
    };
    Ok(("custom".into(), from, to, step))
}

async fn get_stream(State(shared): State<Arc<Shared>>) -> Response {
    let Ok(slot) = Arc::clone(&shared.streams).try_acquire_owned() else {
        let mut r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} event streams are open, the most this server keeps; try again later",
                shared.config.limits.max_streams
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(STREAM_RETRY_AFTER_S));
        return r;
    };
    let mut closing = shared.closing.clone();
    let closed = async move {
        let _ = closing.wait_for(|c| *c).await;
    };
    let events = state_json_stream(shared.engine.subscribe(), Arc::clone(&shared.state_json))
        .map(move |(seq, json)| {
            // The stream owns the slot: hyper drops the stream when the client goes away or the
            // server closes it, and that frees the slot.
            let _slot = &slot;
            let event = match json {
                Ok(json) => Event::default()
                    .event("state")
                    .id(seq.to_string())
                    .data(&*json),
                Err(e) => Event::default().comment(format!("unencodable state: {e}")),
            };
            Ok::<_, Infallible>(event)
        })
        .take_until(Box::pin(closed));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn get_low_power(State(shared): State<Arc<Shared>>) -> Json<LowPowerView> {
    Json(LowPowerView::from(shared.engine.current().as_ref()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LowPowerBody {
    enabled: bool,
}

fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, (StatusCode, String)> {
    let bytes = body.map_err(|e| (e.status(), e.body_text()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("malformed JSON body: {e}")))
}

async fn put_low_power(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let want: LowPowerBody = match json_body(body) {
        Ok(b) => b,
        Err((status, message)) => return error(status, message),
    };
    let mut rx = shared.engine.subscribe();
    if shared
        .engine
        .send(Command::SetLowPower(want.enabled))
        .is_err()
    {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped");
    }
    let applied = tokio::time::timeout(APPLY_TIMEOUT, async {
        rx.wait_for(|p| {
            p.low_power.enabled == want.enabled
                && p.low_power.reason == Some(wattbar_core::Reason::Manual)
        })
        .await
        .map(|p| Arc::clone(&p))
    })
    .await;
    match applied {
        Ok(Ok(p)) => Json(LowPowerView::from(p.as_ref())).into_response(),
        _ => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine did not apply the change in time",
        ),
    }
}

#[derive(Serialize)]
struct ResetBody {
    /// When the new session started, seconds since the Unix epoch.
    started: f64,
}

async fn post_reset(State(shared): State<Arc<Shared>>) -> Response {
    let mut rx = shared.engine.subscribe();
    let before = shared.engine.current().session.started_unix;
    if shared.engine.send(Command::ResetSession).is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped");
    }
    let reset = tokio::time::timeout(APPLY_TIMEOUT, async {
        rx.wait_for(|p| p.session.started_unix != before)
            .await
            .map(|p| Arc::clone(&p))
    })
    .await;
    match reset {
        Ok(Ok(p)) => Json(ResetBody {
            started: p.session.started_unix,
        })
        .into_response(),
        _ => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine did not reset in time",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real published state with a sample in it, from an engine on a replayed trace.
    async fn published() -> Arc<Published> {
        use wattbar_core::{Chain, Preferences, Source};
        use wattbar_sources::{replay::parse_trace, ReplaySource};
        let trace = parse_trace("t,watts\n0,42.5\n").unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
        let prefs = Preferences {
            interval_ms: 100,
            ..Preferences::default()
        };
        let engine = crate::spawn(Chain::new(sources), crate::EngineConfig::new(prefs))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut rx = engine.subscribe();
        let sampled = tokio::time::timeout(
            Duration::from_secs(5),
            rx.wait_for(|p| p.snapshot.is_some()),
        )
        .await
        .map(|r| r.map(|p| Arc::clone(&p)));
        engine.shutdown().await;
        match sampled {
            Ok(Ok(p)) => p,
            _ => panic!("the engine published no sample within 5 s"),
        }
    }

    /// The next state each client's stream yields.
    async fn next_of_each<S>(clients: &mut [S]) -> Vec<(u64, Arc<str>)>
    where
        S: Stream<Item = (u64, Result<Arc<str>, String>)> + Unpin,
    {
        let mut out = Vec::new();
        for client in clients.iter_mut() {
            match client.next().await {
                Some((seq, Ok(json))) => out.push((seq, json)),
                other => panic!("no state: {other:?}"),
            }
        }
        out
    }

    #[tokio::test]
    async fn every_stream_client_gets_the_same_serialization_of_a_state() {
        let first = published().await;
        let (tx, rx) = watch::channel(Arc::clone(&first));
        let cache = Arc::new(StateJson::default());
        let mut clients: Vec<_> = (0..8)
            .map(|_| Box::pin(state_json_stream(rx.clone(), Arc::clone(&cache))))
            .collect();
        let seen = next_of_each(&mut clients).await;
        let expected = serde_json::to_string(&StatePayload::from(first.as_ref()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&*seen[0].1, expected);
        assert!(seen.iter().all(|(seq, _)| *seq == first.seq));
        // One allocation shared by all: serialized once, not once per client.
        assert!(seen.iter().all(|(_, j)| Arc::ptr_eq(j, &seen[0].1)));

        let second = Arc::new(Published {
            seq: first.seq + 1,
            ..(*first).clone()
        });
        tx.send(Arc::clone(&second))
            .unwrap_or_else(|e| panic!("{e}"));
        let seen_next = next_of_each(&mut clients).await;
        assert!(seen_next.iter().all(|(seq, _)| *seq == second.seq));
        assert!(seen_next
            .iter()
            .all(|(_, j)| Arc::ptr_eq(j, &seen_next[0].1)));
        assert!(!Arc::ptr_eq(&seen_next[0].1, &seen[0].1));
        let payload: serde_json::Value =
            serde_json::from_str(&seen_next[0].1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(payload["seq"], second.seq);
        assert_eq!(payload["watts"], 42.5);
    }

    #[tokio::test]
    async fn a_client_behind_gets_its_own_state_and_keeps_the_newer_one_cached() {
        let first = published().await;
        let second = Published {
            seq: first.seq + 1,
            ..(*first).clone()
        };
        let cache = StateJson::default();
        let newer = cache.get(&second).unwrap_or_else(|e| panic!("{e}"));
        let older = cache.get(&first).unwrap_or_else(|e| panic!("{e}"));
        let seq = |json: &str| {
            serde_json::from_str::<serde_json::Value>(json).unwrap_or_else(|e| panic!("{e}"))["seq"]
                .clone()
        };
        assert_eq!(seq(&older), first.seq);
        assert_eq!(seq(&newer), second.seq);
        let again = cache.get(&second).unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&again, &newer));
    }

    #[test]
    fn a_history_domain_filter_is_a_short_list_of_names() {
        assert_eq!(domain_filter(None), Ok(None));
        assert_eq!(
            domain_filter(Some("cpu, gpu,")),
            Ok(Some(vec!["cpu".to_string(), "gpu".to_string()]))
        );
        assert_eq!(domain_filter(Some("*")), Ok(Some(vec!["*".to_string()])));
        assert!(domain_filter(Some("")).is_err());
        assert!(domain_filter(Some("cpu;drop table")).is_err());
        assert!(domain_filter(Some(&vec!["cpu"; 17].join(","))).is_err());
    }

    #[test]
    fn history_windows_are_checked() {
        let q = |from, to, step: Option<&str>| HistoryQuery {
            range: None,
            from,
            to,
            step: step.map(str::to_string),
            domain: None,
        };
        assert!(history_window(&q(Some(10.0), Some(5.0), None), 100.0).is_err());
        assert!(history_window(&q(Some(0.0), Some(500.0 * 86_400.0), None), 0.0).is_err());
        assert!(history_window(&q(None, None, Some("week")), 1e9).is_err());
        let (_, from, to, step) =
            history_window(&q(None, Some(1e9), None), 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((from, to, step), (1e9 - 86_400.0, 1e9, Step::Minute));
        let (_, _, _, step) = history_window(&q(Some(0.0), Some(30.0 * 86_400.0), None), 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(step, Step::Hour);
    }
}
