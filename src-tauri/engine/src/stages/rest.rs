//! Rest: the engine samples at the slower `rest_interval_ms` while nobody looks and a counter
//! keeps the energy exact, and at the configured pace again as soon as someone looks.
//!
//! Rules:
//! - The engine rests only where it was started to ([`EngineConfig::may_rest`]: `serve` and the
//!   tray; never `run`, `watch` or `top`, which are watched by definition), and only while:
//!   - the headline comes from a counter: a hardware energy counter (RAPL, NVML, a plug's
//!     meter, a battery's charge) or an estimate built on one (CPU time, from `/proc/stat` or
//!     the OS): its energy is exact at any pace. A headline integrated from power readings keeps
//!     its pace, since its error grows with the interval;
//!   - no proxy request is in flight or waiting to be settled;
//!   - no event stream is open (a dashboard, the app's window, a router) ([`Watching`]);
//!   - no API request came for [`DEFAULT_REST_AFTER`] (`/metrics` does not count: its counters
//!     are exact at any pace, and `wattbar_sample_age_seconds` says how old the sample is).
//! - Someone looking wakes it at once: an API request or a stream's start sends
//!   [`Command::Wake`](crate::Command::Wake) while it rests, and the next sample comes one
//!   configured interval later. A proxy request's start wakes it through its own event.
//! - Readers and the engine share [`Attention`]: a flag a reader sets at each request, a count of
//!   open streams, and whether the engine rests. The engine alone decides. Each side writes its
//!   own and then reads the other's (sequentially consistent), and the engine looks again after
//!   it starts to rest: a request that comes as it decides is never missed.
//! - While awake, the first of these that keeps it so is said ([`Rest::awake_because`], in
//!   `/v1/snapshot`'s `pace`).
//!
//! [`EngineConfig::may_rest`]: crate::EngineConfig::may_rest

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::meter::Method;

/// How long after the last API request the engine may rest.
pub const DEFAULT_REST_AFTER: Duration = Duration::from_secs(30);

/// Who looks at the engine, as readers tell it.
#[derive(Debug, Default)]
pub struct Attention {
    /// Event streams open now.
    watchers: AtomicUsize,
    /// An API request came since the engine last looked.
    asked: AtomicBool,
    /// The engine rests now: a reader must wake it.
    resting: AtomicBool,
}

impl Attention {
    /// An API request: whether the engine rests, and so must be woken.
    pub(crate) fn ask(&self) -> bool {
        self.asked.store(true, Ordering::SeqCst);
        self.resting.load(Ordering::SeqCst)
    }

    /// A stream opens, held while it stays open: whether the engine rests, and so must be woken.
    pub(crate) fn watch(self: &Arc<Self>) -> (Watching, bool) {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        let watching = Watching(Arc::clone(self));
        (watching, self.resting.load(Ordering::SeqCst))
    }
}

/// An open event stream: the engine does not rest while one is held.
#[derive(Debug)]
pub struct Watching(Arc<Attention>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The stage: whether the engine rests now.
#[derive(Debug)]
pub struct Rest {
    may: bool,
    after: Duration,
    attention: Arc<Attention>,
    /// The engine's clock when someone last asked (the start counts as asking).
    asked_at: Duration,
    /// Why it did not rest at the last sample; `None` while it rests.
    awake_because: Option<&'static str>,
    resting: bool,
}

impl Rest {
    /// `may`: whether this engine rests at all; `after`: how long after the last request;
    /// `now`: the engine's clock at the start.
    pub fn new(may: bool, after: Duration, now: Duration) -> Self {
        Rest {
            may,
            after,
            attention: Arc::default(),
            asked_at: now,
            awake_because: None,
            resting: false,
        }
    }

    /// What readers share with this stage.
    pub fn attention(&self) -> Arc<Attention> {
        Arc::clone(&self.attention)
    }

    /// Someone looked at `now`: awake from here on.
    pub fn woken(&mut self, now: Duration) {
        self.asked_at = now;
        self.awake_because = Some("an API request came within the quiet time");
        self.set(false);
    }

    /// At each sample (`now`, and how its headline was found), with `busy`: a proxy request in
    /// flight or unsettled. Whether the engine rests until the next.
    pub fn observe(&mut self, now: Duration, headline: Option<Method>, busy: bool) -> bool {
        if self.attention.asked.swap(false, Ordering::SeqCst) {
            self.asked_at = now;
        }
        let quiet = now.saturating_sub(self.asked_at) >= self.after;
        self.awake_because = if !self.may {
            Some("this engine does not rest: it runs for someone watching (run, watch, top)")
        } else if headline != Some(Method::Counter) {
            Some("the headline is integrated from power readings, whose error grows with the interval")
        } else if busy {
            Some("a proxy request is in flight or waits to be settled")
        } else if self.watched() {
            Some("an event stream is open")
        } else if !quiet {
            Some("an API request came within the quiet time")
        } else {
            None
        };
        self.set(self.awake_because.is_none());
        // A reader that asked, or opened a stream, while this stage decided saw it awake and
        // sent no wake: look again now that resting is said.
        if self.resting && (self.attention.asked.load(Ordering::SeqCst) || self.watched()) {
            self.awake_because = Some("an API request or a stream came as it decided");
            self.set(false);
        }
        self.resting
    }

    fn watched(&self) -> bool {
        self.attention.watchers.load(Ordering::SeqCst) > 0
    }

    /// Whether the engine rests now.
    pub fn resting(&self) -> bool {
        self.resting
    }

    /// Why it did not rest at the last sample; `None` while it rests, or before the first.
    pub fn awake_because(&self) -> Option<&'static str> {
        self.awake_because
    }

    fn set(&mut self, resting: bool) {
        self.resting = resting;
        self.attention.resting.store(resting, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn it_rests_only_on_a_counter_after_the_quiet_and_while_nobody_looks() {
        let mut rest = Rest::new(true, S(30), S(0));
        let counter = Some(Method::Counter);
        assert!(
            !rest.observe(S(29), counter, false),
            "not quiet for 30 s yet"
        );
        assert!(rest.observe(S(30), counter, false));
        assert_eq!(rest.awake_because(), None);
        // An integrated headline keeps the pace: its error grows with the interval.
        assert!(!rest.observe(S(31), Some(Method::Trapezoid), false));
        assert!(rest
            .awake_because()
            .is_some_and(|why| why.contains("integrated from power readings")));
        assert!(!rest.observe(S(32), None, false));
        // A proxy request in flight.
        assert!(!rest.observe(S(33), counter, true));
        assert!(rest
            .awake_because()
            .is_some_and(|why| why.contains("proxy")));
        assert!(rest.observe(S(34), counter, false));
        // An API request: a reader is told to wake it, and the quiet starts again.
        assert!(rest.attention().ask(), "the engine rests: wake it");
        assert!(!rest.observe(S(35), counter, false));
        assert!(!rest.attention().ask(), "awake: no need to wake it");
        // The second request counts too: the quiet starts again at the sample after it (64 s).
        assert!(!rest.observe(S(64), counter, false));
        assert!(!rest.observe(S(93), counter, false));
        assert!(rest.observe(S(94), counter, false));
        // A stream held open keeps it awake however long; closed, it rests again.
        let attention = rest.attention();
        let (watching, wake) = attention.watch();
        assert!(wake, "the engine rests: wake it");
        rest.woken(S(100));
        assert!(!rest.observe(S(500), counter, false));
        drop(watching);
        assert!(rest.observe(S(501), counter, false));
    }

    #[test]
    fn an_engine_not_started_to_rest_never_does() {
        let mut rest = Rest::new(false, S(30), S(0));
        assert!(!rest.observe(S(3600), Some(Method::Counter), false));
        assert!(rest
            .awake_because()
            .is_some_and(|why| why.contains("does not rest")));
        assert!(!rest.attention().ask());
    }
}
