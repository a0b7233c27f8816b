//! The requests the engine knows of, built from the proxy's events: in flight, ended and waiting
//! for the sample that settles them, the models the server holds, and the upstream's port.
//!
//! Rule: owned by the engine thread alone; the proxy only sends
//! [`RequestEvent`](super::events::RequestEvent)s, and readers learn what they need from the
//! published state or by asking the engine ([`Requests::await_settled`]).

use super::events::{Finished, Open, RequestEvent};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use wattbar_core::inference::resident::Loaded;

/// How long the proxy's last reading of the loaded models is taken as true: three of its polls.
pub const LOADED_FRESH: Duration = Duration::from_secs(15);

#[derive(Default)]
pub struct Requests {
    /// The requests in flight, by record id.
    open: BTreeMap<u64, Open>,
    /// The model each request in flight asked for, by record id.
    open_models: BTreeMap<u64, String>,
    /// Ended, waiting for a sample past their end.
    finished: Vec<Finished>,
    /// The models the server holds, and when the proxy read them (the engine's elapsed clock).
    loaded: Option<(Duration, Vec<Loaded>)>,
    upstream_port: Option<u16>,
    /// Readers waiting for a record to be settled, by its id.
    waiting: Vec<(u64, oneshot::Sender<()>)>,
    /// The models requests in flight asked for, as published.
    models_in_flight: Arc<[String]>,
}

impl Requests {
    /// Takes one event; `true` when a request started or ended, so that the engine samples now.
    pub fn apply(&mut self, event: RequestEvent) -> bool {
        match event {
            RequestEvent::Began {
                record_id,
                start,
                remote,
                model,
            } => {
                self.open.insert(
                    record_id,
                    Open {
                        start,
                        first_token: None,
                        remote,
                        end: None,
                    },
                );
                if let Some(m) = model {
                    self.open_models.insert(record_id, m);
                    self.models_changed();
                }
                true
            }
            RequestEvent::FirstToken { record_id, at } => {
                if let Some(open) = self.open.get_mut(&record_id) {
                    open.first_token.get_or_insert(at);
                }
                false
            }
            RequestEvent::Ended(finished) => {
                self.close(finished.record_id);
                self.finished.push(*finished);
                true
            }
            RequestEvent::Abandoned { record_id } => {
                self.close(record_id);
                true
            }
            RequestEvent::Loaded { at, models } => {
                self.loaded = models.map(|m| (at, m));
                false
            }
            RequestEvent::Upstream(port) => {
                self.upstream_port = port;
                false
            }
            // The engine records and says unloads and refusals itself; nothing here depends on
            // them.
            RequestEvent::Unloaded(_) | RequestEvent::KeyRefused(_) => false,
        }
    }

    fn close(&mut self, record_id: u64) {
        self.open.remove(&record_id);
        if self.open_models.remove(&record_id).is_some() {
            self.models_changed();
        }
    }

    fn models_changed(&mut self) {
        let mut models: Vec<String> = self.open_models.values().cloned().collect();
        models.sort();
        models.dedup();
        self.models_in_flight = Arc::from(models);
    }

    /// Requests in flight now.
    pub fn inflight(&self) -> usize {
        self.open.len()
    }

    /// The models requests in flight asked for, sorted, each once.
    pub fn models_in_flight(&self) -> Arc<[String]> {
        Arc::clone(&self.models_in_flight)
    }

    /// Requests that ended and wait for the engine's next sample.
    pub fn unsettled(&self) -> bool {
        !self.finished.is_empty()
    }

    /// A request that ended waits for its record with its client waiting too.
    pub fn urgent(&self) -> bool {
        self.finished.iter().any(|f| f.urgent)
    }

    /// Whether record `id` belongs to a request not yet settled: in flight, or waiting for a
    /// sample.
    pub fn is_unsettled(&self, id: u64) -> bool {
        self.open.contains_key(&id) || self.finished.iter().any(|f| f.record_id == id)
    }

    /// The requests still in flight, and those ended but not yet taken by
    /// [`Requests::take_finished`].
    pub fn open(&self) -> Vec<Open> {
        // A request that ended after the sample being settled waits for the next one; until
        // then it still shares the intervals it overlapped with those settled now.
        let ended = self.finished.iter().map(|f| Open {
            start: f.start,
            first_token: f.first_token,
            remote: f.remote,
            end: Some(f.end),
        });
        self.open.values().copied().chain(ended).collect()
    }

    /// Takes the finished requests that ended no later than `upto`, the engine's last sample.
    pub fn take_finished(&mut self, upto: Duration) -> Vec<Finished> {
        let (done, later): (Vec<Finished>, Vec<Finished>) = std::mem::take(&mut self.finished)
            .into_iter()
            .partition(|f| f.end.monotonic <= upto);
        self.finished = later;
        done
    }

    /// The models the server holds, when read within [`LOADED_FRESH`] of `now`; else `None`
    /// (unknown).
    pub fn loaded(&self, now: Duration) -> Option<&[Loaded]> {
        self.loaded
            .as_ref()
            .filter(|(at, _)| now.saturating_sub(*at) <= LOADED_FRESH)
            .map(|(_, m)| m.as_slice())
    }

    pub fn upstream_port(&self) -> Option<u16> {
        self.upstream_port
    }

    /// `reply` is answered once record `id` is settled, or at once when nothing of it is
    /// pending (settled already, never given, or its request abandoned).
    pub fn await_settled(&mut self, id: u64, reply: oneshot::Sender<()>) {
        self.waiting.push((id, reply));
    }

    /// The waiters whose record is settled now, for the engine to answer once it has published.
    pub fn take_answerable(&mut self) -> Vec<oneshot::Sender<()>> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        let (ready, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(id, _)| !self.is_unsettled(*id));
        self.waiting = still;
        ready.into_iter().map(|(_, reply)| reply).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::EngineInbox;
    use crate::inbox::Woken;
    use crate::inference::events::RecordIds;
    use crate::inference::reporter::Reporter;
    use crate::time::clock::{Clock, ManualClock};
    use wattbar_core::inference::{Route, ServerFigures, Status};

    // Each test runs on tokio's paused clock, which the manual clock follows: elapsed time moves
    // only when a test moves it.

    fn reporter(clock: &Arc<ManualClock>) -> (Arc<EngineInbox>, Reporter) {
        let inbox = Arc::new(EngineInbox::default());
        let clock: Arc<dyn Clock> = clock.clone();
        let reporter = Reporter::new(
            crate::command::events_into(&inbox),
            clock,
            RecordIds::default(),
        );
        (inbox, reporter)
    }

    /// Hands every queued event to `requests`; `true` when one would make the engine sample.
    fn deliver(inbox: &EngineInbox, requests: &mut Requests) -> bool {
        let mut wake = false;
        while let Some(Woken::Events(events)) = inbox.take() {
            for e in events {
                wake |= requests.apply(e);
            }
        }
        wake
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_unfinished_is_cancelled_and_its_start_and_end_wake_the_engine() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        let a = reporter.begin(Route::OllamaChat, Some("llama3".into()));
        assert!(deliver(&inbox, &mut requests));
        assert_eq!(requests.inflight(), 1);
        assert_eq!(&*requests.models_in_flight(), ["llama3".to_string()]);
        clock.sleep(Duration::from_secs(2));
        drop(a);
        assert!(deliver(&inbox, &mut requests));
        assert_eq!(requests.inflight(), 0);
        assert!(requests.models_in_flight().is_empty());
        let done = requests.take_finished(clock.elapsed());
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
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        let a = reporter.begin(Route::OllamaChat, Some("llama3".into()));
        let id = a.record_id();
        a.abandon();
        deliver(&inbox, &mut requests);
        assert_eq!(requests.inflight(), 0);
        assert!(!requests.is_unsettled(id));
        assert!(requests.models_in_flight().is_empty());
        assert!(requests.take_finished(clock.elapsed()).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_naming_a_malformed_model_leaves_the_model_unknown() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        for (named, kept) in [("qwen3:1b", Some("qwen3:1b")), ("a\nb", None)] {
            let figures = ServerFigures {
                model: Some(named.into()),
                ..Default::default()
            };
            reporter
                .begin(Route::OpenAiChat, None)
                .finish(Status::Ok, figures);
            deliver(&inbox, &mut requests);
            let done = requests.take_finished(clock.elapsed());
            assert_eq!(done[0].model.as_deref(), kept);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_waiting_for_a_record_is_answered_when_it_is_settled_and_not_before() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        let a = reporter.begin(Route::OllamaChat, None);
        let id = a.record_id();
        deliver(&inbox, &mut requests);
        let (tx, mut rx) = oneshot::channel();
        requests.await_settled(id, tx);
        // An id nobody is running is answered at once.
        let (never, mut never_rx) = oneshot::channel();
        requests.await_settled(id + 100, never);
        for reply in requests.take_answerable() {
            let _ = reply.send(());
        }
        assert!(never_rx.try_recv().is_ok());
        assert!(rx.try_recv().is_err(), "in flight");
        a.finish(Status::Ok, ServerFigures::default());
        deliver(&inbox, &mut requests);
        assert!(
            requests.take_answerable().is_empty(),
            "ended, not yet settled"
        );
        assert_eq!(requests.take_finished(clock.elapsed()).len(), 1);
        for reply in requests.take_answerable() {
            let _ = reply.send(());
        }
        assert!(rx.try_recv().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn record_ids_go_on_from_the_ledger_and_are_never_given_twice() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let ids = RecordIds::default();
        let clock_dyn: Arc<dyn Clock> = clock.clone();
        let inbox = Arc::new(EngineInbox::default());
        let reporter = Reporter::new(crate::command::events_into(&inbox), clock_dyn, ids.clone());
        // The ledger has given ids up to 41.
        ids.number_from(42);
        let a = reporter.begin(Route::OllamaChat, Some("llama3".into()));
        let posted = ids.take();
        let b = reporter.begin(Route::OpenAiChat, Some("llama3".into()));
        assert_eq!((a.record_id(), posted, b.record_id()), (42, 43, 44));
        // A ledger opened later never takes the numbering back.
        ids.number_from(10);
        assert_eq!(ids.take(), 45);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_ended_after_the_sample_waits_for_the_next_yet_shares_with_those_settled(
    ) {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        let a = reporter.begin(Route::OllamaGenerate, None);
        clock.sleep(Duration::from_secs(1));
        let b = reporter.begin(Route::OllamaChat, None);
        clock.sleep(Duration::from_secs(1));
        a.finish(Status::Ok, ServerFigures::default());
        let sampled = clock.elapsed();
        clock.sleep(Duration::from_millis(50));
        b.finish(Status::Ok, ServerFigures::default());
        deliver(&inbox, &mut requests);
        // The sample's settling takes A; B ended after it, so waits for the next sample, yet it
        // overlapped A for a second and must be among those A shares with.
        assert_eq!(requests.take_finished(sampled).len(), 1);
        let others = requests.open();
        assert_eq!(others.len(), 1);
        assert_eq!(
            others[0]
                .end
                .map(|e| e.monotonic - others[0].start.monotonic),
            Some(Duration::from_millis(1050))
        );
        assert_eq!(requests.take_finished(clock.elapsed()).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_ending_on_many_threads_leave_none_in_flight() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let reporter = reporter.clone();
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        drop(reporter.begin(Route::OpenAiChat, Some("m".into())));
                    }
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().is_ok());
        }
        let mut requests = Requests::default();
        deliver(&inbox, &mut requests);
        assert_eq!(requests.inflight(), 0);
        assert!(requests.models_in_flight().is_empty());
        assert_eq!(requests.take_finished(clock.elapsed()).len(), 4000);
    }

    #[tokio::test(start_paused = true)]
    async fn loaded_models_read_more_than_15_s_ago_are_unknown() {
        let clock = Arc::new(ManualClock::new(1_800_000_000.0));
        let (inbox, reporter) = reporter(&clock);
        let mut requests = Requests::default();
        reporter.loaded(Some(Vec::new()));
        deliver(&inbox, &mut requests);
        assert_eq!(requests.loaded(clock.elapsed()).map(<[_]>::len), Some(0));
        clock.sleep(Duration::from_secs(16));
        assert!(requests.loaded(clock.elapsed()).is_none());
    }
}
