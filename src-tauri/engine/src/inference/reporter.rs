//! The proxy's side of its events: each is stamped on the engine's clock and queued in the
//! engine's inbox ([`super::events`] says what they mean). A request in flight is an [`InFlight`]
//! that reports its own end, as cancelled when it is dropped unfinished.

use super::events::{Finished, RecordIds, RequestEvent};
use crate::time::clock::Clock;
use std::sync::Arc;
use wattbar_core::inference::resident::{Loaded, Unload};
use wattbar_core::inference::{check_model_name, is_remote_model, Route, ServerFigures, Status};
use wattbar_core::Stamp;

/// Where the events go; gives one back when the engine has stopped.
pub type Sink = Arc<dyn Fn(RequestEvent) -> Result<(), RequestEvent> + Send + Sync>;

/// The proxy's side: stamps on the engine's clock and sends each event to the engine.
#[derive(Clone)]
pub struct Reporter {
    sink: Sink,
    clock: Arc<dyn Clock>,
    ids: RecordIds,
}

impl Reporter {
    pub(crate) fn new(sink: Sink, clock: Arc<dyn Clock>, ids: RecordIds) -> Reporter {
        Reporter { sink, clock, ids }
    }

    /// Wall-clock Unix seconds on the engine's clock: what key budgets are held at.
    pub fn unix_now(&self) -> f64 {
        self.clock.unix()
    }

    fn now(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    fn send(&self, event: RequestEvent) {
        // A stopped engine records nothing more; the proxy goes on forwarding until it stops.
        let _ = (self.sink)(event);
    }

    /// A request starts now.
    pub fn begin(&self, route: Route, model: Option<String>) -> InFlight {
        let start = self.now();
        let remote = model.as_deref().is_some_and(is_remote_model);
        let record_id = self.ids.take();
        self.send(RequestEvent::Began {
            record_id,
            start,
            remote,
            model: model.clone(),
        });
        InFlight {
            reporter: self.clone(),
            record_id,
            route,
            model,
            requested_model: None,
            remote,
            start,
            first_token: None,
            ended: false,
            urgent: false,
        }
    }

    /// The models the server holds, as the proxy just read them; `None`: it cannot say.
    pub fn loaded(&self, models: Option<Vec<Loaded>>) {
        let at = self.clock.elapsed();
        self.send(RequestEvent::Loaded { at, models });
    }

    /// What an engagement unloaded, stamped now: the engine records it and says it once.
    pub fn unloaded(&self, mut unload: Unload) {
        unload.t = self.clock.unix();
        self.send(RequestEvent::Unloaded(unload));
    }

    /// A request was refused for `key`'s budget.
    pub fn key_refused(&self, key: String) {
        self.send(RequestEvent::KeyRefused(key));
    }

    /// The port the proxy's upstream listens on, where it is on this machine: the engine names
    /// the process listening there as the model server.
    pub fn upstream(&self, port: Option<u16>) {
        self.send(RequestEvent::Upstream(port));
    }
}

/// One request in flight. Ending it without [`InFlight::finish`] (the proxy's body dropped
/// because the client went away) records it as cancelled.
pub struct InFlight {
    reporter: Reporter,
    record_id: u64,
    route: Route,
    model: Option<String>,
    requested_model: Option<String>,
    remote: bool,
    start: Stamp,
    first_token: Option<Stamp>,
    ended: bool,
    urgent: bool,
}

impl InFlight {
    /// The client asked for `requested`; the proxy sent the request to this one's model.
    pub fn routed_from(mut self, requested: String) -> Self {
        self.requested_model = Some(requested);
        self
    }

    /// The id of the record this request becomes.
    pub fn record_id(&self) -> u64 {
        self.record_id
    }

    /// Its client will wait for the record: it is made at a sample taken when the request ends.
    pub fn expedite(&mut self) {
        self.urgent = true;
    }

    /// The first generated token passed now (the end of prefill).
    pub fn first_token(&mut self) {
        if self.first_token.is_none() {
            let at = self.reporter.now();
            self.first_token = Some(at);
            self.reporter.send(RequestEvent::FirstToken {
                record_id: self.record_id,
                at,
            });
        }
    }

    pub fn has_first_token(&self) -> bool {
        self.first_token.is_some()
    }

    /// The server could not be reached: nothing ran, so nothing is recorded.
    pub fn abandon(mut self) {
        self.ended = true;
        self.reporter.send(RequestEvent::Abandoned {
            record_id: self.record_id,
        });
    }

    /// The request ended now, with this status and what the server said.
    pub fn finish(mut self, status: Status, figures: ServerFigures) {
        self.close(status, figures);
    }

    fn close(&mut self, status: Status, figures: ServerFigures) {
        if self.ended {
            return;
        }
        self.ended = true;
        let end = self.reporter.now();
        let error = figures.error.clone();
        // The answer's own name stands in only where it could have entered as a request's.
        let model = self.model.clone().or_else(|| {
            figures
                .model
                .clone()
                .filter(|m| check_model_name(m).is_ok())
        });
        self.reporter.send(RequestEvent::Ended(Box::new(Finished {
            record_id: self.record_id,
            route: self.route,
            model,
            requested_model: self.requested_model.take(),
            remote: self.remote,
            status,
            error,
            start: self.start,
            first_token: self.first_token,
            end,
            figures,
            urgent: self.urgent,
        })));
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.close(Status::Cancelled, ServerFigures::default());
    }
}
