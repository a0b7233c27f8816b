//! The engine: one thread that samples the chain every interval, accounts each sample, records
//! it and publishes the result on a `watch` channel; commands come back through its
//! [`Inbox`](crate::inbox::Inbox).
//!
//! Rules:
//! - One engine per data folder: [`spawn`] takes the folder's lock ([`EngineLock`]) or fails with
//!   who holds it.
//! - The sampling work (reading sources, which may run a command or ask Ollama over HTTP, and
//!   writing SQLite) runs on the engine's own thread, never on the async workers that serve the
//!   API; between samples that thread sleeps in one timed wait ([`crate::inbox`]).
//! - Time comes from one [`Clock`]: energy on its elapsed clock (which counts sleep, so a suspend
//!   is a gap), labels on its wall clock (whose steps move labels, never energy).

use crate::accounting::{Accounting, LocalWeek};
use crate::clock::{Clock, SystemClock};
use crate::command::{Command, External};
use crate::error::Error;
use crate::handle::{remember, EngineHandle, EngineReader, Point, Published, Recent};
use crate::inbox::{Inbox, Woken};
use crate::inference::{Book, Tracker};
use crate::lock::EngineLock;
use crate::low_power::LowPower;
use crate::recorder::Recorder;
use crate::store::Row;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use wattbar_core::inference::{Interval, Record};
use wattbar_core::policy::Measured;
use wattbar_core::{Chain, Part, Preferences, Snapshot, Stamp, Tariffs, Transition};

/// The sampling period while a request is in flight, unless the sources update slower.
pub const INFERENCE_INTERVAL: Duration = Duration::from_millis(100);

/// How often pending samples are written to the store.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_secs(5);

/// A wall clock that moved this much more or less than elapsed time was stepped.
const WALL_STEP_SECONDS: f64 = 2.0;

#[derive(Clone)]
pub struct EngineConfig {
    pub prefs: Preferences,
    /// The SQLite ledger; `None` keeps everything in memory. Its folder is locked.
    pub store: Option<PathBuf>,
    pub batch_interval: Duration,
    /// The client that switches the OS power profile when the `os_power_mode` preference is on.
    pub os_power: crate::os_power::ProfilesCtl,
    pub clock: Arc<dyn Clock>,
    /// The API address this engine serves, written in the lock file for clients to find.
    pub api: Option<String>,
    /// Where the low-power advice is kept current for routers that read a file
    /// ([`crate::paths::advice_path`]); `None`: nowhere.
    pub advice_file: Option<PathBuf>,
}

impl EngineConfig {
    pub fn new(prefs: Preferences) -> Self {
        EngineConfig {
            prefs,
            store: None,
            batch_interval: DEFAULT_BATCH_INTERVAL,
            os_power: crate::os_power::ProfilesCtl::default(),
            clock: Arc::new(SystemClock::new()),
            api: None,
            advice_file: None,
        }
    }

    pub fn with_store(mut self, path: PathBuf) -> Self {
        self.store = Some(path);
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

struct Engine {
    chain: Chain,
    clock: Arc<dyn Clock>,
    prefs: Preferences,
    accounting: Accounting,
    local_week: LocalWeek,
    recorder: Recorder,
    low_power: LowPower,
    snapshot: Option<Snapshot>,
    /// What each owned part has added since the engine started.
    part_totals: BTreeMap<Part, f64>,
    last_stamp: Option<Stamp>,
    seq: u64,
    recent: Recent,
    sources: Vec<String>,
    /// Held until the last batch is written; released before shutdown answers.
    lock: Option<EngineLock>,
    tracker: Arc<Tracker>,
    book: Book,
    advice_file: Option<PathBuf>,
    /// The advice as last written to `advice_file`.
    advice_written: Option<crate::view::LowPowerView>,
}

enum Work {
    Sample,
    /// A request started or ended: sample now unless the last sample is more recent than the
    /// fast period.
    Wake,
    Apply(Command),
}

impl Engine {
    fn stamp(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    fn run(&mut self, work: Work) {
        self.work(work);
        self.write_advice();
    }

    /// Writes the low-power view to the advice file when it changed: a whole new file renamed
    /// over the old one, so a reader never sees half of it.
    fn write_advice(&mut self) {
        let Some(path) = self.advice_file.as_ref() else {
            return;
        };
        let view =
            crate::view::LowPowerView::from_parts(self.low_power.state(), self.low_power.advice());
        if self.advice_written.as_ref() == Some(&view) {
            return;
        }
        let Ok(json) = serde_json::to_string(&view) else {
            return;
        };
        let tmp = path.with_extension("json.tmp");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, format!("{json}\n")))
            .and_then(|()| std::fs::rename(&tmp, path));
        match written {
            Ok(()) => self.advice_written = Some(view),
            Err(e) => {
                tracing::warn!("{}: {e}", path.display());
                self.advice_file = None;
            }
        }
    }

    fn work(&mut self, work: Work) {
        match work {
            Work::Sample => self.sample(),
            Work::Wake => {
                // At most one sample per fast period, however many requests start and end: a
                // flood of short requests must not become a flood of samples.
                let since = self
                    .last_stamp
                    .map(|l| self.clock.elapsed().saturating_sub(l.monotonic));
                let fast = self.fast_period();
                if since.is_none_or(|s| s >= fast) {
                    self.sample();
                }
            }
            Work::Apply(command) => self.apply(command),
        }
    }

    fn sample(&mut self) {
        let at = self.stamp();
        let prev = self.last_stamp;
        self.notice_wall_step(at);
        let snapshot = self.chain.sample(at);
        let step = self
            .accounting
            .push(&snapshot, self.local_week.at(at.unix_seconds));
        let measured_before = self.snapshot.as_ref().is_some_and(|s| s.headline.is_some());
        if let Some(prev) = prev
            .filter(|p| at.monotonic.saturating_sub(p.monotonic) <= self.accounting.gap_threshold())
        {
            let headline = snapshot.headline.as_ref().filter(|_| measured_before);
            let interval = Interval {
                start: prev.monotonic.as_secs_f64(),
                end: at.monotonic.as_secs_f64(),
                unix_start: prev.unix_seconds,
                unix_end: at.unix_seconds,
                joules: headline.map(|_| step.headline.joules.0),
                by_domain: step
                    .by_domain
                    .iter()
                    .map(|(d, j)| (d.as_str().to_string(), j.0))
                    .collect(),
                quality: headline.map(|h| h.quality),
                source: headline.map(|h| h.source.clone()),
                method: headline.map(|_| step.method),
            };
            self.book.push_interval(interval, &self.tracker.open());
        }
        if step.clamped {
            tracing::warn!(
                watts = snapshot.headline_watts().map(|w| w.0),
                "absurd power clamped to 100 kW: a broken sensor or a bogus unit"
            );
        }
        if let Some(t) = self
            .low_power
            .observe(at, snapshot.headline_watts(), snapshot.battery)
        {
            self.low_power_changed(&t);
        }
        let seconds = prev
            .map(|p| at.monotonic.saturating_sub(p.monotonic))
            .filter(|d| *d <= self.accounting.gap_threshold())
            .map_or(0.0, |d| d.as_secs_f64());
        self.recorder.record(Row {
            t: at.unix_seconds,
            seconds,
            watts: snapshot.headline_watts().map(|w| w.0),
            joules: step.headline.joules.0,
            cost: step.headline.cost,
            by_domain: step
                .by_domain
                .into_iter()
                .map(|(d, j)| (d.as_str().to_string(), j.0))
                .collect(),
            currency: self.prefs.currency.as_str().to_string(),
        });
        if self.recorder.due(at.monotonic) {
            let session = self.accounting.totals(&self.prefs.currency);
            self.recorder
                .flush(at.monotonic, &session, at.unix_seconds, &self.prefs);
        }
        remember(
            &self.recent,
            Point {
                t: at.unix_seconds,
                watts: snapshot.headline_watts().map(|w| w.0),
            },
        );
        for (part, joules) in step.by_part {
            *self.part_totals.entry(part).or_default() += joules.0;
        }
        self.snapshot = Some(snapshot);
        self.settle_inference(at);
    }

    /// Turns the requests that ended by `at` into records, and stores them.
    fn settle_inference(&mut self, at: Stamp) {
        let finished = self.tracker.take_finished(at.monotonic);
        if !finished.is_empty() {
            let records = self.book.settle(finished, &self.tracker.open());
            self.recorder.record_inference(&records);
            self.measured_changed();
        }
        if let Some(b) = self.book.take_baseline_change() {
            self.recorder.record_baseline(&b);
        }
    }

    fn measured_changed(&mut self) {
        let v = self.book.view();
        self.low_power.set_measured(Measured {
            score: v.score,
            tokens_per_second_per_watt: v.tokens_per_second_per_watt,
            most_efficient_model: v.most_efficient_model.clone(),
        });
    }

    /// A record for work a client measured itself, over a window that has ended.
    fn record_external(&mut self, e: External) -> Result<Record, Error> {
        let now = self.clock.unix();
        if !(e.start.is_finite() && e.end.is_finite() && e.start < e.end) {
            return Err(Error::Refused("start must come before end".into()));
        }
        if e.end > now + 1.0 {
            return Err(Error::Refused(format!(
                "end is {:.1} s in the future",
                e.end - now
            )));
        }
        if self.last_stamp.is_none_or(|l| l.unix_seconds < e.end) {
            self.sample();
        }
        let last = self.last_stamp.unwrap_or_else(|| self.stamp());
        let record = self
            .book
            .external(e, last, &self.tracker.open())
            .ok_or_else(|| Error::Refused("the record could not be made".into()))?;
        self.recorder
            .record_inference(std::slice::from_ref(&record));
        self.measured_changed();
        Ok(record)
    }

    /// Says when the wall clock was stepped (NTP, the user): labels move, energy does not.
    fn notice_wall_step(&mut self, at: Stamp) {
        if let Some(last) = self.last_stamp {
            let elapsed = at.monotonic.saturating_sub(last.monotonic).as_secs_f64();
            let wall = at.unix_seconds - last.unix_seconds;
            if (wall - elapsed).abs() > WALL_STEP_SECONDS {
                tracing::info!(
                    seconds = wall - elapsed,
                    "the wall clock was stepped; energy is unaffected"
                );
            }
        }
        self.last_stamp = Some(at);
    }

    /// The configured pace while idle; the fast one while a request is in flight or waits for
    /// the sample that settles it.
    fn period(&self) -> Duration {
        if self.tracker.inflight() == 0 && !self.tracker.unsettled() {
            period(&self.prefs, &self.chain)
        } else {
            self.fast_period()
        }
    }

    /// [`INFERENCE_INTERVAL`], or the configured pace if faster, never faster than the sources.
    fn fast_period(&self) -> Duration {
        let fast = period(&self.prefs, &self.chain).min(INFERENCE_INTERVAL);
        match self.chain.min_interval() {
            Some(min) if min > fast => min,
            _ => fast,
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::SetPrice(p) => {
                let mut next = self.prefs.clone();
                next.price_per_kwh = p;
                let _ = self.set_preferences(next);
            }
            Command::SetPreferences(p, reply) => {
                let verdict = self.set_preferences(*p);
                if let Some(reply) = reply {
                    let _ = reply.send(verdict);
                }
            }
            Command::SetCurrency(c) => {
                let mut next = self.prefs.clone();
                next.currency = c;
                let _ = self.set_preferences(next);
            }
            Command::SetLowPower(on) => {
                let at = self.stamp();
                if let Some(t) = self.low_power.set_manual(on, at) {
                    self.low_power_changed(&t);
                }
            }
            Command::SetInterval(d) => {
                let mut next = self.prefs.clone();
                next.interval_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                if let Err(e) = self.set_preferences(next) {
                    tracing::warn!("{e}");
                }
            }
            Command::RecordInference(e, reply) => {
                let _ = reply.send(self.record_external(*e));
            }
            Command::ResetSession => {
                let currency = self.prefs.currency.clone();
                self.reset_session(&currency);
            }
            Command::Shutdown(done) => {
                let session = self.accounting.totals(&self.prefs.currency);
                self.recorder.end(&session, self.clock.unix());
                self.lock = None;
                let _ = done.send(());
            }
        }
    }

    /// Ends the session and starts another, priced in `currency`.
    fn reset_session(&mut self, currency: &wattbar_core::Currency) {
        let now = self.clock.unix();
        let ended = self.accounting.totals(&self.prefs.currency);
        self.recorder.new_session(&ended, now, currency.as_str());
        self.accounting.reset(now);
    }

    fn set_preferences(&mut self, next: Preferences) -> Result<(), Error> {
        let checked = next
            .validate()
            .and_then(|()| next.tariff_schedule())
            .map_err(|e| Error::Refused(e.to_string()));
        match checked {
            Ok(tariffs) => {
                if next.currency != self.prefs.currency {
                    // A session's cost is in one currency: a new currency starts a new session.
                    self.reset_session(&next.currency);
                }
                self.accounting.set_prices(tariffs, next.carbon_g_per_kwh);
                self.accounting.set_interval(next.interval());
                self.low_power.set_config(next.low_power.clone());
                self.book.set_ceiling(next.score_ceiling);
                self.prefs = next;
                self.measured_changed();
                let period = self.period();
                self.accounting.set_interval(period);
                Ok(())
            }
            Err(e) => {
                tracing::warn!("preferences refused: {e}");
                Err(e)
            }
        }
    }

    /// Records a change of low-power mode in the store at once and announces it.
    fn low_power_changed(&mut self, t: &Transition) {
        self.low_power
            .changed(t, &self.prefs.low_power, self.prefs.low_power.os_power_mode);
        self.recorder.record_low_power(&t.state, &t.message);
    }

    fn published(&mut self) -> Arc<Published> {
        self.seq += 1;
        Arc::new(Published {
            seq: self.seq,
            snapshot: self.snapshot.clone(),
            part_totals: self
                .part_totals
                .iter()
                .map(|(part, joules)| (part.clone(), *joules))
                .collect(),
            session: self.accounting.totals(&self.prefs.currency),
            energy_method: self.accounting.method(),
            low_power: self.low_power.state().clone(),
            advice: self.low_power.advice().clone(),
            low_power_event: self.low_power.event().cloned(),
            low_power_seq: self.low_power.seq(),
            os_low_power_mode: self.low_power.os_low_power_mode(),
            prefs: self.prefs.clone(),
            price_per_kwh: self.prefs.price_per_kwh.per_kwh(),
            interval_ms: self.prefs.interval_ms,
            period_ms: u64::try_from(self.period().as_millis()).unwrap_or(u64::MAX),
            totals: self.recorder.totals().cloned(),
            lifetime_by_domain: self.recorder.lifetime_by_domain(),
            sources: self.sources.clone(),
            reads: self.chain.counters(),
            notice: self.recorder.notice().cloned(),
            alerts: self.recorder.alerts().to_vec(),
            alert_seq: self.recorder.alert_seq(),
            inference: self.book.view(),
            inflight: self.tracker.inflight(),
        })
    }
}

/// The sampling period: the preference, but never faster than the slowest source can give new
/// values (half NVML's counter update period, for one).
fn period(prefs: &Preferences, chain: &Chain) -> Duration {
    let chosen = prefs.interval();
    match chain.min_interval() {
        Some(min) if min > chosen => min,
        _ => chosen,
    }
}

/// Starts the engine on a thread of its own; the first sample is taken at once. With a store, the
/// store's folder is locked first: a second engine gets [`Error::Locked`].
pub fn spawn(chain: Chain, config: EngineConfig) -> Result<EngineHandle, Error> {
    let lock = match config.store.as_ref().and_then(|p| p.parent()) {
        Some(dir) => Some(EngineLock::acquire(dir, config.api.as_deref())?),
        None => None,
    };
    let clock = config.clock.clone();
    let started = clock.unix();
    let ledger_path = config.store.clone();
    let recorder = Recorder::open(
        config.store.as_deref(),
        config.batch_interval,
        started,
        config.prefs.currency.as_str(),
    );
    let tariffs = config
        .prefs
        .tariff_schedule()
        .unwrap_or_else(|_| Tariffs::flat(config.prefs.price_per_kwh));
    let accounting = Accounting::new(
        started,
        period(&config.prefs, &chain),
        tariffs,
        config.prefs.carbon_g_per_kwh,
    );
    let book = Book::new(
        recorder.restored_inference(config.prefs.score_ceiling),
        config.prefs.score_ceiling,
    );
    let tracker = Tracker::new(clock.clone());
    let low_power = LowPower::new(
        config.prefs.low_power.clone(),
        recorder.restored_low_power(),
        config.os_power,
    );
    let timer_clock = Arc::clone(&clock);
    let chain = chain.with_timer(Box::new(move || timer_clock.elapsed()));
    let mut engine = Engine {
        sources: chain.ids(),
        chain,
        clock,
        prefs: config.prefs,
        accounting,
        local_week: LocalWeek::default(),
        recorder,
        low_power,
        snapshot: None,
        part_totals: BTreeMap::new(),
        last_stamp: None,
        seq: 0,
        recent: Arc::new(Mutex::new(VecDeque::new())),
        lock,
        tracker: Arc::clone(&tracker),
        book,
        advice_file: config.advice_file,
        advice_written: None,
    };
    engine.write_advice();
    engine.measured_changed();
    let recent = engine.recent.clone();
    let intervals = engine.book.intervals();
    let records = engine.book.records();
    let inbox = Arc::new(Inbox::default());
    tracker.wake_on_change(Arc::clone(&inbox));
    let (state_tx, state_rx) = watch::channel(engine.published());
    let messages = Arc::clone(&inbox);
    let thread = std::thread::Builder::new()
        .name("wattbar-engine".into())
        .spawn(move || run_engine(engine, &messages, &state_tx))
        .map_err(|source| Error::Io {
            path: PathBuf::from("wattbar-engine thread"),
            source,
        })?;
    Ok(EngineHandle {
        reader: EngineReader {
            state: state_rx,
            recent,
            commands: Arc::clone(&inbox),
            ledger: ledger_path,
            tracker,
            intervals,
            records,
        },
        thread: Some(thread),
    })
}

/// The engine thread: samples when due, takes commands and wake-ups as they come, publishes after
/// each, until told to stop. A late sample (a stalled source, a suspend) is not caught up: the
/// next is one period after it.
fn run_engine(mut engine: Engine, inbox: &Inbox, state: &watch::Sender<Arc<Published>>) {
    let mut period = engine.period();
    engine.chain.set_pace(period);
    let mut next = engine.clock.elapsed();
    loop {
        let work = match inbox.wait(engine.clock.as_ref(), next) {
            Woken::Due => {
                let now = engine.clock.elapsed();
                next += period;
                if next <= now {
                    next = now + period;
                }
                Work::Sample
            }
            Woken::Wake => Work::Wake,
            Woken::Command(command) => Work::Apply(command),
            Woken::Closed => break,
        };
        let last = matches!(work, Work::Apply(Command::Shutdown(_)));
        engine.run(work);
        if last {
            inbox.close();
            break;
        }
        if engine.period() != period {
            period = engine.period();
            engine.chain.set_pace(period);
            next = engine.clock.elapsed() + period;
        }
        if state.send(engine.published()).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use wattbar_core::meter::Method;
    use wattbar_core::{Currency, Price, Quality, Source, Watts};
    use wattbar_sources::{replay::parse_trace, ReplaySource};

    /// Tests run on tokio's paused clock; the engine's clock follows it.
    fn config(prefs: Preferences) -> EngineConfig {
        EngineConfig::new(prefs).with_clock(Arc::new(ManualClock::new(1_800_000_000.0)))
    }

    fn start(chain: Chain, config: EngineConfig) -> EngineHandle {
        spawn(chain, config).unwrap_or_else(|e| panic!("{e}"))
    }

    fn replay(csv: &str) -> Chain {
        let trace = parse_trace(csv).unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
        Chain::new(sources)
    }

    async fn wait_for(
        rx: &mut watch::Receiver<Arc<Published>>,
        pred: impl Fn(&Published) -> bool,
    ) -> Arc<Published> {
        loop {
            let current = rx.borrow_and_update().clone();
            if pred(&current) {
                return current;
            }
            if rx.changed().await.is_err() {
                panic!("engine stopped");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ten_minutes_at_300_w_publish_180_kj_and_its_cost() {
        let prefs = Preferences {
            price_per_kwh: Price::new(0.40).unwrap_or_default(),
            ..Preferences::default()
        };
        let engine = start(replay("t,watts\n0,300\n"), config(prefs));
        let mut rx = engine.subscribe();
        let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
        let head = first
            .snapshot
            .as_ref()
            .and_then(|s| s.headline.clone())
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(300.0)));
        assert_eq!(head.quality, Quality::Measured);
        assert_eq!(head.source, "replay");
        let done = wait_for(&mut rx, |p| p.session.joules.0 >= 180_000.0 - 1e-6).await;
        assert!((done.session.joules.0 - 180_000.0).abs() < 1e-6);
        assert!((done.session.kwh - 0.05).abs() < 1e-9);
        assert!((done.session.cost - 0.02).abs() < 1e-9);
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_price_applies_from_then_on_and_is_published_at_once() {
        let engine = start(
            replay("t,watts\n0,3600\n"),
            config(Preferences {
                price_per_kwh: Price::new(0.0).unwrap_or_default(),
                ..Preferences::default()
            }),
        );
        let mut rx = engine.subscribe();
        // 1000 s at 3600 W = 1 kWh, free.
        let free = wait_for(&mut rx, |p| p.session.kwh >= 1.0 - 1e-9).await;
        assert_eq!(free.session.cost, 0.0);
        engine
            .send(Command::SetPrice(Price::new(0.5).unwrap_or_default()))
            .unwrap_or_else(|e| panic!("{e}"));
        // The engine thread may sample again before this task sees the change (the channel
        // keeps the latest state): at most what was drawn since `free` is at the new price.
        let priced = wait_for(&mut rx, |p| p.price_per_kwh == 0.5).await;
        let since_free = priced.session.kwh - free.session.kwh;
        assert!(
            priced.session.cost >= 0.0 && priced.session.cost <= 0.5 * since_free + 1e-9,
            "{} EUR for {since_free} kWh since the change",
            priced.session.cost
        );
        // From then on every kWh costs 0.5: one more kWh, 0.5 more.
        let later = wait_for(&mut rx, |p| {
            p.session.kwh >= priced.session.kwh + 1.0 - 1e-9
        })
        .await;
        let added = later.session.kwh - priced.session.kwh;
        assert!(
            (later.session.cost - priced.session.cost - 0.5 * added).abs() < 1e-9,
            "{} EUR for {added} kWh",
            later.session.cost - priced.session.cost
        );
        // The kWh before the change stayed free.
        assert!(later.session.cost <= 0.5 * (later.session.kwh - free.session.kwh) + 1e-9);
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn reset_starts_a_new_session_and_low_power_is_published() {
        let engine = start(replay("t,watts\n0,100\n"), config(Preferences::default()));
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.session.joules.0 >= 1000.0).await;
        engine
            .send(Command::ResetSession)
            .unwrap_or_else(|e| panic!("{e}"));
        engine
            .send(Command::SetLowPower(true))
            .unwrap_or_else(|e| panic!("{e}"));
        let after = wait_for(&mut rx, |p| p.low_power.enabled).await;
        assert_eq!(after.session.joules.0, 0.0);
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn the_ledger_keeps_what_was_integrated_after_a_shutdown() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("wattbar.db");
        let engine = start(
            replay("t,watts\n0,300\n"),
            config(Preferences::default()).with_store(db.clone()),
        );
        let mut rx = engine.subscribe();
        let done = wait_for(&mut rx, |p| p.session.joules.0 >= 180_000.0 - 1e-6).await;
        // Stored totals trail by at most one batch (5 s at 300 W = 1.5 kJ).
        let stored = done
            .totals
            .as_ref()
            .map(|t| t.lifetime.joules)
            .unwrap_or(-1.0);
        assert!(stored >= 180_000.0 - 1_500.0 - 1e-6, "{stored}");
        engine.shutdown().await;
        let (store, moved) = crate::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(moved.is_none());
        let lifetime = store.lifetime("EUR").unwrap_or_else(|e| panic!("{e}"));
        assert!((lifetime.joules - 180_000.0).abs() < 1e-6, "{lifetime:?}");
        assert!((lifetime.kwh - 0.05).abs() < 1e-9);
    }

    #[tokio::test(start_paused = true)]
    async fn a_high_trace_engages_low_power_and_the_store_remembers_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("wattbar.db");
        // 40 W for a minute, then 5 W.
        let engine = start(
            replay("t,watts\n0,40\n60,5\n"),
            config(Preferences::default()).with_store(db.clone()),
        );
        let mut rx = engine.subscribe();
        let on = wait_for(&mut rx, |p| p.low_power.enabled).await;
        assert_eq!(
            on.low_power.reason,
            Some(wattbar_core::Reason::AutoThreshold)
        );
        assert_eq!(on.low_power_seq, 1);
        assert_eq!(
            on.low_power_event.as_deref(),
            Some("Low-power mode on: above 15 W for 30 s")
        );
        assert!(on.advice.recommendation.contains("qwen3:1b"));
        let mono = |p: &Published| p.snapshot.as_ref().map(|s| s.at.monotonic.as_secs_f64());
        let engaged_at = mono(&on).unwrap_or(0.0);
        assert!(
            (engaged_at - 30.0).abs() <= 1.0,
            "engaged at {engaged_at} s"
        );
        let off = wait_for(&mut rx, |p| p.low_power_seq == 2).await;
        assert!(!off.low_power.enabled);
        // Released 30 s after the draw fell below 12 W at t = 60.
        let released_at = mono(&off).unwrap_or(0.0);
        assert!(
            (released_at - 90.0).abs() <= 1.0,
            "released at {released_at} s"
        );
        engine
            .send(Command::SetLowPower(true))
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for(&mut rx, |p| p.low_power_seq == 3).await;
        engine.shutdown().await;
        // A restart restores the manual choice, which the low trace does not undo.
        let engine = start(
            replay("t,watts\n0,5\n"),
            config(Preferences::default()).with_store(db.clone()),
        );
        let mut rx = engine.subscribe();
        let later = wait_for(&mut rx, |p| p.session.joules.0 >= 5.0 * 120.0).await;
        assert!(later.low_power.enabled);
        assert_eq!(later.low_power.reason, Some(wattbar_core::Reason::Manual));
        assert_eq!(later.low_power_seq, 0, "nothing changed after the restart");
        engine.shutdown().await;
        let (store, _) = crate::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(store.low_power().map(|s| s.enabled).unwrap_or(false));
    }

    #[tokio::test(start_paused = true)]
    async fn crossing_a_daily_budget_alerts_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // 3600 W is 1 Wh a second; the budget is 10 Wh.
        let prefs = Preferences {
            daily_budget_kwh: Some(0.01),
            ..Preferences::default()
        };
        let engine = start(
            replay("t,watts\n0,3600\n"),
            config(prefs).with_store(dir.path().join("wattbar.db")),
        );
        let mut rx = engine.subscribe();
        let first = wait_for(&mut rx, |p| p.alert_seq > 0).await;
        assert_eq!(first.alerts.len(), 1);
        assert_eq!(first.alerts[0].kind, "daily-kwh");
        assert!(first.alerts[0].used >= 0.01);
        let later = wait_for(&mut rx, |p| p.session.kwh > 0.05).await;
        assert_eq!(later.alert_seq, 1, "the alert came again");
        engine.shutdown().await;
    }

    struct Slow;

    impl Source for Slow {
        fn id(&self) -> &str {
            "nvml"
        }
        fn quality(&self) -> Quality {
            Quality::Measured
        }
        fn read(&mut self, _at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
            Ok(Vec::new())
        }
        fn min_interval(&self) -> Option<Duration> {
            Some(Duration::from_millis(250))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sampling_never_goes_faster_than_the_slowest_source_updates() {
        let trace = parse_trace("t,watts\n0,10\n").unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> =
            vec![Box::new(ReplaySource::new(trace)), Box::new(Slow)];
        let prefs = Preferences {
            interval_ms: 100,
            ..Preferences::default()
        };
        let engine = start(Chain::new(sources), config(prefs));
        let mut rx = engine.subscribe();
        let mono = |p: &Published| p.snapshot.as_ref().map(|s| s.at.monotonic);
        let a = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
        let t0 = mono(&a).unwrap_or_default();
        let b = wait_for(&mut rx, |p| mono(p).is_some_and(|t| t > t0)).await;
        let t1 = mono(&b).unwrap_or_default();
        assert!(t1 - t0 >= Duration::from_millis(250), "{:?}", t1 - t0);
        // What was asked for and what is done are both said: a run's figures depend on the latter.
        assert_eq!((b.interval_ms, b.period_ms), (100, 250));
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn the_interval_can_change_while_running() {
        let engine = start(replay("t,watts\n0,10\n"), config(Preferences::default()));
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.snapshot.is_some()).await;
        engine
            .send(Command::SetInterval(Duration::from_millis(100)))
            .unwrap_or_else(|e| panic!("{e}"));
        let at = |p: &Published| {
            p.snapshot
                .as_ref()
                .map(|s| s.at.monotonic)
                .unwrap_or_default()
        };
        let a = wait_for(&mut rx, |p| p.interval_ms == 100).await;
        // The paused clock may run on to the old 1 s tick before the change is applied, so
        // the sample after the change is the reference: the one after it comes 100 ms later.
        let t0 = at(&a);
        let b = wait_for(&mut rx, |p| at(p) > t0).await;
        let t1 = at(&b);
        let c = wait_for(&mut rx, |p| at(p) > t1).await;
        let t2 = at(&c);
        assert!(
            t2 - t1 >= Duration::from_millis(90) && t2 - t1 <= Duration::from_millis(150),
            "{:?}",
            t2 - t1
        );
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn a_twelve_second_interval_accounts_every_interval() {
        // 100 W sampled every 12 s: four samples, three intervals = 3,600 J.
        let prefs = Preferences {
            interval_ms: 12_000,
            ..Preferences::default()
        };
        let engine = start(replay("t,watts\n0,100\n"), config(prefs));
        let mut rx = engine.subscribe();
        let mono = |p: &Published| p.snapshot.as_ref().map(|s| s.at.monotonic);
        let fourth = wait_for(&mut rx, |p| mono(p) >= Some(Duration::from_secs(36))).await;
        assert_eq!(fourth.session.joules.0, 3_600.0);
        assert_eq!(fourth.session.gaps, 0);
        assert_eq!(fourth.energy_method, Some(Method::Trapezoid));
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_engine_on_the_same_ledger_is_refused_and_the_first_goes_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("wattbar.db");
        let mut first_config = config(Preferences::default()).with_store(db.clone());
        first_config.api = Some("127.0.0.1:9471".into());
        let first = start(replay("t,watts\n0,100\n"), first_config);
        match spawn(
            replay("t,watts\n0,100\n"),
            config(Preferences::default()).with_store(db),
        ) {
            Err(Error::Locked { pid, api, .. }) => {
                assert_eq!(pid, Some(std::process::id()));
                assert_eq!(api.as_deref(), Some("127.0.0.1:9471"));
            }
            Err(e) => panic!("refused for the wrong reason: {e}"),
            Ok(_) => panic!("a second engine was started on the same ledger"),
        }
        let mut rx = first.subscribe();
        let later = wait_for(&mut rx, |p| p.session.joules.0 >= 2_000.0).await;
        assert_eq!(later.session.joules.0, 2_000.0);
        first.shutdown().await;
    }

    fn external(clock: &ManualClock, seconds: f64, tokens: u64) -> External {
        use crate::clock::Clock;
        let end = clock.unix();
        External {
            model: "llama3".into(),
            prompt_tokens: None,
            completion_tokens: tokens,
            start: end - seconds,
            end,
            tokens_per_second: Some(tokens as f64 / seconds),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_window_ending_now_is_measured_whole_at_any_moment_between_samples() {
        let clock = ManualClock::new(1_800_000_000.0);
        let config = EngineConfig::new(Preferences::default()).with_clock(Arc::new(clock.clone()));
        let engine = start(replay("t,watts\n0,50\n"), config);
        let mut rx = engine.subscribe();
        // Ten seconds of 1 s samples, so the 5 s windows below start after the engine did.
        wait_for(&mut rx, |p| p.session.joules.0 >= 500.0).await;
        for offset_ms in [0, 1, 250, 500, 999] {
            // Whole seconds apart plus the offset, so no window overlaps the one before (windows
            // that overlap share their energy, as concurrent requests do).
            tokio::time::sleep(Duration::from_millis(6000 + offset_ms)).await;
            // 100 tokens at 20 tokens/s: the last 5 s, 50 W × 5 s = 250 J, 0.4 tokens/s per W.
            let r = engine
                .reader()
                .record_inference(external(&clock, 5.0, 100))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let joules = r.energy_joules.unwrap_or_default();
            assert!((joules - 250.0).abs() <= 2.5, "{offset_ms} ms: {joules} J");
            assert_eq!(r.covered, Some(1.0), "{offset_ms} ms");
            assert!(!r.partial);
            let tpw = r.tokens_per_second_per_watt.unwrap_or_default();
            assert!((tpw - 0.4).abs() <= 0.004, "{offset_ms} ms: {tpw}");
        }
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_window_half_before_the_engine_is_partial_and_never_scaled_up() {
        let clock = ManualClock::new(1_800_000_000.0);
        let config = EngineConfig::new(Preferences::default()).with_clock(Arc::new(clock.clone()));
        let engine = start(replay("t,watts\n0,50\n"), config);
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.session.joules.0 >= 250.0).await;
        // 10 s ending now, 5 of them before the first sample: 250 J measured, covered 0.5.
        let r = engine
            .reader()
            .record_inference(external(&clock, 10.0, 100))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let covered = r.covered.unwrap_or_default();
        assert!((covered - 0.5).abs() < 0.02, "{r:?}");
        assert!(r.partial);
        let joules = r.energy_joules.unwrap_or_default();
        assert!((joules - 50.0 * covered * 10.0).abs() < 1e-6, "{r:?}");
        assert_eq!((r.score, r.joules_per_token), (None, None));
        let published = wait_for(&mut rx, |p| p.inference.last.is_some()).await;
        assert_eq!(published.inference.score, None);
        assert_eq!(
            published
                .inference
                .models
                .first()
                .map(|m| (m.partial_requests, m.joules_per_token)),
            Some((1, None))
        );
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn records_older_than_kept_are_pruned_yet_their_model_and_ids_stay() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("wattbar.db");
        let now = 1_800_000_000.0;
        let day = 86_400.0;
        {
            let (mut store, _) =
                crate::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
            let clock = ManualClock::new(now);
            let book_record = |id: u64, model: &str, ended: f64| {
                let mut r = Book::new(Default::default(), 5.0)
                    .external(
                        External {
                            model: model.into(),
                            ..external(&clock, 5.0, 100)
                        },
                        wattbar_core::Stamp::new(Duration::ZERO, now),
                        &[],
                    )
                    .unwrap_or_else(|| panic!("a record"));
                (r.id, r.start, r.end) = (id, ended - 5.0, ended);
                r
            };
            for (id, model, ended) in [
                (5, "old-model", now - 100.0 * day),
                (6, "llama3", now - 10.0 * day),
            ] {
                store
                    .insert_inference(&book_record(id, model, ended))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let prefs = Preferences {
            inference_keep_days: 30,
            ..Preferences::default()
        };
        let engine = start(
            replay("t,watts\n0,50\n"),
            config(prefs).with_store(db.clone()),
        );
        let mut rx = engine.subscribe();
        // A batch is written (and old records pruned) within the first 5 s.
        wait_for(&mut rx, |p| p.session.joules.0 >= 50.0 * 10.0).await;
        let r = engine
            .reader()
            .record_inference(external(&ManualClock::new(now + 10.0), 5.0, 100))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.id, 7, "ids go on after the highest ever stored");
        let models = wait_for(&mut rx, |p| {
            p.inference.last.as_ref().map(|r| r.id) == Some(7)
        })
        .await;
        let requests = |name: &str| {
            models
                .inference
                .models
                .iter()
                .find(|m| m.model == name)
                .map(|m| m.requests)
        };
        assert_eq!(
            (requests("old-model"), requests("llama3")),
            (Some(1), Some(2))
        );
        engine.shutdown().await;
        let store = crate::store::Store::open_read_only(&db).unwrap_or_else(|e| panic!("{e}"));
        let kept: Vec<u64> = store
            .inference(0.0, 10)
            .unwrap_or_default()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(kept, vec![7, 6], "100 days old is past the 30 kept");
    }

    /// A GPU at 100 W whose energy counter keeps counting, asleep or not.
    struct Gpu(ManualClock);

    impl Source for Gpu {
        fn id(&self) -> &str {
            "nvml"
        }
        fn quality(&self) -> Quality {
            Quality::Measured
        }
        fn read(&mut self, at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
            use crate::clock::Clock;
            let counted = 100.0 * self.0.elapsed().as_secs_f64();
            Ok(vec![wattbar_core::Reading {
                energy_counter: Some(wattbar_core::Joules(counted)),
                ..wattbar_core::Reading::power(
                    wattbar_core::Domain::Gpu,
                    Watts(100.0),
                    "nvml",
                    Quality::Measured,
                    at,
                )
                .with_device("0")
            }])
        }
    }

    fn gpu_engine(clock: &ManualClock, db: PathBuf) -> EngineHandle {
        let config = EngineConfig::new(Preferences::default())
            .with_clock(Arc::new(clock.clone()))
            .with_store(db);
        start(Chain::new(vec![Box::new(Gpu(clock.clone()))]), config)
    }

    fn gpu_lifetime(p: &Published) -> f64 {
        p.lifetime_by_domain
            .iter()
            .find(|(d, _)| d == "gpu")
            .map(|(_, j)| *j)
            .unwrap_or(0.0)
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspend_adds_nothing_not_even_from_a_counter_that_kept_counting() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock = ManualClock::new(1_800_000_000.0);
        let engine = gpu_engine(&clock, dir.path().join("wattbar.db"));
        let mut rx = engine.subscribe();
        let before = wait_for(&mut rx, |p| p.session.joules.0 >= 1_000.0).await;
        assert_eq!(before.energy_method, Some(Method::Counter));
        let asleep_at = before.session.joules.0;
        // An hour asleep: the counter says 360 kJ more.
        clock.sleep(Duration::from_secs(3600));
        let after = wait_for(&mut rx, |p| p.session.joules.0 >= asleep_at + 1_000.0).await;
        assert_eq!(after.session.gaps, 1);
        // 10 s after waking at 100 W, give or take the interval the gap swallowed.
        assert!(
            after.session.joules.0 <= asleep_at + 1_100.0,
            "{}",
            after.session.joules.0
        );
        assert!(
            gpu_lifetime(&after) <= after.session.joules.0 + 1e-6,
            "{after:?}"
        );
        engine.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn wall_clock_steps_either_way_move_no_energy() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock = ManualClock::new(1_800_000_000.0);
        let engine = gpu_engine(&clock, dir.path().join("wattbar.db"));
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.session.joules.0 >= 1_000.0).await;
        clock.step_wall(3600.0);
        wait_for(&mut rx, |p| p.session.joules.0 >= 2_000.0).await;
        clock.step_wall(-7200.0);
        let done = wait_for(&mut rx, |p| p.session.joules.0 >= 4_000.0).await;
        // 40 s at 100 W, by counter, with no gap and nothing lost or added at either step.
        assert_eq!(done.session.gaps, 0);
        assert_eq!(done.session.joules.0, 4_000.0);
        assert!((gpu_lifetime(&done) - 4_000.0).abs() < 1e-6);
        // The sparkline follows the wall clock back instead of keeping points from the future.
        let recent: Vec<Point> = engine.recent();
        assert!(recent.windows(2).all(|w| w[0].t <= w[1].t));
        engine.shutdown().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_preference_tells_whoever_asked_why() {
        let engine = start(replay("t,watts\n0,10\n"), config(Preferences::default()));
        let bad = Preferences {
            interval_ms: 5,
            ..Preferences::default()
        };
        match engine.reader().set_preferences(bad).await {
            Err(Error::Refused(why)) => assert!(why.contains("interval"), "{why}"),
            other => panic!("{other:?}"),
        }
        let good = Preferences {
            currency: Currency::default(),
            price_per_kwh: Price::new(0.3).unwrap_or_default(),
            ..Preferences::default()
        };
        assert!(engine.reader().set_preferences(good).await.is_ok());
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_currency_starts_a_new_session_so_no_session_mixes_two() {
        let engine = start(replay("t,watts\n0,3600\n"), config(Preferences::default()));
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.session.kwh >= 0.01).await;
        let usd = Currency::parse("USD").unwrap_or_else(|e| panic!("{e}"));
        engine
            .send(Command::SetCurrency(usd.clone()))
            .unwrap_or_else(|e| panic!("{e}"));
        let after = wait_for(&mut rx, |p| p.prefs.currency == usd).await;
        assert_eq!(after.session.currency, usd);
        assert!(after.session.kwh < 0.01, "{:?}", after.session);
        engine.stop();
    }

    /// A source that takes a long time to answer, like an Ollama that does not reply.
    struct Stalling;

    impl Source for Stalling {
        fn id(&self) -> &str {
            "ollama"
        }
        fn quality(&self) -> Quality {
            Quality::Heuristic
        }
        fn read(&mut self, _at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
            std::thread::sleep(Duration::from_millis(1500));
            Ok(Vec::new())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stalling_source_never_holds_the_async_thread_that_serves_readers() {
        // One async thread, as a small daemon has. While the source stalls for 1.5 s, another
        // task on that thread must keep running: the sampling work is on the engine thread.
        let engine = start(
            Chain::new(vec![Box::new(Stalling)]),
            EngineConfig::new(Preferences::default()),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut ticks = 0u32;
        let until = std::time::Instant::now() + Duration::from_millis(1000);
        while std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
            ticks += 1;
        }
        // Blocked, it runs about once; free, about 100 times (20 leaves room for a loaded machine).
        assert!(
            ticks >= 20,
            "the async thread ran only {ticks} times in 1 s"
        );
        engine.stop();
    }
}
