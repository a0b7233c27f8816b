//! The inference proxy: a reverse proxy in front of an Ollama or OpenAI-compatible server that
//! measures each generation request as it passes.
//!
//! Rules:
//! - As safe as the API: a `Host` that does not name the proxy gets 421 (the same allow-list,
//!   [`HostGuard`]), so a web page cannot reach the model server through it by DNS rebinding;
//!   the caller listens beyond loopback only when told to (`--allow-remote`). A web page's
//!   request (its `Origin`) is answered 403 unless Ollama would allow that origin ([`Origins`]).
//! - Bounded: an upstream that is the proxy itself is refused at start, and at most
//!   [`MAX_FORWARDED`] requests are forwarded at once (503 past it), so a loop through another
//!   hop or a flood cannot take every file descriptor. A request counts once its body has been
//!   read: a generation request's body must keep coming ([`peek::BODY_STALL`]) and be whole
//!   within [`peek::BODY_DEADLINE`], else 408 and what it held is released, so uploads that
//!   stall never hold the slots or the memory normal requests need.
//! - A model name is checked where it enters ([`check_model_name`]): one too long or holding a
//!   control character is answered 400 and goes nowhere.
//! - Transparent: every method, path, query, header and body goes upstream and back, except the
//!   hop-by-hop headers, and `Host`, which names the upstream (Ollama answers 403 to a Host that
//!   is not its own or loopback). `Origin` is passed on, so the upstream's own origin checks
//!   still apply. Bodies stream frame by frame in both directions; nothing is held but the
//!   request body of a generation request (to read its model, up to [`MAX_PEEK_BYTES`]) and the
//!   response line being read.
//! - One change, undone on the way back: a streamed OpenAI-style request that does not ask for
//!   its usage is asked ([`usage`](wattbar_core::inference::usage)), and the usage chunk is
//!   removed from its answer.
//! - Measured: `POST` to `/api/generate`, `/api/chat`, `/v1/chat/completions` and
//!   `/v1/completions` are tracked from the request's arrival to the response's last byte, with the
//!   first generated token as the end of prefill. Everything else is forwarded unmeasured.
//! - A record ends when the answer's last byte has passed, however it is framed (a
//!   `Content-Length`, chunks, the connection kept for the next request): `ok` for a complete
//!   answer; `error`, with the reason, for an upstream error, a broken or incomplete answer; and
//!   `cancelled`, with the tokens counted so far, only when the client went away before the
//!   answer's end passed to it (its dropped body closes the upstream request, the only way to
//!   cancel on Ollama). An answer whose end has passed is `ok` whoever closes first.
//! - An upstream that cannot be reached gives a 502 JSON error naming it, and no record.
//! - Low-power routing: with `low_power_action = route` and the mode on, a generation request
//!   read whole goes to the low-power model and its token limit is capped
//!   ([`routing`](wattbar_core::inference::routing)); the answer says so in `X-Wattbar-Routed`,
//!   and the record keeps the model asked for. A request with `X-Wattbar-Route: off` is never
//!   changed. An upstream that lacks the model answers with its own error, passed on unchanged.
//! - With `unload_idle_models_in_low_power`, the models the server holds with no request in
//!   flight are unloaded when low-power mode switches on ([`unload`]); each unload is recorded
//!   and said once.
//! - Which models the server holds is read every few seconds ([`resident`]), so the engine can
//!   learn what each costs by staying loaded.
//! - Every measured answer names its record in `X-Wattbar-Request-Id` (given when the request
//!   starts), for `GET /v1/inference/{id}`. With `X-Wattbar-Receipt: 1` the answer carries the
//!   record's figures too ([`receipt`](wattbar_core::inference::receipt)): the record is made at
//!   the end of the answer, before that end goes on; a whole JSON answer is read first, so that
//!   its `Content-Length` counts the receipt. Without the header the bytes are unchanged.

mod answers;
mod body;
mod forward;
mod keyed;
mod metered;
mod origins;
mod peek;
mod resident;
mod server_api;
mod unload;
mod upstream;

pub use keyed::CLIENT_HEADER;
pub use origins::Origins;
pub use peek::{MAX_HELD_BYTES, MAX_PEEK_BYTES};
pub use upstream::{default_upstream, Upstream, DEFAULT_UPSTREAM};

use crate::api::HostGuard;
use answers::{busy, drain, json_error, strip_hop_by_hop};
use body::{blocking, error_chain, full};
pub use body::{BoxError, ProxyBody};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use metered::Metered;
use peek::PeekError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::sync::Semaphore;
use wattbar_core::inference::usage::UsageChunkFilter;
use wattbar_core::inference::{
    check_model_name, Framing, ResponseMeter, Route, ServerFigures, Status,
};
use wattbar_core::keys::Rates;
use wattbar_core::{LowPowerAction, PolicyConfig};
use wattbar_engine::inference::reporter::{InFlight, Reporter};
use wattbar_engine::published::PublishedState;

/// Most requests the proxy forwards at once; past it, 503. A local model server runs a few at
/// once, so this only bounds a loop or a flood: each one holds a connection both ways.
pub const MAX_FORWARDED: usize = 512;
/// Where clients reach Wattbar's proxy by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:11435";

/// The request header that keeps a request on the model it names, low-power mode or not.
pub const ROUTE_HEADER: &str = "x-wattbar-route";
/// The response header that says a request was routed or capped.
pub const ROUTED_HEADER: &str = "x-wattbar-routed";
/// The response header naming a measured request's record (`GET /v1/inference/{id}`).
pub const REQUEST_ID_HEADER: &str = "x-wattbar-request-id";
/// The request header asking for the energy receipt in the answer (`1`).
pub const RECEIPT_HEADER: &str = "x-wattbar-receipt";
/// The response header saying a key's `clamp` lowered the request's token cap to this.
pub const CLAMPED_HEADER: &str = "x-wattbar-clamped";
/// The response headers of a whole JSON answer's energy line ([`EnergyLine`]).
///
/// [`EnergyLine`]: wattbar_core::inference::energy_line::EnergyLine
pub const ENERGY_HEADER: &str = "x-wattbar-energy";
pub const COST_HEADER: &str = "x-wattbar-cost";

struct Proxy {
    upstream: Upstream,
    client: Client<HttpConnector, ProxyBody>,
    reporter: Reporter,
    /// The engine's published state: whether low-power mode is on, and its settings.
    state: watch::Receiver<Arc<PublishedState>>,
    /// The engine, for the records that receipts copy.
    engine: wattbar_engine::EngineReader,
    hosts: HostGuard,
    origins: Origins,
    /// One permit per request being forwarded, held until its answer has passed.
    forwarding: Arc<Semaphore>,
    /// The bytes of request bodies held read ([`MAX_HELD_BYTES`]).
    held: Arc<Semaphore>,
    /// The keys the proxy issues, and their budgets.
    keys: wattbar_engine::keys::Keys,
}

/// Largest answer read whole, for a receipt in it.
const MAX_ANSWER_BYTES: usize = MAX_PEEK_BYTES;

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the proxy on `listener` until `shutdown` completes, then lets requests in flight end.
/// It reports requests to `engine` and routes by its published low-power state.
/// `extra_hosts`: the names besides loopback that `Host` may carry
/// ([`remote_hosts`](crate::api::remote_hosts) for the listen address); `origins`: the web pages
/// that may use it. An upstream that is the proxy itself is refused before anything is served.
pub async fn serve(
    listener: tokio::net::TcpListener,
    upstream: Upstream,
    engine: wattbar_engine::EngineReader,
    extra_hosts: &[String],
    origins: Origins,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listen = listener.local_addr()?;
    upstream
        .refuse_itself(listen)
        .await
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let hosts = HostGuard::new(extra_hosts, listen.port());
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let reporter = engine.reporter();
    reporter.upstream(upstream.local_port());
    let unloading = tokio::spawn(unload::follow(
        engine.clone(),
        upstream.clone(),
        client.clone(),
    ));
    let following = tokio::spawn(resident::follow(
        reporter.clone(),
        upstream.clone(),
        client.clone(),
    ));
    let proxy = Arc::new(Proxy {
        upstream,
        client,
        reporter: reporter.clone(),
        state: engine.subscribe(),
        keys: engine.keys().clone(),
        engine,
        hosts,
        origins,
        forwarding: Arc::new(Semaphore::new(MAX_FORWARDED)),
        held: peek::budget(),
    });
    let service = hyper::service::service_fn(move |req| {
        let proxy = Arc::clone(&proxy);
        async move { Ok::<_, std::convert::Infallible>(proxy.handle(req).await) }
    });
    let limits = crate::net::server::Limits::new(HEADER_TIMEOUT);
    let served = crate::net::server::serve(listener, limits, service, shutdown, || {}).await;
    unloading.abort();
    following.abort();
    reporter.upstream(None);
    served
}

impl Proxy {
    /// Checks who asks, then forwards under a permit held until the answer has passed.
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        if let Some(refused) = self.refusal(req.headers(), req.uri()) {
            drain(req.into_body()).await;
            return refused;
        }
        // Taken once the body has been read (a generation request's), or at once: a client that
        // has not sent its body yet holds no permit, so stalled uploads never crowd out others.
        let mut permit = None;
        let response = self.forward(req, &mut permit).await;
        response.map(|body| {
            body.map_frame(move |frame| {
                let _held = &permit;
                frame
            })
            .boxed_unsync()
        })
    }

    /// Why a request is answered by the proxy itself: a `Host` that does not name it (DNS
    /// rebinding), or a web page not among the allowed origins.
    fn refusal(&self, headers: &HeaderMap, uri: &hyper::Uri) -> Option<Response<ProxyBody>> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()));
        match host {
            Some(h) if self.hosts.allows(h) => {}
            Some(h) => {
                return Some(json_error(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!("wattbar proxy: this server does not answer to {h:?}"),
                ))
            }
            None => {
                return Some(json_error(
                    StatusCode::MISDIRECTED_REQUEST,
                    "wattbar proxy: a Host header is required".into(),
                ))
            }
        }
        let origin = headers.get(header::ORIGIN)?;
        let allowed = origin
            .to_str()
            .is_ok_and(|o| self.origins.allows(o) || self.hosts.allows_origin(o));
        (!allowed).then(|| {
            json_error(
                StatusCode::FORBIDDEN,
                format!(
                    "wattbar proxy: requests from the page at {origin:?} are refused; \
                     OLLAMA_ORIGINS names the pages that may use the model server"
                ),
            )
        })
    }

    /// What `model`'s tokens cost as measured here (its highest J per token over the scopes
    /// measured: a hold leans high), else the stated defaults.
    fn rates(&self, model: Option<&str>) -> Rates {
        let published = Arc::clone(&self.state.borrow());
        let measured = model.and_then(|m| {
            published
                .inference
                .view
                .models
                .iter()
                .filter(|s| s.model == m)
                .filter_map(|s| s.joules_per_token)
                .filter(|j| j.is_finite())
                .reduce(f64::max)
        });
        Rates::of(None, measured)
    }

    /// The low-power settings to route this request by; `None` when it goes as it came.
    fn routing(&self, headers: &HeaderMap) -> Option<PolicyConfig> {
        let opted_out = headers
            .get(ROUTE_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("off"));
        let published = Arc::clone(&self.state.borrow());
        let config = &published.prefs.low_power;
        let routes = !opted_out
            && published.low_power.state.enabled
            && config.action == LowPowerAction::Route;
        routes.then(|| {
            let mut config = config.clone();
            // `auto`: the model the profiles chose, once one is good enough.
            if let (true, Some(chosen)) = (
                config.auto_model(),
                &published.low_power.advice.recommended_model,
            ) {
                config.model.clone_from(chosen);
            }
            config
        })
    }
}
