//! Inference as a stage of each sample: the requests the proxy reported, owned here alone, and
//! the book that turns them into records. Each measured interval goes to the book with the
//! requests open during it; a request that ended by a sample is settled at that sample.
//!
//! Rules:
//! - A record is made only from intervals the engine sampled: a request is settled at the first
//!   sample at or after its end, never before.
//! - Record ids are reserved in the ledger ahead of those handed out ([`Inference::ids_ahead`]).
//! - A record for work a client measured itself covers a window that has ended, and is refused
//!   with the reason otherwise.

use crate::inference::events::External;
use crate::inference::{Book, InferenceView, RecordIds, Requests};
use crate::server_metrics::ProxySeen;
use std::sync::Arc;
use wattbar_core::inference::{Baseline, Interval, Record};
use wattbar_core::policy::Measured;
use wattbar_core::Stamp;

/// The stage: requests, the ids handed to the proxy, and the book of records.
pub(crate) struct Inference {
    pub requests: Requests,
    pub ids: RecordIds,
    pub book: Book,
}

/// What one sample settled, for the ledger.
pub(crate) struct Settled {
    pub records: Vec<Record>,
    /// A client waits for one of them (a receipt): written at once.
    pub at_once: bool,
}

/// Why a record for work measured elsewhere was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Its window does not run forwards.
    Backwards,
    /// It ends this many seconds in the future.
    Future(f64),
    /// No interval could be matched to it.
    Unmade,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Backwards => f.write_str("start must come before end"),
            Refused::Future(s) => write!(f, "end is {s:.1} s in the future"),
            Refused::Unmade => f.write_str("the record could not be made"),
        }
    }
}

impl Inference {
    pub fn new(book: Book, ids: RecordIds) -> Self {
        Inference {
            requests: Requests::default(),
            ids,
            book,
        }
    }

    /// The first id not yet handed out: the ledger reserves ids up to it before any is used.
    pub fn ids_ahead(&self) -> u64 {
        self.ids.next()
    }

    /// Observes a sampled interval: the book keeps it with the requests open during it.
    /// Whether a local request (not a cloud one) was open then.
    pub fn observe(&mut self, interval: &Interval) -> bool {
        let open = self.requests.open();
        self.book.push_interval(interval.clone(), &open);
        open.iter().any(|o| !o.remote)
    }

    /// A proxy request is in flight, or waits for the sample that settles it.
    pub fn busy(&self) -> bool {
        self.requests.inflight() > 0 || self.requests.unsettled()
    }

    /// What the proxy measured itself, for the windows of its upstream's own counters.
    pub fn proxy_seen(&self) -> ProxySeen {
        let open = self
            .requests
            .open()
            .into_iter()
            .filter(|o| !o.remote)
            .map(|o| {
                let end = o.end.map_or(f64::INFINITY, |e| e.unix_seconds);
                (o.start.unix_seconds, end)
            });
        let recent = self.book.view();
        ProxySeen {
            upstream_port: self.requests.upstream_port(),
            spans: open
                .chain(recent.recent.iter().map(|r| (r.start, r.end)))
                .collect(),
        }
    }

    /// Turns the requests that ended by `at` (the latest sample) into records.
    pub fn settle(&mut self, at: Stamp) -> Option<Settled> {
        let finished = self.requests.take_finished(at.monotonic);
        if finished.is_empty() {
            return None;
        }
        let at_once = finished.iter().any(|f| f.urgent);
        let records = self.book.settle(finished, &self.requests.open());
        Some(Settled { records, at_once })
    }

    /// The idle baseline, when it changed since the last call.
    pub fn take_baseline_change(&mut self) -> Option<Baseline> {
        self.book.take_baseline_change()
    }

    /// Whether work a client measured itself can be recorded at wall-clock `now`: its window
    /// runs forwards and has ended.
    pub fn check_external(e: &External, now: f64) -> Result<(), Refused> {
        if !(e.start.is_finite() && e.end.is_finite() && e.start < e.end) {
            return Err(Refused::Backwards);
        }
        if e.end > now + 1.0 {
            return Err(Refused::Future(e.end - now));
        }
        Ok(())
    }

    /// Makes the record of `e` (checked) as of the latest sample `last`.
    pub fn external(&mut self, e: External, last: Stamp) -> Result<Record, Refused> {
        self.book
            .external(e, self.ids.take(), last, &self.requests.open())
            .ok_or(Refused::Unmade)
    }

    /// What low-power mode's advice weighs: the score, the efficiency and the best model.
    pub fn measured(&self) -> Measured {
        let v = self.book.view();
        Measured {
            score: v.score,
            tokens_per_second_per_watt: v.tokens_per_second_per_watt,
            most_efficient_model: v.most_efficient_model.clone(),
        }
    }

    pub fn view(&self) -> Arc<InferenceView> {
        self.book.view()
    }
}
