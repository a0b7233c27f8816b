//! The sampling loop: one tokio task that samples the chain every interval, integrates the
//! session, and publishes the result on a `watch` channel.
//!
//! Time: integration uses tokio's monotonic clock, which does not advance while the machine is
//! suspended. When the wall clock moved on by more than the gap threshold beyond the monotonic
//! clock between two samples, the machine slept (or the clock jumped): the session records a gap
//! and nothing is integrated across it.

use crate::error::Error;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use wattbar_core::energy::DEFAULT_GAP_THRESHOLD;
use wattbar_core::{Chain, Currency, Preferences, Price, Session, SessionTotals, Snapshot, Stamp};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub prefs: Preferences,
    pub gap_threshold: Duration,
}

impl EngineConfig {
    pub fn new(prefs: Preferences) -> Self {
        EngineConfig {
            prefs,
            gap_threshold: DEFAULT_GAP_THRESHOLD,
        }
    }
}

/// Requests to the engine. Each one is applied and republished at once.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    SetPrice(Price),
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
    pub low_power: bool,
    pub price_per_kwh: f64,
    pub interval_ms: u64,
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
    state: watch::Receiver<Arc<Published>>,
    recent: Recent,
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

impl EngineHandle {
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

    /// A sender that can be moved into callbacks.
    pub fn commands(&self) -> mpsc::UnboundedSender<Command> {
        self.commands.clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

fn unix_now() -> f64 {
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
        self.session.push(
            at.monotonic,
            snapshot.headline_watts(),
            self.prefs.price_per_kwh,
        );
        self.remember(at, snapshot.headline_watts().map(|w| w.0));
        self.snapshot = Some(snapshot);
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
            Command::SetPrice(p) => self.prefs.price_per_kwh = p,
            Command::SetCurrency(c) => self.prefs.currency = c,
            Command::SetLowPower(on) => self.prefs.low_power = on,
            Command::SetInterval(d) => self.prefs.interval_ms = d.as_millis() as u64,
            Command::ResetSession => {
                self.session = Session::new(unix_now(), self.gap_threshold);
                self.last_clocks = None;
            }
        }
    }

    fn published(&mut self) -> Arc<Published> {
        self.seq += 1;
        Arc::new(Published {
            seq: self.seq,
            snapshot: self.snapshot.clone(),
            session: self.session.totals(&self.prefs.currency),
            low_power: self.prefs.low_power,
            price_per_kwh: self.prefs.price_per_kwh.per_kwh(),
            interval_ms: self.prefs.interval_ms,
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
    };
    let recent = engine.recent.clone();
    let (state_tx, state_rx) = watch::channel(engine.published());
    let (cmd_tx, mut cmd_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut period = engine.prefs.interval();
        let mut tick = ticker(period);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    engine.sample();
                }
                command = cmd_rx.recv() => match command {
                    Some(command) => engine.apply(command),
                    None => break,
                },
            }
            if engine.prefs.interval() != period {
                period = engine.prefs.interval();
                tick = ticker(period);
                tick.reset();
            }
            if state_tx.send(engine.published()).is_err() {
                break;
            }
        }
    });
    EngineHandle {
        state: state_rx,
        recent,
        commands: cmd_tx,
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
        let after = wait_for(&mut rx, |p| p.low_power).await;
        assert_eq!(after.session.joules.0, 0.0);
        engine.stop();
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
