//! The answer's body on its way back: each frame is fed to the meter, the usage chunk the proxy
//! asked for is removed, and the request's record ends at the last byte, or as cancelled when
//! the client goes away first.

use super::super::tracker::InFlight;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::StatusCode;
use std::pin::Pin;
use std::task::{Context, Poll};
use wattbar_core::inference::usage::UsageChunkFilter;
use wattbar_core::inference::{ResponseMeter, ServerFigures, Status};

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

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

/// A response body that feeds each frame to the meter on its way to the client, and ends the
/// request's record at its last byte.
pub(super) struct Metered {
    pub(super) inner: Incoming,
    pub(super) meter: Option<ResponseMeter>,
    pub(super) inflight: Option<InFlight>,
    pub(super) http_status: StatusCode,
    /// Removes the usage chunk the proxy asked for.
    pub(super) filter: Option<UsageChunkFilter>,
    /// The filter's last bytes, sent after the upstream body ended.
    pub(super) tail: Option<Bytes>,
    pub(super) done: bool,
}

impl Metered {
    /// Ends the record: `failure` when the body broke; otherwise the answer's own verdict.
    fn end(&mut self, failure: Option<String>) {
        let (Some(meter), Some(inflight)) = (self.meter.take(), self.inflight.take()) else {
            return;
        };
        let mut figures = meter.finish();
        let status = if let Some(reason) = failure {
            figures.error = Some(reason);
            Status::Error
        } else if !self.http_status.is_success() {
            if figures.error.is_none() {
                figures.error = Some(format!("the model server answered {}", self.http_status));
            }
            Status::Error
        } else if figures.error.is_some() {
            Status::Error
        } else if figures.finished {
            Status::Ok
        } else {
            figures.error = Some("the server ended the response before it was complete".into());
            Status::Error
        };
        inflight.finish(status, figures);
    }

    fn cancel(&mut self) {
        if let (Some(_), Some(inflight)) = (self.meter.take(), self.inflight.take()) {
            inflight.finish(Status::Cancelled, ServerFigures::default());
        }
    }

    /// The bytes to send for a frame of the upstream body.
    fn pass(&mut self, data: Bytes) -> Bytes {
        if let Some(meter) = self.meter.as_mut() {
            if meter.feed(&data) > 0 {
                if let Some(inflight) = self.inflight.as_mut() {
                    inflight.first_token();
                }
            }
        }
        match self.filter.as_mut() {
            Some(filter) => Bytes::from(filter.push(&data)),
            None => data,
        }
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if let Some(tail) = this.tail.take() {
                return Poll::Ready(Some(Ok(Frame::data(tail))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(frame) => frame,
            };
            match frame {
                Some(Ok(frame)) => {
                    let data = match frame.into_data() {
                        Ok(data) => data,
                        Err(other) => return Poll::Ready(Some(Ok(other))),
                    };
                    let mut out = this.pass(data);
                    // A body with a Content-Length is over at its last byte: the server writing
                    // this body polls no further, so the record ends here.
                    if this.inner.is_end_stream() {
                        this.done = true;
                        if let Some(rest) = this.filter.as_mut().map(UsageChunkFilter::finish) {
                            let mut joined = out.to_vec();
                            joined.extend_from_slice(&rest);
                            out = Bytes::from(joined);
                        }
                        this.end(None);
                    }
                    if out.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                Some(Err(e)) => {
                    this.done = true;
                    this.end(Some(format!(
                        "the model server broke off the answer: {}",
                        error_chain(&e)
                    )));
                    return Poll::Ready(Some(Err(BoxError::from(e))));
                }
                None => {
                    this.done = true;
                    let rest = this.filter.as_mut().map(UsageChunkFilter::finish);
                    this.end(None);
                    if let Some(rest) = rest.filter(|r| !r.is_empty()) {
                        this.tail = Some(Bytes::from(rest));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.tail.is_none()
            && (self.done
                || (self.inner.is_end_stream() && self.filter.as_ref().is_none_or(|f| !f.holds())))
    }

    fn size_hint(&self) -> SizeHint {
        match self.filter {
            Some(_) => SizeHint::default(),
            None => self.inner.size_hint(),
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        // An empty body (`Content-Length: 0`) is never polled: it ended, nobody left.
        if self.inner.is_end_stream() {
            self.end(None);
        } else {
            self.cancel();
        }
    }
}
