//! The engine's runner: one thread that samples the chain every interval, accounts each sample, records
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
//!
//! The runner is cut in two: [`sampling`] takes, accounts and records a sample; [`commands`]
//! applies what readers ask. Both act on the one [`Engine`] state below.

mod commands;
mod meter;
mod programs;
mod residency;
mod resident;
mod sampling;
#[cfg(test)]
mod tests;

use crate::accounting::Accounting;
use crate::command::Command;
use crate::command::EngineInbox;
use crate::error::Error;
use crate::handle::{EngineHandle, EngineReader};
use crate::home::lock::EngineLock;
use crate::inbox::Woken;
use crate::inference::book::{BASELINE_EVERY, BASELINE_SPAN};
use crate::inference::{Book, RecordIds, Reporter, RequestEvent, Requests};
use crate::low_power::LowPower;
use crate::programs::ProgramMeter;
use crate::published::Published;
use crate::recorder::Recorder;
use crate::time::clock::{Clock, SystemClock};
use meter::Meter;
use programs::Programs;
use resident::Resident;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use wattbar_core::inference::resident::Residency;
use wattbar_core::{Chain, Preferences, Stamp, Tariffs};

/// The sampling period while a request is in flight, unless the sources update slower.
pub const INFERENCE_INTERVAL: Duration = Duration::from_millis(100);

/// How often pending samples are written to the store.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_secs(10);

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
    /// ([`crate::home::paths::advice_path`]); `None`: nowhere.
    pub advice_file: Option<PathBuf>,
    /// Where a preference set one field at a time is saved ([`crate::home::paths::preferences_path`]);
    /// `None`: such changes last for this run only.
    pub preferences_file: Option<PathBuf>,
    /// Where processes are read for energy per program (`/`; tests give a fake tree).
    pub proc_root: PathBuf,
    /// What start-up has to tell the user (preferences set aside), shown until a later notice.
    pub notice: Option<String>,
    /// Model servers followed by their own `/metrics` ([`crate::server_metrics`]).
    pub server_metrics: Vec<crate::server_metrics::ServerMetricsConfig>,
    /// How often they are scraped: the span of a window ([`crate::server_metrics::WINDOW`]).
    pub server_metrics_window: std::time::Duration,
    /// Whether model servers listening on this machine may be found by their processes, where
    /// the preference `find_model_servers` also says so. Off unless a program asks
    /// ([`EngineConfig::finding_model_servers`]).
    pub find_model_servers: bool,
    /// Whether this engine samples at the preference `rest_interval_ms` while nobody looks
    /// ([`crate::stages::rest`]): `serve` and the tray, not the commands that are watched.
    pub may_rest: bool,
    /// How long after the last API request it may rest.
    pub rest_after: Duration,
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
            preferences_file: None,
            proc_root: PathBuf::from("/"),
            notice: None,
            server_metrics: Vec::new(),
            server_metrics_window: crate::server_metrics::WINDOW,
            find_model_servers: false,
            may_rest: false,
            rest_after: crate::stages::rest::DEFAULT_REST_AFTER,
        }
    }

    pub fn with_store(mut self, path: PathBuf) -> Self {
        self.store = Some(path);
        self
    }

    /// Model servers listening on this machine may be found, unless the environment has
    /// `WATTBAR_FIND_MODEL_SERVERS=0` (the tests, which never touch this machine's servers).
    pub fn finding_model_servers(mut self) -> Self {
        self.find_model_servers =
            std::env::var("WATTBAR_FIND_MODEL_SERVERS").map_or(true, |v| v != "0");
        self
    }

    /// Samples at the preference `rest_interval_ms` while nobody looks and a counter keeps the
    /// energy exact ([`crate::stages::rest`]).
    pub fn resting_when_unwatched(mut self) -> Self {
        self.may_rest = true;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// The engine's state: the chain and the clock it samples with, the preferences it owns, and one
/// field per stage of a sample ([`sampling`]), each owning its own state.
pub(crate) struct Engine {
    chain: Chain,
    clock: Arc<dyn Clock>,
    prefs: Arc<Preferences>,
    meter: Meter,
    recorder: Recorder,
    low_power: LowPower,
    inference: Inference,
    resident: Resident,
    programs: Programs,
    servers: crate::server_metrics::ServerMetrics,
    rest: crate::stages::rest::Rest,
    files: Files,
    /// Held until the last batch is written; released before shutdown answers.
    lock: Option<EngineLock>,
    publication: Publication,
}

/// The requests the proxy reported, owned here alone, and the book that makes their records.
struct Inference {
    requests: Requests,
    ids: RecordIds,
    book: Book,
}

/// The files the engine keeps current for others.
struct Files {
    /// Where the low-power advice is written ([`EngineConfig::advice_file`]).
    advice: Option<PathBuf>,
    /// The advice as last written there.
    advice_written: Option<crate::advice::LowPowerView>,
    /// Where a preference set one field at a time is saved.
    preferences: Option<PathBuf>,
}

/// What publishing needs beyond the stages' own state.
struct Publication {
    seq: u64,
    /// The chain's source ids, in order.
    sources: Vec<String>,
    /// Start-up's notice ([`EngineConfig::notice`]).
    start_notice: Option<String>,
    /// Answers to send once the state they caused is published, so that whoever is answered
    /// reads that state, not the one before.
    answers: Vec<Box<dyn FnOnce() + Send>>,
    /// The preferences, sent when they change and only then: what follows them (MQTT, OTLP)
    /// wakes for a change, not for every sample.
    prefs: watch::Sender<Preferences>,
}

enum Work {
    Sample,
    /// What the proxy saw. A request that started or ended makes a sample now, unless the last
    /// sample is more recent than the fast period.
    Events(Vec<RequestEvent>),
    Apply(Command),
}

impl Engine {
    fn stamp(&self) -> Stamp {
        Stamp::new(self.clock.elapsed(), self.clock.unix())
    }

    fn run(&mut self, work: Work) {
        self.work(work);
        self.write_advice();
        for reply in self.inference.requests.take_answerable() {
            self.after_publish(move || {
                let _ = reply.send(());
            });
        }
    }

    fn after_publish(&mut self, answer: impl FnOnce() + Send + 'static) {
        self.publication.answers.push(Box::new(answer));
    }

    fn work(&mut self, work: Work) {
        match work {
            Work::Sample => self.sample(),
            Work::Events(events) => {
                let mut started_or_ended = false;
                for event in events {
                    match event {
                        RequestEvent::Unloaded(u) => self.unloaded(&u),
                        event => started_or_ended |= self.inference.requests.apply(event),
                    }
                }
                if !started_or_ended {
                    return;
                }
                // At most one sample per fast period, however many requests start and end: a
                // flood of short requests must not become a flood of samples. A request whose
                // client waits for its receipt is settled at once: that client pays the sample.
                let since = self
                    .meter
                    .last
                    .map(|l| self.clock.elapsed().saturating_sub(l.monotonic));
                let fast = self.fast_period();
                if since.is_none_or(|s| s >= fast) || self.inference.requests.urgent() {
                    self.sample();
                }
            }
            Work::Apply(command) => self.apply(command),
        }
    }

    fn published(&mut self) -> Arc<Published> {
        self.publication.seq += 1;
        Arc::new(Published {
            seq: self.publication.seq,
            snapshot: self.meter.snapshot.clone(),
            part_totals: self
                .meter
                .part_totals
                .iter()
                .map(|(part, joules)| (part.clone(), *joules))
                .collect(),
            session: self.meter.accounting.totals(&self.prefs.currency),
            energy_method: self.meter.accounting.method(),
            low_power: self.low_power.state().clone(),
            advice: self.low_power.advice().clone(),
            low_power_event: self.low_power.event().cloned(),
            low_power_seq: self.low_power.seq(),
            low_power_events: self.low_power.recent(),
            os_low_power_mode: self.low_power.os_low_power_mode(),
            prefs: Arc::clone(&self.prefs),
            price_per_kwh: self.prefs.price_per_kwh.per_kwh(),
            interval_ms: self.prefs.interval_ms,
            period_ms: u64::try_from(self.period().as_millis()).unwrap_or(u64::MAX),
            totals: self
                .recorder
                .totals(self.clock.unix(), self.meter.accounting.scope()),
            committed: self.recorder.committed(),
            unwritten_joules: self.recorder.unwritten_joules(),
            calibration: self.meter.calibration.view(),
            sources: self.publication.sources.clone(),
            reads: self.chain.counters(),
            notice: self
                .recorder
                .notice()
                .or(self.publication.start_notice.as_ref())
                .cloned(),
            alerts: self.recorder.alerts().to_vec(),
            alert_seq: self.recorder.alert_seq(),
            inference: self.inference.book.view(),
            inflight: self.inference.requests.inflight(),
            models_in_flight: self.inference.requests.models_in_flight(),
            resident: Arc::clone(&self.resident.costs),
            programs: Arc::clone(&self.programs.view),
            server_metrics: self.servers.view(),
            history: self.meter.recent.shared(),
            intervals: self.inference.book.intervals(),
            records: self.inference.book.records(),
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
    let mut recorder = Recorder::open(
        config.store.as_deref(),
        config.batch_interval,
        started,
        &config.prefs,
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
    )
    .after(recorder.restored_scope());
    let book = Book::new(
        recorder.restored_inference(config.prefs.score_ceiling),
        config.prefs.score_ceiling,
    );
    let residency = Residency::new(
        BASELINE_SPAN.as_secs_f64(),
        BASELINE_EVERY.as_secs_f64(),
        recorder.restored_residency(started),
    );
    let resident = Resident::new(
        residency,
        accounting.price_per_kwh(crate::accounting::local_week_seconds(started)),
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
        config.os_power,
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
    let servers = crate::server_metrics::ServerMetrics::new(
        &config.server_metrics,
        &crate::server_metrics::ServerMetricsConfig::from_prefs(&config.prefs.server_metrics),
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
            crate::calibration::Calibration::new(recorder.restored_calibration()),
        ),
        recorder,
        low_power,
        inference: Inference {
            requests: Requests::default(),
            ids: ids.clone(),
            book,
        },
        resident,
        programs: Programs::new(programs, config.find_model_servers, find_model_servers),
        servers,
        rest: crate::stages::rest::Rest::new(config.may_rest, config.rest_after, rest_from),
        files: Files {
            advice: config.advice_file,
            advice_written: None,
            preferences: config.preferences_file,
        },
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
fn run_engine(mut engine: Engine, inbox: &EngineInbox, state: &watch::Sender<Arc<Published>>) {
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
