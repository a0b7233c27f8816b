//! A generation request's body, read whole (up to [`MAX_PEEK_BYTES`]) to learn its model, route
//! it and ask a stream for its usage.
//!
//! Rules:
//! - What all requests hold read at once is bounded ([`MAX_HELD_BYTES`]): each body's bytes take
//!   their share of one budget as they arrive and until sent on, so concurrent 32 MiB bodies
//!   cannot take the engine's memory. A body's promised length reserves nothing: a body not yet
//!   sent costs nothing, so connections that promise much and send nothing take no one's share.
//!   A body whose bytes find the budget spent is answered 503. A whole answer read for its
//!   receipt takes its share of the same budget ([`read`]).
//! - A body must keep coming: no frame for [`BODY_STALL`], or not whole within
//!   [`BODY_DEADLINE`], and it is refused ([`PeekError::Stalled`]), its share released.
//! - A body read whole is parsed once, on a blocking thread
//!   ([`prepare`](wattbar_core::inference::request::prepare)), never on the async workers that
//!   also serve the API and `/metrics`.

use super::body::{blocking, full, BoxError, ProxyBody};
use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wattbar_core::inference::request::prepare;
use wattbar_core::inference::routing::Rewritten;
use wattbar_core::inference::Route;
use wattbar_core::PolicyConfig;

/// Largest generation request body read to learn its model; a larger one streams unread.
pub const MAX_PEEK_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes of request bodies held at once, all requests together: four whole bodies.
pub const MAX_HELD_BYTES: usize = 4 * MAX_PEEK_BYTES;
/// Longest wait for a body's next bytes.
pub const BODY_STALL: std::time::Duration = std::time::Duration::from_secs(10);
/// Longest a body may take to be read whole (32 MiB at about 0.5 MiB/s).
pub const BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);
/// The budget counts kibibytes.
const UNIT: usize = 1024;

/// The one budget of held bytes, shared by every request of a proxy.
pub(super) fn budget() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(MAX_HELD_BYTES / UNIT))
}

/// A generation request's body as it goes upstream.
pub(super) struct Peeked {
    /// The body as it streams on, where it was too large to read whole.
    stream: Option<ProxyBody>,
    /// The bytes that go upstream, where the body was read whole.
    pub(super) whole: Option<Bytes>,
    /// Their share of the budget of held bytes.
    held: Option<OwnedSemaphorePermit>,
    /// The bytes read: the whole body, or its first [`MAX_PEEK_BYTES`].
    pub(super) size: usize,
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
    /// The body stopped coming ([`BODY_STALL`]) or took too long ([`BODY_DEADLINE`]).
    Stalled,
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
    let Read { head, held, whole } = read(&mut body, MAX_PEEK_BYTES, budget).await?;
    if whole {
        // Reading a body of up to 32 MiB takes a while: off the async workers, which also serve
        // the API and `/metrics`.
        let routing = routing.cloned();
        let prepared = blocking(head.clone(), move |b| prepare(b, route, routing.as_ref()))
            .await
            .unwrap_or_default();
        return Ok(Peeked {
            length: prepared.body.as_ref().map(Vec::len),
            size: head.len(),
            whole: Some(prepared.body.map_or(head, Bytes::from)),
            stream: None,
            held,
            model: prepared.model,
            asked_usage: prepared.asked_usage,
            routed: prepared.routed,
        });
    }
    let size = head.len();
    let first = futures_util::stream::once(async move { Ok(Frame::data(head)) });
    let rest = http_body_util::BodyStream::new(body.map_err(BoxError::from));
    let chained = futures_util::StreamExt::chain(first, rest);
    Ok(Peeked {
        stream: Some(StreamBody::new(chained).boxed_unsync()),
        whole: None,
        held,
        size,
        model: None,
        asked_usage: false,
        length: None,
        routed: None,
    })
}

impl Peeked {
    /// Sends `bytes` instead of the body read whole (a token cap lowered to fit a budget).
    pub(super) fn replace(&mut self, bytes: Vec<u8>) {
        self.length = Some(bytes.len());
        self.whole = Some(Bytes::from(bytes));
    }

    /// The body to send upstream, keeping its share of the budget until it has gone.
    pub(super) fn into_body(self) -> ProxyBody {
        let body = match (self.stream, self.whole) {
            (Some(stream), _) => stream,
            (None, whole) => full(whole.unwrap_or_default()),
        };
        holding(body, self.held)
    }
}

/// The start of a body, read and held.
pub(super) struct Read {
    pub(super) head: Bytes,
    /// The head's share of the budget.
    pub(super) held: Option<OwnedSemaphorePermit>,
    /// The head is the whole body: it ended within the bound.
    pub(super) whole: bool,
}

/// Reads `body` to its end, or until more than `max` bytes are read; what is held counts
/// against `budget`, taken as the bytes arrive ([`PeekError::Full`] where it is spent). A body
/// that stalls or takes too long is [`PeekError::Stalled`].
pub(super) async fn read<B>(
    body: &mut B,
    max: usize,
    budget: &Arc<Semaphore>,
) -> Result<Read, PeekError>
where
    B: http_body::Body<Data = Bytes, Error = hyper::Error> + Unpin,
{
    let whole_by = tokio::time::Instant::now() + BODY_DEADLINE;
    let mut held: Option<OwnedSemaphorePermit> = None;
    let mut head = bytes::BytesMut::new();
    loop {
        let next = tokio::time::timeout_at(
            whole_by.min(tokio::time::Instant::now() + BODY_STALL),
            body.frame(),
        );
        let Some(frame) = next.await.map_err(|_| PeekError::Stalled)? else {
            break;
        };
        if let Ok(data) = frame.map_err(PeekError::Body)?.into_data() {
            let reserved = held.as_ref().map_or(0, |h| h.num_permits() * UNIT);
            let short = (head.len() + data.len()).saturating_sub(reserved);
            if short > 0 {
                let units = u32::try_from(short.div_ceil(UNIT)).map_err(|_| PeekError::Full)?;
                let more = Arc::clone(budget)
                    .try_acquire_many_owned(units)
                    .map_err(|_| PeekError::Full)?;
                match held.as_mut() {
                    Some(h) => h.merge(more),
                    None => held = Some(more),
                }
            }
            head.extend_from_slice(&data);
        }
        if head.len() > max {
            return Ok(Read {
                head: head.freeze(),
                held,
                whole: false,
            });
        }
    }
    Ok(Read {
        head: head.freeze(),
        held,
        whole: true,
    })
}

/// `body`, keeping `held` until it is dropped (sent, or the request abandoned).
pub(super) fn holding(body: ProxyBody, held: Option<OwnedSemaphorePermit>) -> ProxyBody {
    body.map_frame(move |frame| {
        let _held = &held;
        frame
    })
    .boxed_unsync()
}
