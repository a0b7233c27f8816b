//! Model servers followed by their own counters (`serve --server-metrics URL`), with no proxy:
//! each window's tokens per model beside the energy measured in it.
//!
//! Rules:
//! - Each server is scraped on a thread of its own ([`Background`]), asked once per window
//!   ([`WINDOW`], shorter only where the tests ask):
//!   the engine's loop never waits for a server, and llama.cpp's gauges have one reader.
//! - A window runs from one good scrape to the next, timed by the scrapes themselves; its energy
//!   is the headline's over the same span, from the intervals the engine keeps, and net of the
//!   idle baseline where one is known ([`server_windows`]). A window closes only once the
//!   intervals reach its end: a scrape answered after the newest waits for the next sample.
//!   Where the server's process is known (found listening, or the process listening on a
//!   followed loopback port) and the programs' reads saw it draw on GPUs that tell their use per
//!   process, it is that process's share of the GPUs' energy instead ([`on_process_gpus`]).
//! - A failed scrape is said once per new reason; the window then waits for the next good scrape
//!   and spans the failures (the counters are cumulative: nothing is lost). A server restart
//!   costs the window across it, and is said.
//! - The last [`KEPT`] windows are published, newest last. Each window is handed to the ledger;
//!   each model's sums are what the ledger committed ([`CommittedTotals`](crate::recorder::committed)),
//!   so that they never go back, across a crash or a restart.

mod followed;

use crate::programs::Listener;
use followed::{Followed, LetGo, Scraped, FOUND_TRIES};
pub use followed::{Origin, ServerMetricsConfig};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::server_window::{
    on_process_gpus, server_windows, Scrape, ServerWindow,
};
use wattbar_core::inference::{window_energy, Baseline, Interval};
use wattbar_core::programs::process_gpu::{process_gpu_share, ProcessGpuWindow};
use wattbar_core::Stamp;
use wattbar_sources::server_metrics::Family;

/// How often each server is scraped: the span of a window.
pub const WINDOW: Duration = Duration::from_secs(10);
/// The shortest window that may be asked for (the tests' 1 s), and the longest.
pub const WINDOW_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(500)..=Duration::from_secs(600);
/// Windows published, all servers together: an hour of one server.
pub const KEPT: usize = 360;

/// What the proxy measured itself, for the windows of its upstream: its port on this machine,
/// and the spans (Unix seconds) of its recent and open requests.
#[derive(Debug, Default)]
pub struct ProxySeen {
    pub upstream_port: Option<u16>,
    pub spans: Vec<(f64, f64)>,
}

impl ProxySeen {
    fn saw(&self, port: Option<u16>, from: f64, to: f64) -> bool {
        port.is_some()
            && port == self.upstream_port
            && self.spans.iter().any(|(s, e)| *s < to && *e > from)
    }
}

/// What readers see of one followed server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerStatus {
    pub url: String,
    /// Why it is followed: `flag`, `preference`, `upstream` or `listening`.
    pub origin: Origin,
    /// `llama.cpp`, `vLLM`, `SGLang` or `TGI`, once a scrape has said.
    pub family: Option<&'static str>,
    /// Why the last scrape gave nothing, while that lasts.
    pub error: Option<String>,
}

/// What readers see of all of them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ServerMetricsView {
    pub servers: Vec<ServerStatus>,
    /// The newest windows, newest last.
    pub windows: Vec<ServerWindow>,
}

/// The stage: owns the followed servers and the windows they made.
pub struct ServerMetrics {
    servers: Vec<Followed>,
    windows: VecDeque<ServerWindow>,
    view: Arc<ServerMetricsView>,
    /// When the servers are next asked (the engine's monotonic time).
    due: Option<Duration>,
    window: Duration,
    unix: Arc<dyn Fn() -> f64 + Send + Sync>,
    /// Servers found by themselves that answered no model server's `/metrics`.
    let_go: LetGo,
}

impl ServerMetrics {
    /// Follows each of `flags` (`serve --server-metrics`) and `preferred` (the preference);
    /// `unix`: the engine's wall clock, for the scrapes' times. A server whose address cannot be
    /// used is said and kept, with its reason, in the view.
    pub fn new(
        flags: &[ServerMetricsConfig],
        preferred: &[ServerMetricsConfig],
        window: Duration,
        unix: Arc<dyn Fn() -> f64 + Send + Sync>,
    ) -> Self {
        let window = window.clamp(*WINDOW_RANGE.start(), *WINDOW_RANGE.end());
        let followed = flags
            .iter()
            .map(|c| Followed::start(c, Origin::Flag, window, &unix))
            .chain(
                preferred
                    .iter()
                    .filter(|c| !flags.iter().any(|f| f.url == c.url))
                    .map(|c| Followed::start(c, Origin::Preference, window, &unix)),
            )
            .collect();
        let mut stage = ServerMetrics {
            servers: followed,
            windows: VecDeque::new(),
            view: Arc::default(),
            due: None,
            window,
            unix,
            let_go: LetGo::default(),
        };
        stage.view = Arc::new(stage.build_view());
        stage
    }

    /// The proxy forwards to `port` on this machine: that server is followed too, unless it
    /// already is. One that answers no `/metrics` of a known family for [`FOUND_TRIES`] windows
    /// is let go, and not asked again while the engine runs. One address is asked, the
    /// upstream's own: no port is scanned.
    pub fn follow_upstream(&mut self, port: Option<u16>) {
        let Some(port) = port else { return };
        if self.let_go.holds(port, None) || self.servers.iter().any(|s| s.port == Some(port)) {
            return;
        }
        let url = format!("http://127.0.0.1:{port}");
        tracing::info!("server metrics: asking the proxy's upstream {url} for its /metrics");
        self.found(url, Origin::Upstream, None);
    }

    /// The model servers' processes the programs' reads found listening on loopback
    /// ([`crate::programs::Listener`]): each not yet followed (by port) is followed, and let go
    /// as the upstream is; those whose process ended stop being followed (a new one on the
    /// same port is found again, with a new baseline).
    pub fn follow_listening(&mut self, found: &[Listener]) {
        let before = self.servers.len();
        self.servers.retain(|s| {
            s.origin != Origin::Listening || found.iter().any(|l| Some(l.process) == s.process)
        });
        let mut changed = self.servers.len() != before;
        // A server followed otherwise learns its process from the one listening on its port,
        // for its GPU energy.
        for s in &mut self.servers {
            if let Some(l) = found.iter().find(|l| Some(l.at.port()) == s.port) {
                s.process = Some(l.process);
            }
        }
        for l in found {
            let port = l.at.port();
            if self.let_go.holds(port, Some(l.process))
                || self.servers.iter().any(|s| s.port == Some(port))
            {
                continue;
            }
            let url = format!("http://{}", l.at);
            tracing::info!(
                "server metrics: {} (pid {}) listens on {url}: asking it for its /metrics",
                l.program,
                l.process.0
            );
            self.found(url, Origin::Listening, Some(l.process));
            changed = true;
        }
        if changed {
            self.view = Arc::new(self.build_view());
        }
    }

    fn found(&mut self, url: String, origin: Origin, process: Option<(u32, u64)>) {
        let config = ServerMetricsConfig {
            url,
            token: None,
            kind: None,
        };
        let mut followed = Followed::start(&config, origin, self.window, &self.unix);
        followed.process = process;
        self.servers.push(followed);
        self.view = Arc::new(self.build_view());
    }

    /// The preference changed to `preferred`: servers it no longer lists (or lists otherwise)
    /// stop being followed, new ones start; the others go on from their last scrape.
    pub fn configure(&mut self, preferred: &[ServerMetricsConfig]) {
        self.servers
            .retain(|s| s.origin != Origin::Preference || preferred.contains(&s.config));
        for c in preferred {
            if !self.servers.iter().any(|s| s.config.url == c.url) {
                self.servers.push(Followed::start(
                    c,
                    Origin::Preference,
                    self.window,
                    &self.unix,
                ));
            }
        }
        self.view = Arc::new(self.build_view());
    }

    /// Whether any server is followed: a machine without one pays nothing here.
    pub fn following(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Whether a window is due at `at`: only then is [`observe`](Self::observe) worth the
    /// intervals and the proxy's spans it is given.
    pub fn due(&self, at: Stamp) -> bool {
        self.following() && self.due.is_none_or(|d| at.monotonic >= d)
    }

    /// At `at`, once a window is due: each server's newest scrape closes its window against the
    /// one before. `intervals`: the engine's, in time order; `proxy`: what the proxy measured
    /// itself, whose windows say so and add to no sum. The windows made, to be kept.
    pub fn observe<'a>(
        &mut self,
        at: Stamp,
        intervals: impl DoubleEndedIterator<Item = &'a Interval>,
        baseline: Option<&Baseline>,
        proxy: &ProxySeen,
        gpu: &[ProcessGpuWindow],
    ) -> Vec<ServerWindow> {
        let mut made_all = Vec::new();
        if !self.due(at) {
            return made_all;
        }
        self.due = Some(at.monotonic + self.window);
        let mut newest: Vec<Option<Scraped>> = Vec::new();
        for s in &mut self.servers {
            // A server's first ask only starts its worker: the first answer comes by the next.
            let first = !std::mem::replace(&mut s.asked, true);
            newest.push(match s.worker.latest(at) {
                Ok(scraped) => {
                    s.error = None;
                    s.failures = 0;
                    Some(scraped.clone())
                }
                Err(_) if first => None,
                Err(e) => {
                    let why = e.to_string();
                    s.failures += 1;
                    if s.error.as_ref() != Some(&why) && !s.origin.found() {
                        tracing::warn!("server metrics: {}: {why}", s.url);
                    }
                    s.error = Some(why);
                    None
                }
            });
        }
        // A server found by itself that never answered as a model server is let go, and said.
        let mut i = 0;
        let let_go = &mut self.let_go;
        self.servers.retain(|s| {
            let keep = !(s.origin.found() && s.family.is_none() && s.failures >= FOUND_TRIES);
            if !keep {
                if let Some(port) = s.port {
                    let_go.add(port, s.process);
                }
                let why = s.error.as_deref().unwrap_or("no answer");
                match s.origin {
                    Origin::Upstream => tracing::info!(
                        "server metrics: the proxy's upstream {} gives no model server's \
                         /metrics ({why}): its requests are measured by the proxy alone",
                        s.url
                    ),
                    _ => tracing::info!(
                        "server metrics: {} gives no model server's /metrics ({why}): not \
                         asked again",
                        s.url
                    ),
                }
                newest.remove(i);
            } else {
                i += 1;
            }
            keep
        });
        let oldest = self
            .servers
            .iter()
            .filter_map(|s| s.last.as_ref().map(|l| l.at))
            .fold(f64::INFINITY, f64::min);
        // Only the intervals the windows can reach, newest first, then in time order.
        let mut newest_first = intervals.rev().peekable();
        let reached = newest_first.peek().map(|i| i.unix_end);
        let mut kept: Vec<Interval> = newest_first
            .take_while(|i| i.unix_end > oldest)
            .cloned()
            .collect();
        kept.reverse();
        let mut again_soon = false;
        for (s, scraped) in self.servers.iter_mut().zip(newest) {
            let Some((answered, metrics)) = scraped else {
                continue;
            };
            let now = Scrape {
                at: answered,
                models: metrics.models,
            };
            if s.last.as_ref().is_some_and(|l| l.at >= now.at) {
                continue;
            }
            // Answered after the newest interval (the sample was stamped before the scrape
            // came back): its window's energy is not all measured yet. It waits for the next
            // sample, which reaches it; the counters lose nothing by waiting.
            if s.last.is_some() && reached.is_some_and(|r| now.at > r) {
                again_soon = true;
                continue;
            }
            if let Some(kind) = s.config.kind.filter(|k| *k != metrics.family) {
                let why = format!(
                    "answers as {}, not {} as set: not counted",
                    metrics.family.name(),
                    kind.name()
                );
                if s.error.as_ref() != Some(&why) {
                    tracing::warn!("server metrics: {}: {why}", s.url);
                }
                s.error = Some(why);
                s.last = None;
                continue;
            }
            if s.family != Some(metrics.family) {
                tracing::info!(
                    "server metrics: {} is {}: its tokens are counted per window",
                    s.url,
                    metrics.family.name()
                );
                s.family = Some(metrics.family);
            }
            if let Some(before) = &s.last {
                let headline = window_energy(&kept, before.at, now.at);
                // The server's process tree's share of the GPUs: the listener and every
                // process it started (vLLM V1's EngineCore, SGLang's schedulers).
                let share = s
                    .process
                    .and_then(|(pid, _)| process_gpu_share(gpu, pid, before.at, now.at));
                let own = share.as_ref().and_then(|sh| on_process_gpus(&headline, sh));
                let gpu_processes = own
                    .as_ref()
                    .and(share.as_ref())
                    .map(|sh| u32::try_from(sh.processes).unwrap_or(u32::MAX));
                // The GPUs' idle draw is not known apart: no baseline nets a process's share.
                let (energy, baseline) = match &own {
                    Some(own) => (own, None),
                    None => (&headline, baseline),
                };
                match server_windows(
                    &s.url,
                    before,
                    &now,
                    metrics.family.counting(),
                    energy,
                    baseline,
                ) {
                    Ok(mut made) => {
                        for w in &mut made {
                            w.proxied = proxy.saw(s.port, w.from, w.to);
                            w.gpu_processes = gpu_processes;
                        }
                        made_all.extend(made);
                    }
                    Err(_) => tracing::info!(
                        "server metrics: {}'s counters went back: it restarted; the window \
                         across the restart is not counted",
                        s.url
                    ),
                }
            }
            s.last = Some(now);
        }
        if again_soon {
            self.due = Some(at.monotonic);
        }
        self.windows.extend(made_all.iter().cloned());
        while self.windows.len() > KEPT {
            self.windows.pop_front();
        }
        let view = self.build_view();
        if view != *self.view {
            self.view = Arc::new(view);
        }
        made_all
    }

    fn build_view(&self) -> ServerMetricsView {
        ServerMetricsView {
            servers: self
                .servers
                .iter()
                .map(|s| ServerStatus {
                    url: s.url.clone(),
                    origin: s.origin,
                    family: s.family.map(Family::name),
                    error: s.error.clone(),
                })
                .collect(),
            windows: self.windows.iter().cloned().collect(),
        }
    }

    /// What readers see.
    pub fn view(&self) -> Arc<ServerMetricsView> {
        Arc::clone(&self.view)
    }
}

#[cfg(test)]
mod tests;
