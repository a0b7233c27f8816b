//! The requests in flight, as the proxy reports them to the engine.
//!
//! Rule: the proxy only stamps (start, first token, end, with the engine's clock) and hands over
//! what the server said; the engine turns finished requests into records after it has sampled
//! past their end. Every change of the number in flight is announced, so the engine samples at
//! once at each start and end and samples fast while any request runs. The number in flight is
//! the open set's size, read and announced under its lock: announcements from two threads cannot
//! cross, so no request is ever left "in flight" after it ended.
//!
//! Record ids are given here, one sequence for proxied requests and records posted by clients: a
//! request gets its id when it starts, so that its answer can name the record it will become.

use crate::time::clock::Clock;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
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

#[derive(Default)]
struct State {
    next: u64,
    open: BTreeMap<u64, Open>,
    /// The record ids of the requests in flight.
    open_records: BTreeSet<u64>,
    /// The model each request in flight asked for, by its id.
    open_models: BTreeMap<u64, String>,
    finished: Vec<Finished>,
}

pub struct Tracker {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    /// The id the next record gets.
    next_record: AtomicU64,
    inflight: watch::Sender<usize>,
    /// The engine's inbox, woken at every start and end so that it samples at once.
    engine: Mutex<Option<Arc<crate::time::inbox::Inbox>>>,
    /// The models the server holds, and when the proxy read them (the engine's elapsed clock).
    loaded: Mutex<Option<(Duration, Vec<Loaded>)>>,
    /// Unloads low-power mode asked for, waiting for the engine.
    unloads: Mutex<Vec<Unload>>,
    /// The port of the proxy's upstream, where that server runs on this machine.
    upstream_port: Mutex<Option<u16>>,
}

/// How long the proxy's last reading of the loaded models is taken as true: three of its polls.
pub const LOADED_FRESH: Duration = Duration::from_secs(15);

impl Tracker {
    pub fn new(clock: Arc<dyn Clock>) -> Arc<Tracker> {
        Arc::new(Tracker {
            clock,
            state: Mutex::new(State::default()),
            next_record: AtomicU64::new(1),
            inflight: watch::Sender::new(0),
            engine: Mutex::new(None),
            loaded: Mutex::new(None),
            unloads: Mutex::new(Vec::new()),
            upstream_port: Mutex::new(None),
        })
    }

    /// The port the proxy's upstream listens on, where it is on this machine: the engine names
    /// the process listening there as the model server.
    pub fn set_upstream_port(&self, port: Option<u16>) {
        *self.upstream_port.lock().unwrap_or_else(|e| e.into_inner()) = port;
    }

    pub fn upstream_port(&self) -> Option<u16> {
        *self.upstream_port.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The models the server holds, as the proxy just read them; `None`: it cannot say.
    pub fn set_loaded(&self, models: Option<Vec<Loaded>>) {
        let at = self.clock.elapsed();
        *self.loaded.lock().unwrap_or_else(|e| e.into_inner()) = models.map(|m| (at, m));
    }

    /// The models the server holds, when read within [`LOADED_FRESH`]; else `None` (unknown).
    pub fn loaded(&self) -> Option<Vec<Loaded>> {
        let now = self.clock.elapsed();
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(at, _)| now.saturating_sub(*at) <= LOADED_FRESH)
            .map(|(_, m)| m.clone())
    }

    /// What an engagement unloaded: the engine records it and says it once.
    pub fn report_unload(&self, mut unload: Unload) {
        unload.t = self.clock.unix();
        self.unloads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(unload);
        self.wake();
    }

    pub fn take_unloads(&self) -> Vec<Unload> {
        std::mem::take(&mut *self.unloads.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Gives record ids from `first` on (the first id the ledger has not given), unless ids
    /// beyond it were given already.
    pub fn number_records_from(&self, first: u64) {
        self.next_record.fetch_max(first, Ordering::SeqCst);
    }

    /// The id the next record will get.
    pub fn next_record_id(&self) -> u64 {
        self.next_record.load(Ordering::SeqCst)
    }

    /// A new record id, never given before.
    pub fn take_record_id(&self) -> u64 {
        self.next_record.fetch_add(1, Ordering::SeqCst)
    }

    /// Whether `id` was given to a request not yet settled: in flight, or waiting for a sample.
    pub fn is_unsettled(&self, id: u64) -> bool {
        let s = self.lock();
        s.open_records.contains(&id) || s.finished.iter().any(|f| f.record_id == id)
    }

    /// The models requests in flight asked for.
    pub fn models_in_flight(&self) -> BTreeSet<String> {
        self.lock().open_models.values().cloned().collect()
    }

    /// Wakes `inbox` whenever a request starts or ends.
    pub(crate) fn wake_on_change(&self, inbox: Arc<crate::time::inbox::Inbox>) {
        *self.engine.lock().unwrap_or_else(|e| e.into_inner()) = Some(inbox);
    }

    /// Announces the number in flight; called with the state locked, so that announcements keep
    /// the order of the changes.
    fn announce(&self, inflight: usize) {
        self.inflight.send_replace(inflight);
    }

    fn wake(&self) {
        if let Some(inbox) = self
            .engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            inbox.wake();
        }
    }

    fn now(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request starts now.
    pub fn begin(self: &Arc<Self>, route: Route, model: Option<String>) -> InFlight {
        let start = self.now();
        let remote = model.as_deref().is_some_and(is_remote_model);
        let record_id = self.take_record_id();
        let mut s = self.lock();
        s.next += 1;
        let id = s.next;
        s.open_records.insert(record_id);
        if let Some(m) = &model {
            s.open_models.insert(id, m.clone());
        }
        s.open.insert(
            id,
            Open {
                start,
                first_token: None,
                remote,
                end: None,
            },
        );
        self.announce(s.open.len());
        drop(s);
        self.wake();
        InFlight {
            tracker: Arc::clone(self),
            id,
            record_id,
            route,
            model,
            requested_model: None,
            remote,
            first_token: None,
            ended: false,
            urgent: false,
        }
    }

    /// Requests in flight now.
    pub fn inflight(&self) -> usize {
        self.lock().open.len()
    }

    /// Wakes on every start and end.
    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.inflight.subscribe()
    }

    /// Requests that ended and wait for the engine's next sample.
    pub fn unsettled(&self) -> bool {
        !self.lock().finished.is_empty()
    }

    /// A request that ended waits for its record with its client waiting too.
    pub fn urgent(&self) -> bool {
        self.lock().finished.iter().any(|f| f.urgent)
    }

    /// The requests still in flight, and those ended but not yet taken by [`Tracker::take_finished`].
    pub fn open(&self) -> Vec<Open> {
        let s = self.lock();
        // A request that ended after the sample being settled waits for the next one; until
        // then it still shares the intervals it overlapped with those settled now.
        let ended = s.finished.iter().map(|f| Open {
            start: f.start,
            first_token: f.first_token,
            remote: f.remote,
            end: Some(f.end),
        });
        s.open.values().copied().chain(ended).collect()
    }

    /// Takes the finished requests that ended no later than `upto`, the engine's last sample.
    pub fn take_finished(&self, upto: std::time::Duration) -> Vec<Finished> {
        let mut s = self.lock();
        let (done, later): (Vec<Finished>, Vec<Finished>) = std::mem::take(&mut s.finished)
            .into_iter()
            .partition(|f| f.end.monotonic <= upto);
        s.finished = later;
        done
    }

    /// Forgets a request that never reached the server: it is no longer in flight, and no record
    /// is made.
    fn forget(&self, id: u64, record_id: u64) {
        let mut s = self.lock();
        s.open.remove(&id);
        s.open_records.remove(&record_id);
        s.open_models.remove(&id);
        self.announce(s.open.len());
        drop(s);
        self.wake();
    }

    fn end(&self, id: u64, finished: Finished) {
        let mut s = self.lock();
        s.open.remove(&id);
        s.open_records.remove(&finished.record_id);
        s.open_models.remove(&id);
        s.finished.push(finished);
        self.announce(s.open.len());
        drop(s);
        self.wake();
    }
}

/// One request in flight. Ending it without [`InFlight::finish`] (the proxy's body dropped
/// because the client went away) records it as cancelled.
pub struct InFlight {
    tracker: Arc<Tracker>,
    id: u64,
    record_id: u64,
    route: Route,
    model: Option<String>,
    requested_model: Option<String>,
    remote: bool,
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
            let at = self.tracker.now();
            self.first_token = Some(at);
            if let Some(open) = self.tracker.lock().open.get_mut(&self.id) {
                open.first_token = Some(at);
            }
        }
    }

    pub fn has_first_token(&self) -> bool {
        self.first_token.is_some()
    }

    /// The server could not be reached: nothing ran, so nothing is recorded.
    pub fn abandon(mut self) {
        self.ended = true;
        self.tracker.forget(self.id, self.record_id);
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
        let end = self.tracker.now();
        let start = self
            .tracker
            .lock()
            .open
            .get(&self.id)
            .map_or(end, |o| o.start);
        let error = figures.error.clone();
        // The answer's own name stands in only where it could have entered as a request's.
        let model = self.model.clone().or_else(|| {
            figures
                .model
                .clone()
                .filter(|m| check_model_name(m).is_ok())
        });
        self.tracker.end(
            self.id,
            Finished {
                record_id: self.record_id,
                route: self.route,
                model,
                requested_model: self.requested_model.clone(),
                remote: self.remote,
                status,
                error,
                start,
                first_token: self.first_token,
                end,
                figures,
                urgent: self.urgent,
            },
        );
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.close(Status::Cancelled, ServerFigures::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::clock::ManualClock;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_unfinished_is_cancelled_and_each_change_is_announced() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        let mut seen = tracker.subscribe();
        let a = tracker.begin(Route::OllamaChat, Some("llama3".into()));
        assert_eq!(tracker.inflight(), 1);
        assert!(seen.has_changed().unwrap_or(false));
        seen.mark_unchanged();
        clock.sleep(Duration::from_secs(2));
        drop(a);
        assert_eq!(tracker.inflight(), 0);
        assert!(seen.has_changed().unwrap_or(false));
        let done = tracker.take_finished(clock.elapsed());
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].status, Status::Cancelled);
        assert_eq!(
            done[0].end.monotonic - done[0].start.monotonic,
            Duration::from_secs(2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_the_server_never_saw_leaves_no_record_and_nothing_in_flight() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        let a = tracker.begin(Route::OllamaChat, Some("llama3".into()));
        let id = a.record_id();
        a.abandon();
        assert_eq!(tracker.inflight(), 0);
        assert!(!tracker.is_unsettled(id));
        assert!(tracker.models_in_flight().is_empty());
        assert!(tracker.take_finished(clock.elapsed()).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_naming_a_malformed_model_leaves_the_model_unknown() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        for (named, kept) in [("qwen3:1b", Some("qwen3:1b")), ("a\nb", None)] {
            let figures = ServerFigures {
                model: Some(named.into()),
                ..Default::default()
            };
            tracker
                .begin(Route::OpenAiChat, None)
                .finish(Status::Ok, figures);
            let done = tracker.take_finished(clock.elapsed());
            assert_eq!(done[0].model.as_deref(), kept);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_knows_its_record_id_from_its_start_and_ids_go_on_from_the_ledger() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        // The ledger has given ids up to 41.
        tracker.number_records_from(42);
        let a = tracker.begin(Route::OllamaChat, Some("llama3".into()));
        let posted = tracker.take_record_id();
        let b = tracker.begin(Route::OpenAiChat, Some("llama3".into()));
        assert_eq!((a.record_id(), posted, b.record_id()), (42, 43, 44));
        // A ledger opened later never takes the numbering back.
        tracker.number_records_from(10);
        assert_eq!(tracker.take_record_id(), 45);
        assert!(tracker.is_unsettled(42));
        a.finish(Status::Ok, ServerFigures::default());
        assert!(tracker.is_unsettled(42), "ended, not yet settled");
        let done = tracker.take_finished(clock.elapsed());
        assert_eq!(
            done.iter().map(|f| f.record_id).collect::<Vec<_>>(),
            vec![42]
        );
        assert!(!tracker.is_unsettled(42));
        assert!(tracker.is_unsettled(44));
        drop(b);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_ended_after_the_last_sample_waits_for_the_next() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        let sampled = clock.elapsed();
        clock.sleep(Duration::from_millis(50));
        tracker
            .begin(Route::OllamaGenerate, None)
            .finish(Status::Ok, ServerFigures::default());
        assert!(tracker.take_finished(sampled).is_empty());
        assert_eq!(tracker.take_finished(clock.elapsed()).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_ended_after_the_sample_still_shares_with_those_settled_now() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        let a = tracker.begin(Route::OllamaGenerate, None);
        clock.sleep(Duration::from_secs(1));
        let b = tracker.begin(Route::OllamaChat, None);
        clock.sleep(Duration::from_secs(1));
        a.finish(Status::Ok, ServerFigures::default());
        let sampled = clock.elapsed();
        clock.sleep(Duration::from_millis(50));
        b.finish(Status::Ok, ServerFigures::default());
        // The sample's settling takes A; B ended after it, so waits for the next sample, yet it
        // overlapped A for a second and must be among those A shares with.
        assert_eq!(tracker.take_finished(sampled).len(), 1);
        let others = tracker.open();
        assert_eq!(others.len(), 1);
        assert_eq!(
            others[0]
                .end
                .map(|e| e.monotonic - others[0].start.monotonic),
            Some(Duration::from_millis(1050))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn requests_ending_on_many_threads_leave_none_in_flight() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let tracker = Tracker::new(clock.clone());
        let seen = tracker.subscribe();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let tracker = Arc::clone(&tracker);
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        drop(tracker.begin(Route::OpenAiChat, None));
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        assert_eq!(tracker.inflight(), 0);
        assert_eq!(*seen.borrow(), 0);
        assert_eq!(tracker.take_finished(clock.elapsed()).len(), 4000);
    }
}
