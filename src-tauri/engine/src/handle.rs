//! The engine as its readers see it: the published state and the handle that owns the task.
//! Tray, UI, API and CLI only read [`Published`] and send [`Command`]s; nothing else reaches
//! into the engine.

use crate::budget::BudgetAlert;
use crate::command::Command;
use crate::error::Error;
use crate::ledger::LedgerTotals;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use wattbar_core::inference::{window_energy, Interval, Record, WindowEnergy};
use wattbar_core::meter::Method;
use wattbar_core::policy::Advice;
use wattbar_core::{LowPowerState, Part, Preferences, SessionTotals, Snapshot};

/// The state every reader sees.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// Increases with every publication.
    pub seq: u64,
    /// The latest sample; `None` before the first one.
    pub snapshot: Option<Snapshot>,
    /// The energy each owned part (domain, device, source) has added since the engine started,
    /// by counter or trapezoid as the ledger counts it: a counter, whose differences between two
    /// states are the energy between them however many samples lie between. A part not here has
    /// added nothing that counts (another source owns its domain).
    pub part_totals: Vec<(Part, f64)>,
    pub session: SessionTotals,
    /// How the last sample's headline energy was found: `counter` or `trapezoid`.
    pub energy_method: Option<Method>,
    /// Low-power mode: on or off, since when and why.
    pub low_power: LowPowerState,
    /// The model to run and a sentence for routers.
    pub advice: Advice,
    /// The last change of low-power mode, as a sentence; `low_power_seq` increases with each.
    pub low_power_event: Option<String>,
    pub low_power_seq: u64,
    /// macOS Low Power Mode as the system last said (read once a minute); `None` elsewhere.
    pub os_low_power_mode: Option<bool>,
    pub prefs: Preferences,
    pub price_per_kwh: f64,
    /// The sampling interval the preferences ask for.
    pub interval_ms: u64,
    /// The period samples are taken at now: the preference, slower where a source cannot give
    /// new values that fast (half NVML's counter update period), faster while an inference
    /// request is measured.
    pub period_ms: u64,
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
    /// Lifetime joules per domain (`system` is the headline): what the store holds plus what was
    /// measured since its last batch. Only grows; `system` is there from the start.
    pub lifetime_by_domain: Vec<(String, f64)>,
    /// The id of every source in the chain, best first.
    pub sources: Vec<String>,
    /// How often each source was read and how long its reads took, counted live.
    #[serde(skip)]
    pub reads: Arc<[wattbar_core::chain::ReadCounter]>,
    /// Something the user should know, e.g. a damaged database that was replaced.
    pub notice: Option<String>,
    /// Budget alerts given at the last batch; `alert_seq` increases with each new set.
    pub alerts: Vec<BudgetAlert>,
    pub alert_seq: u64,
    /// Inference records, per-model figures and the idle baseline; a new `seq` with each change.
    pub inference: Arc<crate::inference::InferenceView>,
    /// Requests in flight through the proxy.
    pub inflight: usize,
}

/// One point of the recent-watts history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Wall-clock time, seconds since the Unix epoch.
    pub t: f64,
    /// `None` where no headline could be read: a hole in the line, not a zero.
    pub watts: Option<f64>,
}

/// How much recent history the engine keeps for sparklines.
pub const RECENT_WINDOW: Duration = Duration::from_secs(5 * 60);

pub(crate) type Recent = Arc<Mutex<VecDeque<Point>>>;

/// Adds a point and forgets what is older than [`RECENT_WINDOW`] or, after the wall clock went
/// back, newer than the point itself.
pub(crate) fn remember(recent: &Recent, point: Point) {
    let mut recent = recent.lock().unwrap_or_else(|e| e.into_inner());
    while recent.back().is_some_and(|p| p.t > point.t) {
        recent.pop_back();
    }
    recent.push_back(point);
    let oldest = point.t - RECENT_WINDOW.as_secs_f64();
    while recent.front().is_some_and(|p| p.t < oldest) {
        recent.pop_front();
    }
}

/// How long [`EngineHandle::shutdown`] waits for the last batch to be written.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// Owns the engine thread: dropping it stops the engine (after the command in hand).
pub struct EngineHandle {
    pub(crate) reader: EngineReader,
    pub(crate) thread: Option<std::thread::JoinHandle<()>>,
}

/// A cloneable view of a running engine for servers and windows: read the state, send commands.
#[derive(Clone)]
pub struct EngineReader {
    pub(crate) state: watch::Receiver<Arc<Published>>,
    pub(crate) recent: Recent,
    pub(crate) commands: Arc<crate::inbox::Inbox>,
    /// The ledger, read-only for readers.
    pub(crate) ledger: Option<std::path::PathBuf>,
    pub(crate) tracker: Arc<crate::inference::Tracker>,
    pub(crate) intervals: crate::inference::book::Intervals,
    pub(crate) records: crate::inference::book::Records,
}

impl EngineReader {
    /// Stored history from `from` to `to` (Unix seconds), read-only; empty before anything was
    /// stored or without a ledger. Blocks on SQLite: call it off async workers.
    pub fn history(
        &self,
        from: f64,
        to: f64,
        step: crate::store::Step,
    ) -> Result<Vec<crate::store::HistoryPoint>, Error> {
        match &self.ledger {
            Some(path) if path.exists() => {
                Ok(crate::store::Store::open_read_only(path)?.history(from, to, step)?)
            }
            _ => Ok(Vec::new()),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.state.clone()
    }

    /// Where the inference proxy reports the requests it sees.
    pub fn tracker(&self) -> Arc<crate::inference::Tracker> {
        Arc::clone(&self.tracker)
    }

    /// The energy of a wall-clock window: exact at the sampling resolution over the last
    /// [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP), from the stored samples before.
    /// Blocks on SQLite: call it off async workers.
    pub fn energy(&self, from: f64, to: f64) -> Result<WindowEnergy, Error> {
        let mut intervals: Vec<Interval> = {
            let kept = self.intervals.lock().unwrap_or_else(|e| e.into_inner());
            kept.iter().cloned().collect()
        };
        let kept_from = intervals.first().map_or(f64::INFINITY, |i| i.unix_start);
        if from < kept_from {
            if let Some(path) = self.ledger.as_ref().filter(|p| p.exists()) {
                let store = crate::store::Store::open_read_only(path)?;
                let mut older = store.intervals(from, to.min(kept_from))?;
                older.append(&mut intervals);
                intervals = older;
            }
        }
        Ok(window_energy(&intervals, from, to))
    }

    /// The ledger's report of `from`–`to` (Unix seconds) as an SVG, in the preferences'
    /// currency and this machine's local time. Blocks on SQLite and drawing: call it off async
    /// workers.
    pub fn report_svg(&self, from: f64, to: f64) -> Result<String, Error> {
        let Some(path) = self.ledger.as_ref().filter(|p| p.exists()) else {
            return Err(Error::Refused(
                "this engine keeps no ledger yet: nothing to report".into(),
            ));
        };
        let store = crate::store::Store::open_read_only(path)?;
        let report = crate::report::local(&store, &self.current().prefs, from, to)?;
        wattbar_report::svg(&report, report.default_size())
            .map_err(|e| Error::Refused(e.to_string()))
    }

    /// The measured intervals that ended after `after` (Unix seconds), oldest first, from the
    /// last [`WINDOW_KEEP`](crate::inference::book::WINDOW_KEEP): for a reader that keeps its own
    /// record of a longer stretch.
    pub fn intervals_after(&self, after: f64) -> Vec<Interval> {
        let kept = self.intervals.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .filter(|i| i.unix_end > after)
            .cloned()
            .collect()
    }

    /// Inference records that ended at or after `since`, newest first, at most `limit`: from
    /// the ledger, or from memory without one. Blocks on SQLite: call it off async workers.
    pub fn inference(&self, since: f64, limit: usize) -> Result<Vec<Record>, Error> {
        if let Some(path) = self.ledger.as_ref().filter(|p| p.exists()) {
            return Ok(crate::store::Store::open_read_only(path)?.inference(since, limit)?);
        }
        let kept = self.records.lock().unwrap_or_else(|e| e.into_inner());
        Ok(kept
            .iter()
            .rev()
            .filter(|r| r.end >= since)
            .take(limit)
            .cloned()
            .collect())
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

    pub fn current(&self) -> Arc<Published> {
        self.state.borrow().clone()
    }

    /// Headline watts over the last [`RECENT_WINDOW`], oldest first.
    pub fn recent(&self) -> Vec<Point> {
        let guard = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        guard.iter().copied().collect()
    }

    pub fn send(&self, command: Command) -> Result<(), Error> {
        self.commands.send(command).map_err(|_| Error::Stopped)
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

    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.reader.subscribe()
    }

    pub fn current(&self) -> Arc<Published> {
        self.reader.current()
    }

    /// Headline watts over the last [`RECENT_WINDOW`], oldest first.
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

    /// Flushes the store, ends the session and stops the engine; gives up waiting after 5 s of
    /// real time (a stalled source).
    pub async fn shutdown(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.reader.send(Command::Shutdown(tx)).is_ok() {
            let _ = tokio::task::spawn_blocking(move || rx.recv_timeout(SHUTDOWN_WAIT)).await;
        }
        self.reader.commands.close();
    }
}

impl Drop for EngineHandle {
    fn drop(&mut self) {
        self.reader.commands.close();
        // Not joined: a source may be stalled, and the thread ends on its own after it.
        drop(self.thread.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_points_older_than_the_window_or_after_a_backward_step_are_forgotten() {
        let recent: Recent = Arc::new(Mutex::new(VecDeque::new()));
        let at = |t: f64| Point {
            t,
            watts: Some(1.0),
        };
        for t in [0.0, 100.0, 200.0, 301.0] {
            remember(&recent, at(t));
        }
        let ts = |r: &Recent| {
            r.lock()
                .map(|g| g.iter().map(|p| p.t).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert_eq!(ts(&recent), vec![100.0, 200.0, 301.0]);
        // The wall clock went back by 150 s.
        remember(&recent, at(151.0));
        assert_eq!(ts(&recent), vec![100.0, 151.0]);
    }
}
