//! The local HTTP API (axum), served by `wattbar-cli serve` and by the tray app.
//!
//! Routes: `GET /metrics` (OpenMetrics), `GET /v1/snapshot`, `/v1/dashboard`, `/v1/totals`,
//! `/v1/summary` (one machine at a glance, for fleet views), `/v1/battery` (health now, by the
//! day, and its trend: [`battery`]), `/v1/history?from=&to=&step=` (or
//! `?range=1h|24h|30d`), `/v1/stream` (Server-Sent Events, one
//! `state` event per sample), `GET|PUT /v1/low-power`, `POST /v1/session/reset`,
//! `GET /v1/preferences`, `PUT /v1/preferences/{key}` ([`preferences`]),
//! `GET|POST /v1/inference`, `GET /v1/inference/{id}`, `GET /v1/models`, `GET /v1/energy?from=&to=` ([`inference`]),
//! `GET /v1/processes?limit=&sort=watts|energy` ([`processes`]), `GET /v1/server-metrics`
//! (model servers followed by their own counters),
//! `GET /v1/report.svg?from=&to=` ([`report`]), `GET|POST /v1/keys`, `DELETE /v1/keys/{name}`,
//! `POST /v1/keys/{name}/rotate`, `GET /v1/usage` ([`keys`]), and `GET /` the dashboard's files.
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
//! - At most [`MAX_STREAMS`] (32) `/v1/stream` clients at once, and [`OWNER_STREAMS`] (4) more
//!   that carry the token (the app's windows); the next gets 503 with `Retry-After` until one
//!   leaves. A slot is freed when its connection closes, or when its client has left a state
//!   unread for [`STREAM_WRITE_TIMEOUT`] (30 s) with every buffer before it full (each
//!   connection's send buffer is 64 KiB): a client that connects and never reads holds nothing
//!   for long.
//! - A connection must send a request's headers within [`HEADER_TIMEOUT`] (10 s) of opening or
//!   of its previous response, else it is closed: a silent, idle or trickling client goes away.
//! - A request must be answered within [`REQUEST_TIMEOUT`] (10 s), body upload included, else
//!   408 and the connection closes. The event stream is answered at once and then lasts as long
//!   as its client, so neither timeout cuts it.
//! - Each published state is serialized once, whatever the number of stream clients.

use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{any, get, post, put};
use axum::Router;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use wattbar_engine::ledger_reader::LedgerReader;
use wattbar_engine::EngineReader;

mod battery;
mod carbon;
mod control;
mod guard;
mod history;
pub mod hosts;
mod inference;
mod keys;
mod preferences;
mod processes;
mod profiles;
mod report;
mod shared;
mod state;
pub use hosts::{parse_host_name, remote_hosts, HostGuard};
pub use inference::MAX_RECORDS;
pub use shared::{
    ApiConfig, Limits, DEFAULT_LISTEN, DEFAULT_PORT, HEADER_TIMEOUT, MAX_BODY_BYTES,
    MAX_HISTORY_SECONDS, MAX_STREAMS, OWNER_STREAMS, REQUEST_TIMEOUT, STREAM_WRITE_TIMEOUT,
};

use shared::{error, Shared};

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
    let ledger = match (engine.ledger(), config.db_path.as_ref()) {
        (Some(own), Some(path)) if own.path() == path => Some(own.clone()),
        (_, Some(path)) => Some(LedgerReader::new(path.clone())),
        (_, None) => None,
    };
    let shared = Arc::new(Shared {
        ledger,
        engine,
        config,
        hosts,
        closing,
        usage: Mutex::new(shared::Usage::new()),
        streams: Arc::new(tokio::sync::Semaphore::new(max_streams)),
        owner_streams: Arc::new(tokio::sync::Semaphore::new(OWNER_STREAMS)),
        state_json: Arc::default(),
    });
    let api = Router::new()
        .route("/metrics", get(state::get_metrics))
        .route("/v1/snapshot", get(state::get_snapshot))
        .route("/v1/dashboard", get(state::get_dashboard))
        .route("/v1/totals", get(state::get_totals))
        .route("/v1/summary", get(state::get_summary))
        .route("/v1/calibration", get(state::get_calibration))
        .route("/v1/battery", get(battery::get_battery))
        .route("/v1/history", get(history::get_history))
        .route("/v1/stream", get(state::get_stream))
        .route(
            "/v1/low-power",
            get(control::get_low_power).put(control::put_low_power),
        )
        .route("/v1/session/reset", post(control::post_reset))
        .route("/v1/preferences", get(preferences::get_preferences))
        .route("/v1/preferences/{key}", put(preferences::put_preference))
        .route(
            "/v1/inference",
            get(inference::get_inference).post(inference::post_inference),
        )
        .route("/v1/inference/{id}", get(inference::get_inference_record))
        .route("/v1/models", get(inference::get_models))
        .route(
            "/v1/profiles",
            get(profiles::get_profiles).post(profiles::post_profile),
        )
        .route("/v1/keys", get(keys::get_keys).post(keys::post_key))
        .route("/v1/keys/{name}", axum::routing::delete(keys::delete_key))
        .route("/v1/keys/{name}/rotate", post(keys::post_rotate))
        .route("/v1/usage", get(keys::get_usage))
        .route("/v1/processes", get(processes::get_processes))
        .route("/v1/server-metrics", get(state::get_server_metrics))
        .route("/v1/energy", get(inference::get_energy))
        .route("/v1/report.svg", get(report::get_report))
        .route("/v1/{*rest}", any(guard::not_found))
        .method_not_allowed_fallback(guard::method_not_allowed);
    let with_ui = match ui_dir {
        Some(dir) => api
            .fallback_service(tower_http::services::ServeDir::new(dir).not_found_service(
                axum::routing::any(guard::not_found).with_state(shared.clone()),
            )),
        None => api.fallback(guard::not_found),
    };
    with_ui
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(shared.clone(), guard::guard))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            },
        ))
        .with_state(shared)
}

/// Serves until `shutdown` completes, then stops accepting, ends open event streams, lets
/// requests in flight finish and returns when every connection has closed
/// ([`crate::net::server`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: EngineReader,
    config: ApiConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let header_timeout = config.limits.header_timeout;
    let (close_tx, close_rx) = watch::channel(false);
    let app = router(engine, config, port, close_rx);
    let service = hyper_util::service::TowerToHyperService::new(app);
    let limits = crate::net::server::Limits {
        send_buffer_bytes: Some(SEND_BUFFER_BYTES),
        ..crate::net::server::Limits::new(header_timeout)
    };
    crate::net::server::serve(listener, limits, service, shutdown, move || {
        let _ = close_tx.send(true);
    })
    .await
}

/// Each API connection's send buffer: far more than any answer needs at once (states are a
/// few KiB), and small enough that a client that reads nothing fills it in seconds.
const SEND_BUFFER_BYTES: usize = 64 * 1024;

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
