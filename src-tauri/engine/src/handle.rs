//! The handle that owns the engine thread, and the readers' side of it: the published state,
//! the recent history, the ledger's queries and the commands that go back to the engine.
//! Tray, UI, API and CLI only read [`PublishedState`] and send [`Command`]s; nothing else reaches
//! into the engine.

use crate::command::Command;
use crate::error::Error;
use crate::ledger_reader::LedgerReader;
use crate::published::{Point, PublishedState};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use wattbar_core::inference::server_totals::{sum_windows, ServerTotal};
use wattbar_core::inference::{window_energy, Interval, Record, WindowEnergy};
use wattbar_core::Preferences;

/// Server windows read for one range at most: 400 days of one server's 10 s windows would be
/// 3.5 million; a range that long is answered from its newest 100,000 (11 days of one server).
const SERVER_WINDOWS_READ: usize = 100_000;
/// How long [`EngineHandle::shutdown`] waits for the last batch to be written: longer than a
/// write waits for a busy ledger (SQLite's 5 s), so that its answer comes first.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// Owns the engine thread: dropping it stops the engine (after the command in hand).
pub struct EngineHandle {
    pub(crate) reader: EngineReader,
    pub(crate) thread: Option<std::thread::JoinHandle<()>>,
}

/// What [`EngineReader::inference_record`] found.
#[derive(Debug)]
pub enum Found {
    Record(Box<Record>),
    /// The request has not ended, or its record is not made yet.
    Pending,
    None,
}

/// A cloneable view of a running engine for servers and windows: read the state, send commands.
#[derive(Clone)]
pub struct EngineReader {
    pub(crate) state: watch::Receiver<Arc<PublishedState>>,
    pub(crate) commands: Arc<crate::command::EngineInbox>,
    /// The ledger, read-only for readers.
    pub(crate) ledger: Option<LedgerReader>,
    pub(crate) reporter: crate::inference::Reporter,
    /// The proxy's keys and their budgets.
    pub(crate) keys: crate::keys::Keys,
    /// Changes each time low-power mode switches on, and only then.
    pub(crate) engaged: watch::Receiver<u64>,
    pub(crate) low_power_events:
        tokio::sync::broadcast::Sender<crate::stages::low_power::LowPowerEvent>,
    /// The preferences, changed when they are.
    pub(crate) prefs: watch::Receiver<Preferences>,
    /// Who looks, so that the engine rests only while nobody does ([`crate::stages::rest`]).
    pub(crate) attention: Arc<crate::stages::rest::Attention>,
}

impl EngineReader {
    /// Stored history from `from` to `to` (Unix seconds), read-only; empty before anything was
    /// stored or without a ledger.
    pub async fn history(
        &self,
        from: f64,
        to: f64,
        step: wattbar_ledger::store::Step,
    ) -> Result<Vec<wattbar_ledger::store::HistoryPoint>, Error> {
        let Some(ledger) = &self.ledger else {
            return Ok(Vec::new());
        };
        let points = ledger
            .read(move |store| Ok(store.history(from, to, step)?))
            .await?;
        Ok(points.unwrap_or_default())
    }

    /// The ledger's read-only handle, shared by every reader of this engine; `None` without one.
    pub fn ledger(&self) -> Option<&LedgerReader> {
        self.ledger.as_ref()
    }

    /// The proxy's keys: the proxy holds on them, the API lists and changes them.
    pub fn keys(&self) -> &crate::keys::Keys {
        &self.keys
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<PublishedState>> {
        self.state.clone()
    }

    /// The preferences in force; wakes when they change (not at every sample).
    pub fn preferences(&self) -> watch::Receiver<Preferences> {
        self.prefs.clone()
    }

    /// Wakes each time low-power mode switches on (not at every sample).
    pub fn engagements(&self) -> watch::Receiver<u64> {
        self.engaged.clone()
    }

    /// Each low-power event from now on, as it happens, in order: a switch and what it did
    /// (an unload) are two events, never one sampled state. A receiver that falls more than
    /// [`EVENTS_BUFFERED`](crate::stages::low_power::EVENTS_BUFFERED) behind is told how many it missed.
    pub fn low_power_events(
        &self,
    ) -> tokio::sync::broadcast::Receiver<crate::stages::low_power::LowPowerEvent> {
        self.low_power_events.subscribe()
    }

    /// Where the inference proxy reports the requests it sees.
    pub fn reporter(&self) -> crate::inference::Reporter {
        self.reporter.clone()
    }

    /// The energy of a wall-clock window: exact at the sampling resolution over the last
    /// [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP), from the stored samples before.
    pub async fn energy(&self, from: f64, to: f64) -> Result<WindowEnergy, Error> {
        let mut intervals: Vec<Interval> =
            self.current().inference.intervals.iter().cloned().collect();
        let kept_from = intervals.first().map_or(f64::INFINITY, |i| i.unix_start);
        if from < kept_from {
            if let Some(ledger) = &self.ledger {
                let until = to.min(kept_from);
                let older = ledger
                    .read(move |store| Ok(store.intervals(from, until)?))
                    .await?;
                if let Some(older) = older {
                    // The store's rows reach past `until` (its gap allowance), into what this
                    // engine keeps and stored too: only the part before is added.
                    let mut older: Vec<Interval> = older
                        .into_iter()
                        .filter_map(|i| i.before(kept_from))
                        .collect();
                    older.append(&mut intervals);
                    intervals = older;
                }
            }
        }
        Ok(window_energy(&intervals, from, to))
    }

    /// Each model's sums over the server windows that lie wholly inside `from`–`to` (Unix
    /// seconds), as the ledger committed them; none without a ledger. Windows the proxy
    /// measured, or whose energy is unknown, add to no sum ([`ServerTotal::add`]).
    pub async fn server_totals(&self, from: f64, to: f64) -> Result<Vec<ServerTotal>, Error> {
        let Some(ledger) = &self.ledger else {
            return Ok(Vec::new());
        };
        let windows = ledger
            .read(move |store| Ok(store.server_windows(from, to, SERVER_WINDOWS_READ)?))
            .await?
            .unwrap_or_default();
        Ok(sum_windows(windows.iter().filter(|w| w.from >= from)))
    }

    /// The ledger's report of `from`–`to` (Unix seconds), in the preferences' currency and this
    /// machine's local time, read on the blocking pool; its readers draw it.
    pub async fn report(&self, from: f64, to: f64) -> Result<wattbar_report::Report, Error> {
        let nothing =
            || Error::Refused("this engine keeps no ledger yet: nothing to report".into());
        let ledger = self.ledger.as_ref().ok_or_else(nothing)?;
        let prefs = self.current().prefs.clone();
        ledger
            .read(move |store| Ok(crate::report::local(store, &prefs, from, to)?))
            .await?
            .ok_or_else(nothing)
    }

    /// The measured intervals that ended after `after` (Unix seconds), oldest first, from the
    /// last [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP): for a reader that keeps its own
    /// record of a longer stretch.
    pub fn intervals_after(&self, after: f64) -> Vec<Interval> {
        self.current()
            .inference
            .intervals
            .iter()
            .filter(|i| i.unix_end > after)
            .cloned()
            .collect()
    }

    /// Inference records that ended at or after `since`, newest first, at most `limit`: from
    /// the ledger, with those not yet written from memory.
    pub async fn inference(&self, since: f64, limit: usize) -> Result<Vec<Record>, Error> {
        let kept = self.current();
        let mut records: Vec<Record> = kept
            .inference
            .records
            .iter()
            .rev()
            .filter(|r| r.end >= since)
            .take(limit)
            .cloned()
            .collect();
        if let Some(ledger) = &self.ledger {
            let stored = ledger
                .read(move |store| Ok(store.inference(since, limit)?))
                .await?;
            if let Some(stored) = stored {
                let known: std::collections::BTreeSet<u64> = stored.iter().map(|r| r.id).collect();
                records.retain(|r| !known.contains(&r.id));
                records.extend(stored);
                records.sort_by(|a, b| b.end.total_cmp(&a.end).then(b.id.cmp(&a.id)));
                records.truncate(limit);
            }
        }
        Ok(records)
    }

    /// Record `id`: from the records the engine holds, else from the ledger. A request still in
    /// flight, or ended and not yet settled, is waited for up to `wait`; it is `Pending` after.
    pub async fn inference_record(&self, id: u64, wait: Duration) -> Result<Found, Error> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::AwaitSettled(id, tx))?;
        match tokio::time::timeout(wait, rx).await {
            Err(_) => return Ok(Found::Pending),
            Ok(Err(_)) => return Err(Error::Stopped),
            Ok(Ok(())) => {}
        }
        let kept = self
            .current()
            .inference
            .records
            .iter()
            .rev()
            .find(|r| r.id == id)
            .cloned();
        if let Some(r) = kept {
            return Ok(Found::Record(Box::new(r)));
        }
        let Some(ledger) = &self.ledger else {
            return Ok(Found::None);
        };
        let stored = ledger
            .read(move |store| Ok(store.inference_record(id)?))
            .await?;
        Ok(match stored.flatten() {
            Some(r) => Found::Record(Box::new(r)),
            None => Found::None,
        })
    }

    /// Asks the engine to record inference a client measured itself.
    pub async fn record_inference(
        &self,
        external: crate::command::External,
    ) -> Result<Record, Error> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::RecordInference(Box::new(external), tx))?;
        rx.await.map_err(|_| Error::Stopped)?
    }

    /// Keeps a graded profile; answers once its batch was written, or why it was refused.
    pub async fn record_profile(
        &self,
        profile: wattbar_ledger::store::profiles::StoredProfile,
    ) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::RecordProfile(Box::new(profile), tx))?;
        rx.await.map_err(|_| Error::Stopped)?
    }

    pub fn current(&self) -> Arc<PublishedState> {
        self.state.borrow().clone()
    }

    /// Headline watts over the last [`RECENT_WINDOW`](crate::published::RECENT_WINDOW), oldest first.
    pub fn recent(&self) -> Vec<Point> {
        self.current().energy.history.iter().copied().collect()
    }

    pub fn send(&self, command: Command) -> Result<(), Error> {
        self.commands.send(command).map_err(|_| Error::Stopped)
    }

    /// Someone asked (an API request): the engine samples at the configured pace from now on,
    /// woken at once if it rests. Two atomic operations while it is awake.
    pub fn asked(&self) {
        if self.attention.ask() {
            let _ = self.commands.send(Command::Wake);
        }
    }

    /// Someone watches (an event stream) while the guard is held: the engine does not rest.
    pub fn watching(&self) -> crate::stages::rest::Watching {
        let (watching, wake) = self.attention.watch();
        if wake {
            let _ = self.commands.send(Command::Wake);
        }
        watching
    }

    /// Asks the engine to set one preference (see [`Command::SetPreference`]); answers with every
    /// preference once the change is published, or why it was refused.
    pub async fn set_preference(
        &self,
        key: &str,
        value: serde_json::Value,
    ) -> Result<Preferences, Error> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::SetPreference {
            key: key.to_string(),
            value,
            reply,
        })?;
        rx.await.map_err(|_| Error::Stopped)?
    }

    /// Asks the engine to take `prefs`; answers with its verdict (a refusal says why).
    pub async fn set_preferences(&self, prefs: Preferences) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::SetPreferences(Box::new(prefs), Some(tx)))?;
        rx.await.map_err(|_| Error::Stopped)?
    }
}

impl EngineHandle {
    pub fn reader(&self) -> EngineReader {
        self.reader.clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<PublishedState>> {
        self.reader.subscribe()
    }

    pub fn current(&self) -> Arc<PublishedState> {
        self.reader.current()
    }

    /// Headline watts over the last [`RECENT_WINDOW`](crate::published::RECENT_WINDOW), oldest first.
    pub fn recent(&self) -> Vec<Point> {
        self.reader.recent()
    }

    pub fn send(&self, command: Command) -> Result<(), Error> {
        self.reader.send(command)
    }

    /// Stops the engine without writing its last batch (see [`EngineHandle::shutdown`]).
    pub fn stop(self) {
        self.reader.commands.close();
    }

    /// Flushes the store, ends the session and stops the engine; gives up waiting after 10 s
    /// of real time (a stalled source). An error: the ledger refused the last batch, or the
    /// engine did not say it was written, so what was measured since the batch before may be
    /// lost. An engine that had already stopped wrote its batch then.
    pub async fn shutdown(&self) -> Result<(), Error> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut written = Ok(());
        if self.reader.send(Command::Shutdown(tx)).is_ok() {
            let answer = tokio::task::spawn_blocking(move || rx.recv_timeout(SHUTDOWN_WAIT)).await;
            written = match answer {
                Ok(Ok(Ok(()))) => Ok(()),
                Ok(Ok(Err(e))) => Err(Error::Store(e)),
                Ok(Err(std::sync::mpsc::RecvTimeoutError::Disconnected)) => Err(Error::Stopped),
                _ => Err(Error::TimedOut(SHUTDOWN_WAIT)),
            };
        }
        self.reader.commands.close();
        written
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.reader.commands.close();
        // Not joined: a source may be stalled, and the thread ends on its own after it.
        drop(self.thread.take());
    }
}
