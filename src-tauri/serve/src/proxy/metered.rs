//! The answer's body on its way back: each frame is fed to the meter, the usage chunk the proxy
//! asked for is removed, and the request's record ends at the last byte, or as cancelled when
//! the client goes away first.
//!
//! With a receipt asked for, the record ends at the end of the answer instead (Ollama's
//! `done: true` line, OpenAI's `data: [DONE]`): that frame is held while the engine samples and
//! makes the record, then goes on with the receipt in it.

use super::body::{error_chain, BoxError};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::StatusCode;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use wattbar_core::inference::energy_line::EnergyLine;
use wattbar_core::inference::receipt::Receipt;
use wattbar_core::inference::usage::UsageChunkFilter;
use wattbar_core::inference::Record;
use wattbar_core::inference::{Framing, ResponseMeter, ServerFigures, Status};
use wattbar_engine::inference::reporter::InFlight;

/// How long the end of an answer waits for its record before the receipt says it is missing.
pub(super) const RECEIPT_WAIT: Duration = Duration::from_secs(2);

/// The status of a request from its meter: `failure` when the body broke; otherwise the
/// answer's own verdict.
pub(super) fn verdict(
    meter: ResponseMeter,
    http_status: StatusCode,
    failure: Option<String>,
) -> (Status, ServerFigures) {
    verdict_of(meter.finish(), http_status, failure)
}

fn verdict_of(
    mut figures: ServerFigures,
    http_status: StatusCode,
    failure: Option<String>,
) -> (Status, ServerFigures) {
    let status = if let Some(reason) = failure {
        figures.error = Some(reason);
        Status::Error
    } else if !http_status.is_success() {
        if figures.error.is_none() {
            figures.error = Some(format!("the model server answered {http_status}"));
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
    (status, figures)
}

/// The receipt for record `id`, once the engine has made the record.
pub(super) async fn receipt(engine: wattbar_engine::EngineReader, id: u64) -> Receipt {
    match engine.inference_record(id, RECEIPT_WAIT).await {
        Ok(wattbar_engine::Found::Record(r)) => Receipt {
            line: Some(energy_line(&engine, &r)),
            ..Receipt::of(&r)
        },
        Ok(wattbar_engine::Found::Pending) => {
            Receipt::missing(id, "the record was not made in time".into())
        }
        Ok(wattbar_engine::Found::None) => Receipt::missing(id, "the record is not kept".into()),
        Err(e) => Receipt::missing(id, e.to_string()),
    }
}

/// Record `r`'s energy line: priced at the price now, with what its key may still spend.
pub(super) fn energy_line(engine: &wattbar_engine::EngineReader, r: &Record) -> EnergyLine {
    let state = engine.current();
    let remaining = r
        .key
        .as_deref()
        .and_then(|k| engine.keys().status(k, r.end))
        .map(|s| s.remaining_joules);
    EnergyLine::of(
        r,
        Some(state.energy.price_per_kwh),
        state.prefs.currency.as_str(),
        remaining,
    )
}

/// A stream's last frame, held until its receipt is in it.
type Held = Pin<Box<dyn Future<Output = Bytes> + Send>>;

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
    /// The engine, when the client asked for a receipt in its stream.
    pub(super) receipt: Option<wattbar_engine::EngineReader>,
    pub(super) framing: Framing,
    pub(super) held: Option<Held>,
    /// With a receipt asked of a stream: the bytes after the last newline passed on, held until
    /// their line ends, so that the frame that ends the answer holds its whole last line (the
    /// `data: [DONE]` the receipt goes before may come in two frames).
    pub(super) partial: Option<Vec<u8>>,
}

impl Metered {
    /// Ends the record: `failure` when the body broke; otherwise the answer's own verdict.
    fn end(&mut self, failure: Option<String>) {
        let (Some(meter), Some(inflight)) = (self.meter.take(), self.inflight.take()) else {
            return;
        };
        let (status, figures) = verdict(meter, self.http_status, failure);
        inflight.finish(status, figures);
    }

    /// Whether the bytes just metered end the answer: Ollama's `done: true` line, OpenAI's
    /// `data: [DONE]` however it came (its finish reason comes before the usage, so it is not
    /// the end).
    fn ends_answer(&self) -> bool {
        self.framing != Framing::Json && self.meter.as_ref().is_some_and(|m| m.figures().finished)
    }

    /// Ends the record now and holds `out` until its receipt is in it.
    fn hold_for_receipt(&mut self, out: Bytes) {
        let (Some(engine), Some(id)) = (
            self.receipt.take(),
            self.inflight.as_ref().map(|i| i.record_id()),
        ) else {
            return;
        };
        if let Some(inflight) = self.inflight.as_mut() {
            inflight.expedite();
        }
        self.end(None);
        let framing = self.framing;
        self.held = Some(Box::pin(async move {
            let r = receipt(engine, id).await;
            Bytes::from(match framing {
                Framing::Sse => r.into_sse(&out),
                _ => r.into_object(&out).unwrap_or_else(|| out.to_vec()),
            })
        }));
    }

    /// The client went away before the body's last byte. An answer whose end (`done: true`,
    /// `data: [DONE]`, a whole JSON body) has already passed to it is complete: clients close as
    /// soon as they read the end, before a chunked body's terminator comes. Otherwise it is
    /// cancelled, with the tokens counted so far.
    fn cancel(&mut self) {
        let (Some(meter), Some(inflight)) = (self.meter.take(), self.inflight.take()) else {
            return;
        };
        let figures = meter.finish();
        let (status, figures) =
            if figures.finished || figures.error.is_some() || !self.http_status.is_success() {
                verdict_of(figures, self.http_status, None)
            } else {
                (Status::Cancelled, figures)
            };
        inflight.finish(status, figures);
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
        let out = match self.filter.as_mut() {
            Some(filter) => Bytes::from(filter.push(&data)),
            None => data,
        };
        match self.partial.as_mut() {
            Some(partial) => {
                partial.extend_from_slice(&out);
                let lines = partial
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let rest = partial.split_off(lines);
                Bytes::from(std::mem::replace(partial, rest))
            }
            None => out,
        }
    }

    /// The bytes still held back once the upstream body has ended.
    fn rest(&mut self) -> Vec<u8> {
        let mut rest = self
            .partial
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        if let Some(filter) = self.filter.as_mut() {
            rest.extend_from_slice(&filter.finish());
        }
        rest
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
            if let Some(held) = this.held.as_mut() {
                let Poll::Ready(out) = held.as_mut().poll(cx) else {
                    return Poll::Pending;
                };
                this.held = None;
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
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
                        let rest = this.rest();
                        if !rest.is_empty() {
                            let mut joined = out.to_vec();
                            joined.extend_from_slice(&rest);
                            out = Bytes::from(joined);
                        }
                    }
                    if this.receipt.is_some() && this.http_status.is_success() && this.ends_answer()
                    {
                        this.hold_for_receipt(out);
                        continue;
                    }
                    if this.done {
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
                    let rest = this.rest();
                    this.end(None);
                    if !rest.is_empty() {
                        this.tail = Some(Bytes::from(rest));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.tail.is_none()
            && self.held.is_none()
            && (self.done
                || (self.inner.is_end_stream()
                    && self.filter.as_ref().is_none_or(|f| !f.holds())
                    && self.partial.as_ref().is_none_or(Vec::is_empty)))
    }

    fn size_hint(&self) -> SizeHint {
        if self.filter.is_some()
            || self.receipt.is_some()
            || self.held.is_some()
            || self.partial.is_some()
        {
            SizeHint::default()
        } else {
            self.inner.size_hint()
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
