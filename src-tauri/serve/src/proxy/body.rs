//! The proxy's bodies and errors: what every part of it sends, how it names a failure, and where
//! a large body is parsed.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// A whole body of `bytes`.
pub(super) fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|e| match e {}).boxed_unsync()
}

/// An error and its causes on one line, each after a colon.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// `f(bytes)` on a blocking thread, so that parsing a large body holds up no async worker (they
/// also serve the API and `/metrics`); `None` only if it panicked.
pub(super) async fn blocking<T: Send + 'static>(
    bytes: Bytes,
    f: impl FnOnce(&[u8]) -> T + Send + 'static,
) -> Option<T> {
    tokio::task::spawn_blocking(move || f(&bytes)).await.ok()
}
