//! The sampling loop: one tokio task that samples the chain every interval, integrates the
//! session, and publishes the result on a `watch` channel.
//!
//! Time: integration uses tokio's monotonic clock, which does not advance while the machine is
//! suspended. When the wall clock moved on by more than the gap threshold beyond the monotonic
//! clock between two samples, the machine slept (or the clock jumped): the session records a gap
//! and nothing is integrated across it.

use crate::budget::{self, BudgetAlert};
use crate::error::Error;
use crate::ledger::{Ledger, LedgerTotals};
use crate::store::Row;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use wattbar_core::energy::DEFAULT_GAP_THRESHOLD;
use wattbar_core::meter::Meter;
use wattbar_core::policy::{advice, Advice};
use wattbar_core::{
    Chain, Currency, LowPowerState, Policy, Preferences, Price, Session, SessionTotals, Snapshot,
    Stamp, Tariffs, Transition,
};

/// How often pending samples are written to the store.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub prefs: Preferences,
    pub gap_threshold: Duration,
    /// The SQLite ledger; `None` keeps everything in memory.
    pub store: Option<PathBuf>,
    pub batch_interval: Duration,
    /// The client that switches the OS power profile when the `os_power_mode` preference is on.
    pub os_power: crate::os_power::ProfilesCtl,
}

impl EngineConfig {
    pub fn new(prefs: Preferences) -> Self {
        EngineConfig {
            prefs,
            gap_threshold: DEFAULT_GAP_THRESHOLD,
            store: None,
            batch_interval: DEFAULT_BATCH_INTERVAL,
            os_power: crate::os_power::ProfilesCtl::default(),
        }
    }

    pub fn with_store(mut self, path: PathBuf) -> Self {
        self.store = Some(path);
        self
    }
}

/// Requests to the engine. Each one is applied and republished at once.
#[derive(Debug)]
pub enum Command {
    /// Write everything to the store, end the session and stop; answers when done.
    Shutdown(oneshot::Sender<()>),
    SetPrice(Price),
    /// Replace every preference at once (validated first; refused values change nothing).
    SetPreferences(Box<Preferences>),
    SetCurrency(Currency),
    SetLowPower(bool),
    SetInterval(Duration),
    ResetSession,
}

/// The state every reader sees.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// Increases with every publication.
    pub seq: u64,
    /// The latest sample; `None` before the first one.
    pub snapshot: Option<Snapshot>,
    pub session: SessionTotals,
    /// Low-power mode: on or off, since when and why.
    pub low_power: LowPowerState,
    /// The model to run and a sentence for routers.
    pub advice: Advice,
    /// The last change of low-power mode, as a sentence; `low_power_seq` increases with each.
    pub low_power_event: Option<String>,
    pub low_power_seq: u64,
    /// macOS Low Power Mode as `pmset -g` last said (read once a minute); `None` elsewhere.
    pub os_low_power_mode: Option<bool>,
    pub prefs: Preferences,
    pub price_per_kwh: f64,
    pub interval_ms: u64,
    /// Today, this month and lifetime from the store, as of the last batch.
    pub totals: Option<LedgerTotals>,
    /// Lifetime joules per domain (`system` is the headline), as of the last batch; only grows.
    pub lifetime_by_domain: Vec<(String, f64)>,
    /// The id of every source in the chain, best first.
    pub sources: Vec<String>,
    /// Something the user should know, e.g. a damaged database that was replaced.
    pub notice: Option<String>,
    /// Budget alerts given at the last batch; `alert_seq` increases with each new set.
    pub alerts: Vec<BudgetAlert>,
    pub alert_seq: u64,
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

type Recent = Arc<Mutex<VecDeque<Point>>>;

pub struct EngineHandle {
    reader: EngineReader,
    task: JoinHandle<()>,
}

/// A cloneable view of a running engine for servers and windows: read the state, send commands.
#[derive(Clone)]
pub struct EngineReader {
    state: watch::Receiver<Arc<Published>>,
    recent: Recent,
    commands: mpsc::UnboundedSender<Command>,
}

impl EngineReader {
    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.state.clone()
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

    /// A sender that can be moved into callbacks.
    pub fn commands(&self) -> mpsc::UnboundedSender<Command> {
        self.reader.commands.clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }

    /// Flushes the store, ends the session and stops the engine.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.reader.send(Command::Shutdown(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
        self.task.abort();
    }
}

/// Local time as seconds since Monday 00:00 of its week, for tariffs.
pub fn local_week_seconds(unix: f64) -> f64 {
    use chrono::{Datelike, Local, TimeZone, Timelike};
    match Local.timestamp_opt(unix.floor() as i64, 0).single() {
        Some(dt) => {
            f64::from(dt.weekday().num_days_from_monday()) * 86_400.0
                + f64::from(dt.num_seconds_from_midnight())
                + unix.fract()
        }
        None => 0.0,
    }
}

/// Wall-clock time now, seconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

struct Engine {
    chain: Chain,
    prefs: Preferences,
    gap_threshold: Duration,
    session: Session,
    origin: Instant,
    last_clocks: Option<(Duration, f64)>,
    snapshot: Option<Snapshot>,
    seq: u64,
    recent: Recent,
    ledger: Option<Ledger>,
    meter: Meter,
    clamped_logged: u64,
    tariffs: Tariffs,
    batch_interval: Duration,
    last_flush: Instant,
    totals: Option<LedgerTotals>,
    lifetime_by_domain: Vec<(String, f64)>,
    sources: Vec<String>,
    notice: Option<String>,
    alerts: Vec<BudgetAlert>,
    alert_seq: u64,
    policy: Policy,
    /// Derived from the policy's settings and state; refreshed when either changes.
    advice: Advice,
    low_power_event: Option<String>,
    low_power_seq: u64,
    os_power: Arc<Mutex<crate::os_power::OsPowerMode>>,
    os_low_power_mode: Arc<Mutex<Option<bool>>>,
}

/// Reads macOS Low Power Mode once a minute on its own thread, until the engine is gone.
fn watch_macos_low_power_mode(slot: &Arc<Mutex<Option<bool>>>) {
    if !cfg!(target_os = "macos") {
        return;
    }
    let weak = Arc::downgrade(slot);
    std::thread::spawn(move || {
        while let Some(slot) = weak.upgrade() {
            let now = match crate::os_power::macos_low_power_mode() {
                Ok(v) => v,
                Err(e) => {
                    tracing::debug!("pmset -g: {e}");
                    None
                }
            };
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = now;
            drop(slot);
            std::thread::sleep(Duration::from_secs(60));
        }
    });
}

impl Engine {
    fn stamp(&self) -> Stamp {
        Stamp::new(self.origin.elapsed(), unix_now())
    }

    fn sample(&mut self) {
        let at = self.stamp();
        if let Some((mono, wall)) = self.last_clocks {
            let mono_dt = at.monotonic.saturating_sub(mono).as_secs_f64();
            let wall_dt = at.unix_seconds - wall;
            if wall_dt - mono_dt > self.gap_threshold.as_secs_f64() {
                tracing::info!(
                    seconds = wall_dt,
                    "suspend or clock jump: not integrating across it"
                );
                self.session.interrupt(at.monotonic, wall_dt);
            }
        }
        self.last_clocks = Some((at.monotonic, at.unix_seconds));
        let snapshot = self.chain.sample(at);
        let added = self.session.push(
            at.monotonic,
            snapshot.headline_watts(),
            &self.tariffs,
            local_week_seconds(at.unix_seconds),
            self.prefs.carbon_g_per_kwh,
        );
        if self.session.clamped() > self.clamped_logged {
            self.clamped_logged = self.session.clamped();
            tracing::warn!(
                watts = snapshot.headline_watts().map(|w| w.0),
                "absurd power clamped to 100 kW: a broken sensor or a bogus unit"
            );
        }
        if let Some(t) = self
            .policy
            .observe(at, snapshot.headline_watts(), snapshot.battery)
        {
            self.low_power_changed(t);
        }
        let by_domain = self.meter.push(at.monotonic, &snapshot.breakdown);
        if let Some(ledger) = self.ledger.as_mut() {
            ledger.record(Row {
                t: at.unix_seconds,
                watts: snapshot.headline_watts().map(|w| w.0),
                joules: added.joules.0,
                cost: added.cost,
                by_domain: by_domain
                    .into_iter()
                    .map(|(d, j)| (d.as_str().to_string(), j.0))
                    .collect(),
            });
        }
        if self.last_flush.elapsed() >= self.batch_interval {
            self.flush();
        }
        self.remember(at, snapshot.headline_watts().map(|w| w.0));
        self.snapshot = Some(snapshot);
    }

    /// The sampling period: the preference, but never faster than the slowest source can give
    /// new values (half NVML's counter update period, for one).
    fn period(&self) -> Duration {
        let chosen = self.prefs.interval();
        match self.chain.min_interval() {
            Some(min) if min > chosen => min,
            _ => chosen,
        }
    }

    fn remember(&self, at: Stamp, watts: Option<f64>) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.push_back(Point {
            t: at.unix_seconds,
            watts,
        });
        let oldest = at.unix_seconds - RECENT_WINDOW.as_secs_f64();
        while recent.front().is_some_and(|p| p.t < oldest) {
            recent.pop_front();
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::SetPrice(p) => {
                let mut next = self.prefs.clone();
                next.price_per_kwh = p;
                self.set_preferences(next);
            }
            Command::SetPreferences(p) => self.set_preferences(*p),
            Command::SetCurrency(c) => self.prefs.currency = c,
            Command::SetLowPower(on) => {
                let at = self.stamp();
                if let Some(t) = self.policy.set_manual(on, at) {
                    self.low_power_changed(t);
                }
            }
            Command::SetInterval(d) => self.prefs.interval_ms = d.as_millis() as u64,
            Command::ResetSession => {
                let totals = self.session.totals(&self.prefs.currency);
                if let Some(ledger) = self.ledger.as_mut() {
                    if let Err(e) = ledger.new_session(
                        totals.joules.0,
                        totals.cost,
                        unix_now(),
                        self.prefs.currency.as_str(),
                    ) {
                        self.store_failed(e);
                    }
                }
                self.session = Session::new(unix_now(), self.gap_threshold);
                self.last_clocks = None;
            }
            Command::Shutdown(done) => {
                let totals = self.session.totals(&self.prefs.currency);
                if let Some(ledger) = self.ledger.as_mut() {
                    if let Err(e) = ledger.end(totals.joules.0, totals.cost, unix_now()) {
                        tracing::error!("could not write the last batch: {e}");
                    }
                }
                let _ = done.send(());
            }
        }
    }

    fn set_preferences(&mut self, next: Preferences) {
        match next.tariff_schedule() {
            Ok(tariffs) if next.validate().is_ok() => {
                self.tariffs = tariffs;
                self.policy.set_config(next.low_power.clone());
                self.prefs = next;
                self.refresh_advice();
            }
            Ok(_) | Err(_) => {
                let why = next
                    .validate()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                tracing::warn!("preferences refused: {why}");
            }
        }
    }

    fn refresh_advice(&mut self) {
        self.advice = advice(&self.prefs.low_power, self.policy.state(), None);
    }

    /// Records a change of low-power mode in the store at once and announces it.
    fn low_power_changed(&mut self, t: Transition) {
        self.refresh_advice();
        tracing::info!("{}", t.message);
        if let Some(ledger) = self.ledger.as_mut() {
            if let Err(e) = ledger.record_low_power(&t.state, &t.message) {
                self.store_failed(e);
            }
        }
        if self.prefs.low_power.os_power_mode {
            // Off the sampling task: the client talks to D-Bus and may be slow.
            let os_power = self.os_power.clone();
            let enabled = t.state.enabled;
            std::thread::spawn(move || {
                let mut mode = os_power.lock().unwrap_or_else(|e| e.into_inner());
                match mode.follow(enabled) {
                    Ok(done) => tracing::info!("{done}"),
                    Err(e) => tracing::warn!("the OS power mode was not changed: {e}"),
                }
            });
        }
        self.low_power_event = Some(t.message);
        self.low_power_seq += 1;
    }

    fn store_failed(&mut self, e: crate::store::StoreError) {
        tracing::error!("energy store: {e}");
        self.notice = Some(format!("Energy history is not being saved: {e}"));
    }

    /// Writes the pending batch and refreshes the stored totals.
    fn flush(&mut self) {
        self.last_flush = Instant::now();
        let totals = self.session.totals(&self.prefs.currency);
        let now = unix_now();
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        match ledger
            .flush(totals.joules.0, totals.cost, now)
            .and_then(|()| ledger.totals(now))
        {
            Ok(t) => {
                self.totals = Some(t);
                self.check_budgets(t, now);
                self.refresh_lifetime_by_domain();
            }
            Err(e) => self.store_failed(e),
        }
        self.follow_reset_elsewhere(now);
    }

    fn refresh_lifetime_by_domain(&mut self) {
        let Some(ledger) = self.ledger.as_ref() else {
            return;
        };
        match ledger.store().lifetime_by_domain() {
            Ok(v) => self.lifetime_by_domain = v,
            Err(e) => tracing::warn!("could not read lifetime energy by domain: {e}"),
        }
    }

    /// `wattbar-cli reset-session` ends the session in the store; start a new one here too.
    fn follow_reset_elsewhere(&mut self, now: f64) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        match ledger.ended_elsewhere() {
            Ok(false) => {}
            Ok(true) => match ledger.restart_session(now, self.prefs.currency.as_str()) {
                Ok(()) => {
                    tracing::info!("the session was reset from outside; a new one started");
                    self.session = Session::new(now, self.gap_threshold);
                    self.last_clocks = None;
                }
                Err(e) => self.store_failed(e),
            },
            Err(e) => self.store_failed(e),
        }
    }

    /// Alerts for budgets crossed, each once per local day or month.
    fn check_budgets(&mut self, totals: LedgerTotals, now: f64) {
        let Some(ledger) = self.ledger.as_mut() else {
            return;
        };
        let (day, month) = crate::store::local_day_month(now);
        let mut fresh = Vec::new();
        for alert in budget::crossed(&self.prefs, &totals) {
            let period = if alert.kind.starts_with("daily") {
                &day
            } else {
                &month
            };
            match ledger.first_alert(&format!("{}:{period}", alert.kind), now) {
                Ok(true) => fresh.push(alert),
                Ok(false) => {}
                Err(e) => tracing::warn!("could not record a budget alert: {e}"),
            }
        }
        if !fresh.is_empty() {
            for a in &fresh {
                tracing::info!("{}", a.message);
            }
            self.alerts = fresh;
            self.alert_seq += 1;
        }
    }

    fn published(&mut self) -> Arc<Published> {
        self.seq += 1;
        Arc::new(Published {
            seq: self.seq,
            snapshot: self.snapshot.clone(),
            session: self.session.totals(&self.prefs.currency),
            low_power: self.policy.state().clone(),
            advice: self.advice.clone(),
            low_power_event: self.low_power_event.clone(),
            low_power_seq: self.low_power_seq,
            os_low_power_mode: *self
                .os_low_power_mode
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
            prefs: self.prefs.clone(),
            price_per_kwh: self.prefs.price_per_kwh.per_kwh(),
            interval_ms: self.prefs.interval_ms,
            totals: self.totals,
            lifetime_by_domain: self.lifetime_by_domain.clone(),
            sources: self.sources.clone(),
            notice: self.notice.clone(),
            alerts: self.alerts.clone(),
            alert_seq: self.alert_seq,
        })
    }
}

fn ticker(period: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(period);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// Starts the engine on the current tokio runtime. The first sample is taken at once.
pub fn spawn(chain: Chain, config: EngineConfig) -> EngineHandle {
    let started = unix_now();
    let (ledger, notice) = match &config.store {
        Some(path) => match Ledger::open(path, started, config.prefs.currency.as_str()) {
            Ok((ledger, notice)) => (Some(ledger), notice),
            Err(e) => {
                tracing::error!("energy store: {e}");
                (
                    None,
                    Some(format!("Energy history is not being saved: {e}")),
                )
            }
        },
        None => (None, None),
    };
    let totals = ledger.as_ref().and_then(|l| l.totals(started).ok());
    let restored = match ledger.as_ref().map(|l| l.store().low_power()) {
        Some(Ok(state)) => state,
        Some(Err(e)) => {
            tracing::warn!("could not read the last low-power state: {e}");
            LowPowerState::off()
        }
        None => LowPowerState::off(),
    };
    let tariffs = config
        .prefs
        .tariff_schedule()
        .unwrap_or_else(|_| Tariffs::flat(config.prefs.price_per_kwh));
    let config_low_power = config.prefs.low_power.clone();
    let policy = Policy::new(config_low_power.clone(), restored);
    let sources = chain.ids();
    let mut engine = Engine {
        chain,
        session: Session::new(unix_now(), config.gap_threshold),
        gap_threshold: config.gap_threshold,
        prefs: config.prefs,
        origin: Instant::now(),
        last_clocks: None,
        snapshot: None,
        seq: 0,
        recent: Arc::new(Mutex::new(VecDeque::new())),
        ledger,
        meter: Meter::new(),
        clamped_logged: 0,
        tariffs,
        batch_interval: config.batch_interval,
        last_flush: Instant::now(),
        totals,
        lifetime_by_domain: Vec::new(),
        sources,
        notice,
        alerts: Vec::new(),
        alert_seq: 0,
        advice: advice(&config_low_power, policy.state(), None),
        policy,
        low_power_event: None,
        low_power_seq: 0,
        os_power: Arc::new(Mutex::new(crate::os_power::OsPowerMode::new(
            config.os_power,
        ))),
        os_low_power_mode: Arc::new(Mutex::new(None)),
    };
    watch_macos_low_power_mode(&engine.os_low_power_mode);
    engine.refresh_lifetime_by_domain();
    let recent = engine.recent.clone();
    let (state_tx, state_rx) = watch::channel(engine.published());
    let (cmd_tx, mut cmd_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut period = engine.period();
        let mut tick = ticker(period);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    engine.sample();
                }
                command = cmd_rx.recv() => match command {
                    Some(Command::Shutdown(done)) => {
                        engine.apply(Command::Shutdown(done));
                        break;
                    }
                    Some(command) => engine.apply(command),
                    None => break,
                },
            }
            if engine.period() != period {
                period = engine.period();
                tick = ticker(period);
                tick.reset();
            }
            if state_tx.send(engine.published()).is_err() {
                break;
            }
        }
    });
    EngineHandle {
        reader: EngineReader {
            state: state_rx,
            recent,
            commands: cmd_tx,
        },
        task,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::{Quality, Source, Watts};
    use wattbar_sources::{replay::parse_trace, ReplaySource};

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
        let engine = spawn(replay("t,watts\n0,300\n"), EngineConfig::new(prefs));
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
        let engine = spawn(
            replay("t,watts\n0,3600\n"),
            EngineConfig::new(Preferences {
                price_per_kwh: Price::new(0.0).unwrap_or_default(),
                ..Preferences::default()
            }),
        );
        let mut rx = engine.subscribe();
        // 1000 s at 3600 W = 1 kWh, free.
        wait_for(&mut rx, |p| p.session.kwh >= 1.0 - 1e-9).await;
        engine
            .send(Command::SetPrice(Price::new(0.5).unwrap_or_default()))
            .unwrap_or_else(|e| panic!("{e}"));
        let priced = wait_for(&mut rx, |p| p.price_per_kwh == 0.5).await;
        assert_eq!(priced.session.cost, 0.0);
        let later = wait_for(&mut rx, |p| p.session.kwh >= 2.0 - 1e-9).await;
        assert!(
            (later.session.cost - 0.5).abs() < 1e-9,
            "{}",
            later.session.cost
        );
        engine.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn reset_starts_a_new_session_and_low_power_is_published() {
        let engine = spawn(
            replay("t,watts\n0,100\n"),
            EngineConfig::new(Preferences::default()),
        );
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
        let engine = spawn(
            replay("t,watts\n0,300\n"),
            EngineConfig::new(Preferences::default()).with_store(db.clone()),
        );
        let mut rx = engine.subscribe();
        let done = wait_for(&mut rx, |p| p.session.joules.0 >= 180_000.0 - 1e-6).await;
        // Stored totals trail by at most one batch (5 s at 300 W = 1.5 kJ).
        let stored = done.totals.map(|t| t.lifetime.joules).unwrap_or(-1.0);
        assert!(stored >= 180_000.0 - 1_500.0 - 1e-6, "{stored}");
        engine.shutdown().await;
        let (store, moved) = crate::store::Store::open(&db, 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert!(moved.is_none());
        let lifetime = store.lifetime().unwrap_or_else(|e| panic!("{e}"));
        assert!((lifetime.joules - 180_000.0).abs() < 1e-6, "{lifetime:?}");
        assert!((lifetime.kwh - 0.05).abs() < 1e-9);
    }

    #[tokio::test(start_paused = true)]
    async fn a_high_trace_engages_low_power_and_the_store_remembers_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = dir.path().join("wattbar.db");
        // 40 W for a minute, then 5 W.
        let engine = spawn(
            replay("t,watts\n0,40\n60,5\n"),
            EngineConfig::new(Preferences::default()).with_store(db.clone()),
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
        let engine = spawn(
            replay("t,watts\n0,5\n"),
            EngineConfig::new(Preferences::default()).with_store(db.clone()),
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
        let engine = spawn(
            replay("t,watts\n0,3600\n"),
            EngineConfig::new(prefs).with_store(dir.path().join("wattbar.db")),
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
        let engine = spawn(Chain::new(sources), EngineConfig::new(prefs));
        let mut rx = engine.subscribe();
        let mono = |p: &Published| p.snapshot.as_ref().map(|s| s.at.monotonic);
        let a = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
        let t0 = mono(&a).unwrap_or_default();
        let b = wait_for(&mut rx, |p| mono(p).is_some_and(|t| t > t0)).await;
        let t1 = mono(&b).unwrap_or_default();
        assert!(t1 - t0 >= Duration::from_millis(250), "{:?}", t1 - t0);
        engine.stop();
    }

    #[test]
    fn local_week_seconds_start_on_monday_midnight() {
        use chrono::{Local, TimeZone};
        // Monday 23 November 2026, local midnight, and 17:30 on the Wednesday after.
        let monday = Local
            .with_ymd_and_hms(2026, 11, 23, 0, 0, 0)
            .single()
            .map(|d| d.timestamp() as f64)
            .unwrap_or_else(|| panic!("no such local time"));
        let wednesday = Local
            .with_ymd_and_hms(2026, 11, 25, 17, 30, 0)
            .single()
            .map(|d| d.timestamp() as f64)
            .unwrap_or_else(|| panic!("no such local time"));
        assert_eq!(local_week_seconds(monday), 0.0);
        assert_eq!(local_week_seconds(monday + 0.25), 0.25);
        assert_eq!(
            local_week_seconds(wednesday),
            2.0 * 86_400.0 + 17.5 * 3600.0
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_interval_can_change_while_running() {
        let engine = spawn(
            replay("t,watts\n0,10\n"),
            EngineConfig::new(Preferences::default()),
        );
        let mut rx = engine.subscribe();
        wait_for(&mut rx, |p| p.snapshot.is_some()).await;
        engine
            .send(Command::SetInterval(Duration::from_millis(100)))
            .unwrap_or_else(|e| panic!("{e}"));
        let a = wait_for(&mut rx, |p| p.interval_ms == 100).await;
        let t0 = a
            .snapshot
            .as_ref()
            .map(|s| s.at.monotonic)
            .unwrap_or_default();
        let b = wait_for(&mut rx, |p| {
            p.snapshot
                .as_ref()
                .map(|s| s.at.monotonic)
                .unwrap_or_default()
                > t0
        })
        .await;
        let t1 = b
            .snapshot
            .as_ref()
            .map(|s| s.at.monotonic)
            .unwrap_or_default();
        assert!(t1 - t0 <= Duration::from_millis(150), "{:?}", t1 - t0);
        engine.stop();
    }
}
