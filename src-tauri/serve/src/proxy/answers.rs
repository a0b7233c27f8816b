//! What the proxy says on its own: the headers of one connection it never forwards, its JSON
//! errors, the 503 that asks to retry, and a refused request's body drained before the answer.

use super::body::{full, ProxyBody};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use std::time::Duration;

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

pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) {
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

pub(super) fn json_error(status: StatusCode, message: String) -> Response<ProxyBody> {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Most of a refused request's body read and dropped before the answer, so that a client still
/// sending it reads the refusal rather than a reset connection.
const MAX_DRAINED_BYTES: usize = 1024 * 1024;
/// How long a refused request's body is waited for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn drain(mut body: Incoming) {
    let read = async {
        let mut seen = 0;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > MAX_DRAINED_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, read).await;
}

/// 503 with `Retry-After: 1`: the proxy is at one of its bounds, and a moment will free it.
pub(super) fn busy(message: String) -> Response<ProxyBody> {
    let mut response = json_error(StatusCode::SERVICE_UNAVAILABLE, message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
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
