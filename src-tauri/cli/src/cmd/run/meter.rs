//! Where a run's energy comes from.
//!
//! Rules:
//! - One engine per ledger: when a running engine (serve or the tray app) holds this data folder
//!   and has an API, the run asks it for each window's energy (`/v1/energy`) and follows its
//!   states (`/v1/stream`) instead of reading the hardware a second time.
//! - Otherwise the run starts an engine of its own with no ledger (it takes no lock and writes
//!   nothing) and samples at the run's interval. Its intervals are kept for the whole run, not
//!   just the engine's 15 minutes.
//! - Energy of a window comes from the same intervals the ledger is made of (counters where the
//!   sources have them, the trapezoid rule otherwise), each interval counted in proportion to its
//!   overlap with the window, so windows that tile a run add up to the run.

use super::samples::{Samples, State};
use anyhow::{bail, Context, Result};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_core::inference::{window_energy, WindowEnergy};
use wattbar_core::Unavailable;
use wattbar_engine::{Command, EngineConfig, EngineHandle};
use wattbar_serve::view::StatePayload;

type Shared = Arc<Mutex<Samples>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

enum Kind {
    Here { engine: EngineHandle },
    Engine { client: crate::client::Client },
}

pub struct Meter {
    kind: Kind,
    samples: Shared,
}

impl Meter {
    /// Samples here at `interval` with an engine of the run's own.
    pub async fn here(
        chain: wattbar_core::Chain,
        prefs: wattbar_core::Preferences,
        interval: Duration,
    ) -> Result<Meter> {
        Meter::here_recording(chain, prefs, interval, None).await
    }

    /// As [`Meter::here`], recording into the ledger at `store` when one is given (which takes
    /// the data folder's lock).
    pub async fn here_recording(
        chain: wattbar_core::Chain,
        prefs: wattbar_core::Preferences,
        interval: Duration,
        store: Option<std::path::PathBuf>,
    ) -> Result<Meter> {
        let mut prefs = prefs;
        // The run measures; it must not change the machine's power mode or the advice.
        prefs.low_power.auto = false;
        prefs.low_power.on_battery = false;
        prefs.low_power.battery_below_percent = None;
        prefs.low_power.os_power_mode = false;
        prefs.interval_ms = interval.as_millis() as u64;
        let mut config = EngineConfig::new(prefs);
        config.store = store;
        let engine = wattbar_engine::spawn(chain, config)?;
        engine.send(Command::SetInterval(interval))?;
        let samples: Shared = Arc::default();
        let reader = engine.reader();
        let s = Arc::clone(&samples);
        let runtime = tokio::runtime::Handle::current();
        std::thread::Builder::new()
            .name("wattbar-run-meter".into())
            .spawn(move || {
                let mut rx = reader.subscribe();
                let mut last_end = f64::NEG_INFINITY;
                while runtime.block_on(rx.changed()).is_ok() {
                    let published = rx.borrow_and_update().clone();
                    let state = State::from(&StatePayload::from(&*published));
                    let fresh = reader.intervals_after(last_end);
                    if let Some(e) = fresh.last() {
                        last_end = e.unix_end;
                    }
                    let mut kept = lock(&s);
                    kept.push_intervals(fresh);
                    kept.push_state(state);
                }
            })?;
        Ok(Meter {
            kind: Kind::Here { engine },
            samples,
        })
    }

    /// Follows the running engine `client` reaches.
    pub fn engine(client: crate::client::Client) -> Result<Meter> {
        let stream = client
            .stream()
            .with_context(|| format!("the running engine's stream at {}", client.base()))?;
        let samples: Shared = Arc::default();
        let s = Arc::clone(&samples);
        std::thread::Builder::new()
            .name("wattbar-run-stream".into())
            .spawn(move || {
                for data in stream {
                    let Ok(data) = data else { break };
                    if let Ok(state) = serde_json::from_str::<StatePayload>(&data) {
                        lock(&s).push_state(State::from(&state));
                    }
                }
            })?;
        Ok(Meter {
            kind: Kind::Engine { client },
            samples,
        })
    }

    /// The engine of this run's own, when it samples here.
    pub fn reader(&self) -> Option<wattbar_engine::EngineReader> {
        match &self.kind {
            Kind::Here { engine, .. } => Some(engine.reader()),
            Kind::Engine { .. } => None,
        }
    }

    /// Whether windows from `from` on have their energy per domain: always here; from a
    /// running engine only while they start within the stretch it keeps in memory (older
    /// energy comes from its stored samples, which have the whole machine's only).
    pub fn keeps_domains_from(&self, from: f64) -> bool {
        match &self.kind {
            Kind::Here { .. } => true,
            Kind::Engine { .. } => {
                wattbar_engine::unix_now() - from
                    < wattbar_engine::inference::book::WINDOW_KEEP.as_secs_f64() - 60.0
            }
        }
    }

    /// How the energy was measured, for summaries.
    pub fn describe(&self) -> String {
        let every = humantime_ms(self.interval());
        match &self.kind {
            Kind::Here { .. } => format!("sampled by this run every {every}"),
            Kind::Engine { client } => {
                format!(
                    "from the running engine at {}/, which samples every {every}",
                    client.base()
                )
            }
        }
    }

    /// The period samples are taken at now: `--interval`, or slower where a source cannot
    /// give new values that fast.
    pub fn interval(&self) -> Duration {
        let ms = lock(&self.samples).last().map_or(1000, |(_, ms)| ms);
        Duration::from_millis(ms.max(1))
    }

    /// The time of the last sample seen.
    pub fn last_sample(&self) -> Option<f64> {
        lock(&self.samples).last().and_then(|(at, _)| at)
    }

    /// Waits until a sample at or after `t` (Unix seconds) is in.
    pub async fn wait_past(&self, t: f64) -> Result<()> {
        let give_up = self.interval() * 3 + Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + give_up;
        while self.last_sample().is_none_or(|at| at < t) {
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "no sample came in for {} s: the engine is not sampling",
                    give_up.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Here, the collector takes a state's intervals before the state itself: once the
        // state is in, so is every interval it ends.
        Ok(())
    }

    /// The energy of the window from `from` to `to` (Unix seconds).
    pub fn energy(&self, from: f64, to: f64) -> Result<WindowEnergy> {
        match &self.kind {
            Kind::Here { .. } => {
                let intervals = lock(&self.samples).intervals(from, to);
                Ok(window_energy(&intervals, from, to))
            }
            Kind::Engine { client } => {
                Ok(client.get_as::<WindowEnergy>(&format!("/v1/energy?from={from}&to={to}"))?)
            }
        }
    }

    /// The states sampled from `from` to `to`, including the first one at or after `to`
    /// (which ends the last interval of the window).
    pub fn states(&self, from: f64, to: f64) -> Vec<State> {
        lock(&self.samples).states(from, to).collect()
    }

    /// Why nothing could be measured, from the last sample.
    pub fn unavailable(&self) -> Vec<Unavailable> {
        lock(&self.samples).unavailable().to_vec()
    }

    /// Everything sampled so far, for the output files; the meter keeps nothing of it.
    pub fn take_samples(&self) -> Samples {
        lock(&self.samples).take()
    }

    pub async fn stop(self) {
        if let Kind::Here { engine, .. } = self.kind {
            if let Err(e) = engine.shutdown().await {
                eprintln!("wattbar-cli: the last batch could not be written: {e}");
            }
        }
    }
}

/// `100 ms`, `1 s`, `1.5 s`.
pub fn humantime_ms(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}
