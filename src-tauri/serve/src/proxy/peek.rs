//! A generation request's body, read whole (up to [`MAX_PEEK_BYTES`]) to learn its model, route
//! it and ask a stream for its usage.
//!
//! Rule: what all requests hold read at once is bounded ([`MAX_HELD_BYTES`]): each body's bytes
//! take their share of one budget while read and until sent upstream, and a request that would
//! pass the bound is answered 503 at once, so concurrent 32 MiB bodies cannot take the engine's
//! memory.

use super::body::{full, BoxError, ProxyBody};
use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wattbar_core::inference::routing::{self, Rewritten};
use wattbar_core::inference::usage::ask_for_usage;
use wattbar_core::inference::Route;
use wattbar_core::PolicyConfig;

/// Largest generation request body read to learn its model; a larger one streams unread.
pub const MAX_PEEK_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes of request bodies held at once, all requests together: four whole bodies.
pub const MAX_HELD_BYTES: usize = 4 * MAX_PEEK_BYTES;
/// The budget counts kibibytes.
const UNIT: usize = 1024;

/// The one budget of held bytes, shared by every request of a proxy.
pub(super) fn budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_HELD_BYTES / UNIT))
}

/// A generation request's body as it goes upstream.
pub(super) struct Peeked {
    pub(super) body: ProxyBody,
    /// The model it asks for, when the body was read whole and names one.
    pub(super) model: Option<String>,
    /// The proxy asked the stream for its usage: the client did not.
    pub(super) asked_usage: bool,
    /// The body's new length, when it was changed.
    pub(super) length: Option<usize>,
    /// What low-power routing changed.
    pub(super) routed: Option<Rewritten>,
}

#[derive(Debug)]
pub(super) enum PeekError {
    /// The client's body broke off.
    Body(hyper::Error),
    /// Holding this body would pass [`MAX_HELD_BYTES`]: try again once others have gone on.
    Full,
}

/// Reads a generation request's body up to [`MAX_PEEK_BYTES`] for its `model`, routes it by
/// `routing` when given, and asks an OpenAI-style stream for its usage; the body goes on
/// otherwise unchanged, a larger one the part read followed by the rest. The bytes held count
/// against `budget` until the body has gone upstream.
pub(super) async fn peek(
    mut body: Incoming,
    route: Route,
    routing: Option<&PolicyConfig>,
    budget: &Arc<Semaphore>,
) -> Result<Peeked, PeekError> {
    let mut head = bytes::BytesMut::new();
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut ended = true;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(PeekError::Body)?.into_data() {
            let units = u32::try_from(data.len().div_ceil(UNIT)).map_err(|_| PeekError::Full)?;
            let more = Arc::clone(budget)
                .try_acquire_many_owned(units)
                .map_err(|_| PeekError::Full)?;
            match held.as_mut() {
                Some(h) => h.merge(more),
                None => held = Some(more),
            }
            head.extend_from_slice(&data);
        }
        if head.len() > MAX_PEEK_BYTES {
            ended = false;
            break;
        }
    }
    let mut head = head.freeze();
    if ended {
        let mut routed = routing.and_then(|c| routing::rewrite(&head, route, c));
        let model = match &routed {
            Some(w) => Some(w.served.clone()),
            None => serde_json::from_slice::<serde_json::Value>(&head)
                .ok()
                .and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_string)),
        };
        let mut changed = routed.is_some();
        if let Some(w) = routed.as_mut() {
            head = Bytes::from(std::mem::take(&mut w.body));
        }
        let asked = matches!(route, Route::OpenAiChat | Route::OpenAiCompletions)
            .then(|| ask_for_usage(&head))
            .flatten();
        let asked_usage = asked.is_some();
        if let Some(with_usage) = asked {
            head = Bytes::from(with_usage);
            changed = true;
        }
        return Ok(Peeked {
            length: changed.then_some(head.len()),
            body: holding(full(head), held),
            model,
            asked_usage,
            routed,
        });
    }
    let first = futures_util::stream::once(async move { Ok(Frame::data(head)) });
    let rest = http_body_util::BodyStream::new(body.map_err(BoxError::from));
    let chained = futures_util::StreamExt::chain(first, rest);
    Ok(Peeked {
        body: holding(StreamBody::new(chained).boxed_unsync(), held),
        model: None,
        asked_usage: false,
        length: None,
        routed: None,
    })
}

/// `body`, keeping `held` until it is dropped (sent, or the request abandoned).
fn holding(body: ProxyBody, held: Option<OwnedSemaphorePermit>) -> ProxyBody {
    body.map_frame(move |frame| {
        let _held = &held;
        frame
    })
    .boxed_unsync()
}
