//! What the proxy tells the engine, as typed messages into the engine's inbox.
//!
//! Rules:
//! - The proxy only stamps (start, first token, end, with the engine's clock) and reports what
//!   the server said; the engine alone keeps the requests in flight, the models the server
//!   holds and the upstream's port ([`super::requests::Requests`]).
//! - Events reach the engine in the order they were sent, in the same queue as readers'
//!   commands: a reader that learnt a record id from an answer asks about it after the engine
//!   has heard of the request.
//! - Record ids are one atomic counter ([`RecordIds`]), shared by proxied requests and records
//!   posted by clients: a request gets its id when it starts, so that its answer can name the
//!   record it will become.

use crate::time::clock::Clock;
use crate::time::inbox::Inbox;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::resident::{Loaded, Unload};
use wattbar_core::inference::{check_model_name, is_remote_model, Route, ServerFigures, Status};
use wattbar_core::Stamp;

/// A request that has ended, waiting for the engine.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The id of the record it becomes.
    pub record_id: u64,
    pub route: Route,
    /// The model the request asked for, else the one the response named.
    pub model: Option<String>,
    /// The model the client asked for, when the proxy sent the request to `model` instead.
    pub requested_model: Option<String>,
    /// The request named a cloud model: its work ran elsewhere.
    pub remote: bool,
    pub status: Status,
    pub error: Option<String>,
    pub start: Stamp,
    pub first_token: Option<Stamp>,
    pub end: Stamp,
    pub figures: ServerFigures,
    /// Its client waits for the record (a receipt): the engine samples at once, not at its pace.
    pub urgent: bool,
}

/// A request the engine must share intervals with: in flight, or ended but not yet settled.
#[derive(Debug, Clone, Copy)]
pub struct Open {
    pub start: Stamp,
    pub first_token: Option<Stamp>,
    pub remote: bool,
    /// When it ended; `None` while it is in flight.
    pub end: Option<Stamp>,
}

/// One thing the proxy saw, for the engine.
#[derive(Debug)]
pub enum RequestEvent {
    /// A request was sent on to the server.
    Began {
        record_id: u64,
        start: Stamp,
        remote: bool,
        /// The model it asked for.
        model: Option<String>,
    },
    /// Its first generated token passed (the end of prefill).
    FirstToken { record_id: u64, at: Stamp },
    /// It ended, with what the server said.
    Ended(Box<Finished>),
    /// The server was never reached: no record is made.
    Abandoned { record_id: u64 },
    /// The models the server holds as just read (`at`, the engine's elapsed clock); `None`: it
    /// cannot say.
    Loaded {
        at: Duration,
        models: Option<Vec<Loaded>>,
    },
    /// What a low-power engagement unloaded.
    Unloaded(Unload),
    /// The port of the proxy's upstream where that server runs on this machine; `None` once the
    /// proxy stops.
    Upstream(Option<u16>),
}

/// The record ids: one sequence for proxied requests and posted records.
#[derive(Clone)]
pub struct RecordIds(Arc<AtomicU64>);

impl Default for RecordIds {
    fn default() -> Self {
        RecordIds(Arc::new(AtomicU64::new(1)))
    }
}

impl RecordIds {
    /// Gives ids from `first` on (the first id the ledger has not given), unless ids beyond it
    /// were given already.
    pub fn number_from(&self, first: u64) {
        self.0.fetch_max(first, Ordering::SeqCst);
    }

    /// The id the next record will get.
    pub fn next(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    /// A new id, never given before.
    pub fn take(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// The proxy's side: stamps on the engine's clock and sends each event to the engine.
#[derive(Clone)]
pub struct Reporter {
    inbox: Arc<Inbox>,
    clock: Arc<dyn Clock>,
    ids: RecordIds,
}

impl Reporter {
    pub(crate) fn new(inbox: Arc<Inbox>, clock: Arc<dyn Clock>, ids: RecordIds) -> Reporter {
        Reporter { inbox, clock, ids }
    }

    fn now(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    fn send(&self, event: RequestEvent) {
        // A stopped engine records nothing more; the proxy goes on forwarding until it stops.
        let _ = self.inbox.report(event);
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
