//! The engine's runner: one thread that samples the chain every interval, lets each stage observe
//! the sample, records it and publishes the result on a `watch` channel; commands come back
//! through its [`Inbox`](crate::inbox::Inbox).
//!
//! Rules:
//! - One engine per data folder: [`spawn`] takes the folder's lock ([`EngineLock`]) or fails with
//!   who holds it.
//! - The sampling work (reading sources, which may run a command or ask Ollama over HTTP, and
//!   writing SQLite) runs on the engine's own thread, never on the async workers that serve the
//!   API; between samples that thread sleeps in one timed wait ([`crate::inbox`]).
//! - Time comes from one [`Clock`](crate::time::clock::Clock): energy on its elapsed clock (which
//!   counts sleep, so a suspend is a gap), labels on its wall clock (whose steps move labels,
//!   never energy).
//!
//! [`spawn`] builds the [`Engine`] from what the ledger kept; [`run_engine`] is its loop, and
//! [`engine`] all that it does.

mod config;
mod engine;
mod publication;
#[cfg(test)]
mod tests;
mod view;

pub use config::{EngineConfig, DEFAULT_BATCH_INTERVAL};

use crate::accounting::Accounting;
use crate::advice::AdviceFile;
use crate::command::{Command, EngineInbox};
use crate::error::Error;
use crate::handle::{EngineHandle, EngineReader};
use crate::home::lock::EngineLock;
use crate::inbox::Woken;
use crate::inference::book::{BASELINE_EVERY, BASELINE_SPAN};
use crate::inference::{Book, RecordIds, Reporter};
use crate::programs::ProgramMeter;
use crate::published::PublishedState;
use crate::recorder::Recorder;
use crate::server_metrics::{ServerMetrics, ServerMetricsConfig};
use crate::stages::calibration::Calibration;
use crate::stages::inference::Inference;
use crate::stages::low_power::LowPower;
use crate::stages::meter::Meter;
use crate::stages::prices::{Prices, KEPT_BACK_SECONDS};
use crate::stages::programs::Programs;
use crate::stages::residency::Resident;
use crate::stages::rest::Rest;
use config::period;
pub use config::INFERENCE_INTERVAL;
use engine::Engine;
use publication::{Publication, Work};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;
use wattbar_core::inference::resident::Residency;
use wattbar_core::Chain;

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
    let mut recorder = Recorder::open(
        config.store.as_deref(),
        config.batch_interval,
        started,
        &config.prefs,
    );
    let keys = crate::keys::Keys::open(
        ledger_path
            .as_ref()
            .and_then(|p| p.parent())
            .map(crate::keys::stored::keys_path),
        started,
        &|name, unit, from, to| recorder.key_spent(name, unit, from, to),
    )?;
    let prices = Prices::new(
        Arc::new(config.prefs.clone()),
        Arc::clone(&clock),
        config.feed_pace,
        &mut |feed, quantity| recorder.restored_feed(feed, quantity, started - KEPT_BACK_SECONDS),
    );
    let accounting = Accounting::new(started, period(&config.prefs, &chain), prices.pricing())
        .after(recorder.restored_scope());
    let mut book = Book::new(
        recorder.restored_inference(config.prefs.score_ceiling),
        config.prefs.score_ceiling,
    );
    book.charge_to(keys.clone());
    let residency = Residency::new(
        BASELINE_SPAN.as_secs_f64(),
        BASELINE_EVERY.as_secs_f64(),
        recorder.restored_residency(started),
    );
    let resident = Resident::new(
        residency,
        accounting
            .price_per_kwh(started, crate::accounting::local_week_seconds(started))
            .0,
    );
    let programs = ProgramMeter::new(
        &config.proc_root,
        recorder.restored_program_day(started),
        Some(wattbar_ledger::store::local_day_month(started).0),
    );
    let ids = RecordIds::default();
    ids.number_from(book.first_free_id());
    recorder.reserve_record_ids(ids.next());
    // The reserve is durable before the proxy can hand out any id, and batches count from here.
    recorder.flush(
        clock.elapsed(),
        &accounting.totals(&config.prefs.currency),
        started,
        &config.prefs,
    );
    let low_power = LowPower::new(
        config.prefs.low_power.clone(),
        recorder.restored_low_power(),
        config.os_power_bus.clone(),
    );
    let mut chain = chain;
    // A plug named on the command line or in the environment comes first; else the preference's.
    let wall_meter = wattbar_sources::plugs::SOURCE_ID;
    if let Some(pref) = &config.prefs.wall_meter {
        if !chain.ids().iter().any(|id| id == wall_meter) {
            let meter = crate::setup::wall_meter_of(pref);
            chain.set_source(wall_meter, Some(crate::setup::wall_meter_source(&meter)));
        }
    }
    let timer_clock = Arc::clone(&clock);
    let chain = chain.with_timer(Box::new(move || timer_clock.elapsed()));
    let engaged = low_power.engagements();
    let low_power_events = low_power.events();
    let (prefs_tx, prefs_rx) = watch::channel(config.prefs.clone());
    let find_model_servers = config.prefs.find_model_servers;
    let rest_from = clock.elapsed();
    let scrape_clock = Arc::clone(&clock);
    let servers = ServerMetrics::new(
        &config.server_metrics,
        &ServerMetricsConfig::from_prefs(&config.prefs.server_metrics),
        config.server_metrics_window,
        Arc::new(move || scrape_clock.unix()),
    );
    let mut engine = Engine {
        publication: Publication {
            seq: 0,
            sources: chain.ids(),
            start_notice: config.notice,
            answers: Vec::new(),
            prefs: prefs_tx,
        },
        chain,
        clock,
        prefs: Arc::new(config.prefs),
        meter: Meter::new(
            accounting,
            Calibration::new(recorder.restored_calibration()),
        ),
        programs: Programs::new(programs, config.find_model_servers, find_model_servers),
        resident,
        inference: Inference::new(book, ids.clone(), recorder.restored_profiles()),
        servers,
        prices,
        low_power,
        wear: Default::default(),
        rest: Rest::new(config.may_rest, config.rest_after, rest_from),
        recorder,
        keys: keys.clone(),
        advice_file: AdviceFile::new(config.advice_file),
        preferences_file: config.preferences_file,
        lock,
    };
    engine.write_advice();
    engine.measured_changed();
    let attention = engine.rest.attention();
    let inbox = Arc::new(EngineInbox::default());
    let reporter = Reporter::new(
        crate::command::events_into(&inbox),
        Arc::clone(&engine.clock),
        ids,
    );
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
            commands: Arc::clone(&inbox),
            ledger: ledger_path.map(crate::ledger_reader::LedgerReader::new),
            reporter,
            keys,
            engaged,
            low_power_events,
            prefs: prefs_rx,
            attention,
        },
        thread: Some(thread),
    })
}

/// The engine thread: samples when due, takes commands and wake-ups as they come, publishes after
/// each, until told to stop. A late sample (a stalled source, a suspend) is not caught up: the
/// next is one period after it.
fn run_engine(mut engine: Engine, inbox: &EngineInbox, state: &watch::Sender<Arc<PublishedState>>) {
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
            Woken::Events(events) => Work::Events(events),
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
        for answer in engine.publication.answers.drain(..) {
            answer();
        }
    }
}
