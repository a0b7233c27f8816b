//! What a program starts the engine with: its preferences, its ledger and the files it keeps
//! current, its clock and the parts it may or may not run.
//!
//! Rule: the defaults are those of a program that is watched (nothing rests, nothing is found
//! by itself, nothing is kept on disk); `serve` and the tray ask for more by name.

use crate::time::clock::{Clock, SystemClock};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::{Chain, Preferences};

/// The sampling period while a request is in flight, unless the sources update slower.
pub const INFERENCE_INTERVAL: Duration = Duration::from_millis(100);

/// The sampling period: the preference, but never faster than the slowest source can give new
/// values (half NVML's counter update period, for one).
pub(super) fn period(prefs: &Preferences, chain: &Chain) -> Duration {
    let chosen = prefs.interval();
    match chain.min_interval() {
        Some(min) if min > chosen => min,
        _ => chosen,
    }
}

/// How often pending samples are written to the store.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct EngineConfig {
    pub prefs: Preferences,
    /// The SQLite ledger; `None` keeps everything in memory. Its folder is locked.
    pub store: Option<PathBuf>,
    pub batch_interval: Duration,
    /// The bus power-profiles-daemon is on, for the `os_power_mode` preference; `None`: the
    /// system bus.
    pub os_power_bus: Option<String>,
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
    /// How often the price and carbon feeds are asked ([`crate::stages::prices`]).
    pub feed_pace: crate::stages::prices::FeedPace,
}

impl EngineConfig {
    pub fn new(prefs: Preferences) -> Self {
        EngineConfig {
            prefs,
            store: None,
            batch_interval: DEFAULT_BATCH_INTERVAL,
            os_power_bus: None,
            clock: Arc::new(SystemClock::new()),
            api: None,
            advice_file: None,
            preferences_file: None,
            proc_root: PathBuf::from("/"),
            notice: None,
            server_metrics: Vec::new(),
            server_metrics_window: crate::server_metrics::WINDOW,
            feed_pace: crate::stages::prices::FeedPace::default(),
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
