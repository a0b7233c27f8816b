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
//!
//! The proxy sends them through a [`Reporter`](super::reporter::Reporter).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::resident::{Loaded, Unload};
use wattbar_core::inference::{Route, ServerFigures, Status};
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
    /// A request was refused for key `0`'s budget: counted, never recorded.
    KeyRefused(String),
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

/// A record a client measured itself (`POST /v1/inference`), in wall-clock seconds.
#[derive(Debug, Clone)]
pub struct External {
    pub model: String,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: u64,
    pub start: f64,
    pub end: f64,
    pub tokens_per_second: Option<f64>,
}
