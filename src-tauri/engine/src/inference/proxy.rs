//! The inference proxy: a reverse proxy in front of an Ollama or OpenAI-compatible server that
//! measures each generation request as it passes.
//!
//! Rules:
//! - Transparent: every method, path, query, header and body goes upstream and back, except the
//!   hop-by-hop headers, and `Host`, which names the upstream (Ollama answers 403 to a Host that
//!   is not its own or loopback). Bodies stream frame by frame in both directions; nothing is
//!   held but the request body of a generation request (to read its model, up to
//!   [`MAX_PEEK_BYTES`]) and the response line being read.
//! - Measured: `POST` to `/api/generate`, `/api/chat`, `/v1/chat/completions` and
//!   `/v1/completions` are tracked from the request's arrival to the response's last byte, with the
//!   first generated token as the end of prefill. Everything else is forwarded unmeasured.
//! - A client that goes away drops the response body: the upstream request is closed with it
//!   (the only way to cancel on Ollama) and the record says `cancelled`.
//! - Upstream errors pass unchanged; an upstream that cannot be reached gives a 502 JSON error
//!   naming it.

use super::tracker::{InFlight, Tracker};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use wattbar_core::inference::{Framing, ResponseMeter, Route, Status};

/// Largest generation request body read to learn its model; a larger one streams unread.
pub const MAX_PEEK_BYTES: usize = 32 * 1024 * 1024;
/// Where clients reach Wattbar's proxy, and where Ollama listens, by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:11435";
pub const DEFAULT_UPSTREAM: &str = "http://127.0.0.1:11434";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// The upstream from `OLLAMA_HOST`'s value (`host`, `host:port`, `http://host:port`; Ollama's
/// own defaults: port 11434, and 0.0.0.0 means this machine), else [`DEFAULT_UPSTREAM`].
pub fn default_upstream(ollama_host: Option<&str>) -> String {
    let Some(raw) = ollama_host.map(str::trim).filter(|s| !s.is_empty()) else {
        return DEFAULT_UPSTREAM.to_string();
    };
    let rest = raw
        .strip_prefix("http://")
        .or_else(|| raw.strip_prefix("https://"))
        .unwrap_or(raw)
        .trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() && !h.ends_with(':') => (h, p),
        _ => (rest, "11434"),
    };
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        h => h,
    };
    format!("http://{host}:{port}")
}

/// A checked upstream: `http://host:port` (plain HTTP: model servers on this machine or LAN).
#[derive(Debug, Clone)]
pub struct Upstream {
    base: Uri,
    authority: HeaderValue,
    shown: String,
}

impl Upstream {
    pub fn parse(text: &str) -> Result<Upstream, String> {
        let base: Uri = text
            .trim()
            .parse()
            .map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        if base.scheme_str() != Some("http") {
            return Err(format!(
                "{text:?}: the upstream must be an http:// URL (model servers speak plain HTTP)"
            ));
        }
        let authority = base
            .authority()
            .ok_or_else(|| format!("{text:?} has no host"))?;
        let shown = format!("http://{authority}");
        Ok(Upstream {
            authority: HeaderValue::from_str(authority.as_str())
                .map_err(|e| format!("{text:?}: {e}"))?,
            base,
            shown,
        })
    }

    fn uri(&self, path_and_query: &str) -> Result<Uri, hyper::http::Error> {
        let prefix = self.base.path().trim_end_matches('/');
        Uri::builder()
            .scheme("http")
            .authority(self.authority.as_bytes())
            .path_and_query(format!("{prefix}{path_and_query}"))
            .build()
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

struct Proxy {
    upstream: Upstream,
    client: Client<HttpConnector, ProxyBody>,
    tracker: Arc<Tracker>,
}

/// Serves the proxy on `listener` until `shutdown` completes, then lets requests in flight end.
pub async fn serve(
    listener: tokio::net::TcpListener,
    upstream: Upstream,
    tracker: Arc<Tracker>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let proxy = Arc::new(Proxy {
        upstream,
        client,
        tracker,
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    crate::api::accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let proxy = Arc::clone(&proxy);
        let service = hyper::service::service_fn(move |req| {
            let proxy = Arc::clone(&proxy);
            async move { Ok::<_, std::convert::Infallible>(proxy.handle(req).await) }
        });
        let connection = connections.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("proxy connection ended: {e}");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

fn json_error(status: StatusCode, message: String) -> Response<ProxyBody> {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|e| match e {}).boxed_unsync()
}

impl Proxy {
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let (mut parts, body) = req.into_parts();
        let route = (parts.method == hyper::Method::POST)
            .then(|| Route::of_post(parts.uri.path()))
            .flatten();
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let (body, model) = match route {
            Some(_) => match peek(body).await {
                Ok(peeked) => peeked,
                Err(e) => {
                    return json_error(
                        StatusCode::BAD_REQUEST,
                        format!("wattbar proxy: reading the request body failed: {e}"),
                    )
                }
            },
            None => (body.map_err(BoxError::from).boxed_unsync(), None),
        };
        let inflight = route.map(|r| self.tracker.begin(r, model));
        parts.uri = match self.upstream.uri(&path_and_query) {
            Ok(uri) => uri,
            Err(e) => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    format!("wattbar proxy: {path_and_query:?}: {e}"),
                )
            }
        };
        strip_hop_by_hop(&mut parts.headers);
        parts
            .headers
            .insert(header::HOST, self.upstream.authority.clone());
        let upstream = match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => response,
            Err(e) => {
                let message = format!(
                    "wattbar proxy: the model server at {} did not answer: {}",
                    self.upstream,
                    error_chain(&e)
                );
                if let Some(inflight) = inflight {
                    inflight.finish(
                        Status::Error,
                        wattbar_core::inference::ServerFigures {
                            error: Some(message.clone()),
                            ..Default::default()
                        },
                    );
                }
                return json_error(StatusCode::BAD_GATEWAY, message);
            }
        };
        let (mut parts, body) = upstream.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        let body = match (route, inflight) {
            (Some(route), Some(inflight)) => {
                let framing = parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map_or(Framing::Json, Framing::of_content_type);
                Metered {
                    inner: body,
                    meter: Some(ResponseMeter::new(route, framing)),
                    inflight: Some(inflight),
                    http_error: !parts.status.is_success(),
                }
                .boxed_unsync()
            }
            _ => body.map_err(BoxError::from).boxed_unsync(),
        };
        Response::from_parts(parts, body)
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Reads a generation request's body up to [`MAX_PEEK_BYTES`] for its `model`; the body goes on
/// unchanged, the part read followed by the rest.
async fn peek(mut body: Incoming) -> Result<(ProxyBody, Option<String>), hyper::Error> {
    let mut head = bytes::BytesMut::new();
    let mut ended = true;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            head.extend_from_slice(&data);
        }
        if head.len() > MAX_PEEK_BYTES {
            ended = false;
            break;
        }
    }
    let head = head.freeze();
    if ended {
        let model = serde_json::from_slice::<serde_json::Value>(&head)
            .ok()
            .and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_string));
        return Ok((full(head), model));
    }
    let first = futures_util::stream::once(async move { Ok(Frame::data(head)) });
    let rest = http_body_util::BodyStream::new(body.map_err(BoxError::from));
    let chained = futures_util::StreamExt::chain(first, rest);
    Ok((StreamBody::new(chained).boxed_unsync(), None))
}

/// A response body that feeds each frame to the meter on its way to the client.
struct Metered {
    inner: Incoming,
    meter: Option<ResponseMeter>,
    inflight: Option<InFlight>,
    http_error: bool,
}

impl Metered {
    fn end(&mut self, status: Option<Status>) {
        let (Some(meter), Some(inflight)) = (self.meter.take(), self.inflight.take()) else {
            return;
        };
        let mut figures = meter.finish();
        let status = match status {
            Some(s) => s,
            None if figures.error.is_some() || self.http_error => Status::Error,
            None if figures.finished => Status::Ok,
            None => {
                figures.error = Some("the server ended the response before it was complete".into());
                Status::Error
            }
        };
        inflight.finish(status, figures);
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let this = &mut *self;
                    let generated = this.meter.as_mut().map_or(0, |m| m.feed(data));
                    if generated > 0 {
                        if let Some(inflight) = this.inflight.as_mut() {
                            inflight.first_token();
                        }
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => self.end(Some(Status::Error)),
            Poll::Ready(None) => self.end(None),
            Poll::Pending => {}
        }
        polled.map_err(BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        if self.meter.is_some() {
            self.end(Some(Status::Cancelled));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_follows_ollama_host_as_ollama_reads_it() {
        assert_eq!(default_upstream(None), "http://127.0.0.1:11434");
        assert_eq!(default_upstream(Some("")), "http://127.0.0.1:11434");
        assert_eq!(default_upstream(Some("0.0.0.0")), "http://127.0.0.1:11434");
        assert_eq!(
            default_upstream(Some("0.0.0.0:8080")),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            default_upstream(Some("http://gpu-box.lan:11434/")),
            "http://gpu-box.lan:11434"
        );
        assert_eq!(default_upstream(Some("10.0.0.5")), "http://10.0.0.5:11434");
    }

    #[test]
    fn an_upstream_must_be_plain_http_with_a_host() {
        assert!(Upstream::parse("http://127.0.0.1:11434").is_ok());
        assert!(Upstream::parse("https://api.example.com").is_err());
        assert!(Upstream::parse("127.0.0.1:11434").is_err());
        let u = Upstream::parse("http://127.0.0.1:8080/base/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            u.uri("/v1/chat/completions?x=1")
                .map(|u| u.to_string())
                .unwrap_or_default(),
            "http://127.0.0.1:8080/base/v1/chat/completions?x=1"
        );
    }

    #[test]
    fn hop_by_hop_headers_stay_on_their_connection() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::AUTHORIZATION));
    }
}
