//! The checks every request passes before any handler runs (the module rules of [`super`]):
//! `Host`, then `Origin` and the token for writes; and the answers to unknown routes and methods.

use super::shared::{error, Shared};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

pub(super) async fn guard(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
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
    // Someone looks: the engine samples at the configured pace, not its pace at rest. A
    // Prometheus scrape does not count: its counters are exact at any pace.
    if request.uri().path() != "/metrics" {
        shared.engine.asked();
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

/// Whether the request carries this server's bearer token.
pub(super) fn authorised(shared: &Shared, headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        // The scheme is case-insensitive (RFC 9110 §11.1).
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    match given {
        Some(t) => !shared.config.token.is_empty() && matches(&shared.config.token, t),
        None => false,
    }
}

pub(super) async fn not_found(request: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such route: {} {}",
            request.method(),
            request.uri().path()
        ),
    )
}

pub(super) async fn method_not_allowed(request: Request) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Compares in time independent of where the strings differ (`subtle`'s constant-time equality;
/// only the length, which is public, ends it early).
fn matches(expected: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn comparison_needs_every_byte() {
        assert!(matches("abcd", "abcd"));
        assert!(!matches("abcd", "abce"));
        assert!(!matches("abcd", "abc"));
    }
}
