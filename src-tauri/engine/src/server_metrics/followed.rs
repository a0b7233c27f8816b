//! One followed server: where it is asked, why, and what its last scrapes said; and the servers
//! found by themselves that are no longer asked.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::server_window::Scrape;
use wattbar_sources::background::Background;
use wattbar_sources::error::Error as SourceError;
use wattbar_sources::server_metrics::scrape::MetricsClient;
use wattbar_sources::server_metrics::Family;

/// A model server to follow.
#[derive(Clone, PartialEq)]
pub struct ServerMetricsConfig {
    /// `http://127.0.0.1:8080` (`/metrics` is added) or the full metrics URL.
    pub url: String,
    /// Sent as `Authorization: Bearer` (vLLM's and SGLang's `--api-key`), to its origin alone.
    pub token: Option<wattbar_core::secret::Bound>,
    /// The family it must answer as, where the person named one.
    pub kind: Option<Family>,
}

impl std::fmt::Debug for ServerMetricsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetricsConfig")
            .field("url", &self.url)
            .field("token", &self.token)
            .field("kind", &self.kind)
            .finish()
    }
}

impl ServerMetricsConfig {
    /// The servers the preference lists.
    pub fn from_prefs(prefs: &[wattbar_core::prefs::ServerMetricsPref]) -> Vec<Self> {
        prefs
            .iter()
            .map(|p| ServerMetricsConfig {
                url: p.url.clone(),
                token: p
                    .token
                    .clone()
                    .and_then(|t| wattbar_core::secret::Bound::new(&p.url, t)),
                kind: p.kind.as_deref().and_then(Family::named),
            })
            .collect()
    }
}

/// Why a server is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// `serve --server-metrics`.
    Flag,
    /// The preference `server_metrics`.
    Preference,
    /// The proxy's upstream, found by itself.
    Upstream,
    /// A model server's process found listening on loopback by the programs' reads.
    Listening,
}

impl Origin {
    /// Found by itself, not named by the person: let go when it never answers as a server.
    pub(super) fn found(self) -> bool {
        matches!(self, Origin::Upstream | Origin::Listening)
    }
}

/// Scrapes in a row that a server found by itself may fail before it is no longer followed
/// (Ollama, which has no `/metrics`): three windows.
pub(super) const FOUND_TRIES: u32 = 3;

/// Servers let go remembered: far more than one machine runs.
const LET_GO_KEPT: usize = 64;

/// Servers found by themselves that never answered as a model server, not asked again while the
/// engine runs: an upstream by its port; a process found listening by its port and process, so
/// that another server later on that port is asked.
#[derive(Debug, Default)]
pub(super) struct LetGo(VecDeque<(u16, Option<(u32, u64)>)>);

impl LetGo {
    pub(super) fn add(&mut self, port: u16, process: Option<(u32, u64)>) {
        if self.0.len() == LET_GO_KEPT {
            self.0.pop_front();
        }
        self.0.push_back((port, process));
    }

    pub(super) fn holds(&self, port: u16, process: Option<(u32, u64)>) -> bool {
        self.0
            .iter()
            .any(|(p, k)| *p == port && (k.is_none() || *k == process))
    }
}

/// One scrape as the worker makes it: when it was answered, and what it said.
pub(super) type Scraped = (f64, wattbar_sources::server_metrics::ServerMetrics);

pub(super) struct Followed {
    pub(super) url: String,
    /// Its port, where it runs on this machine.
    pub(super) port: Option<u16>,
    pub(super) origin: Origin,
    /// The process found listening, for a server found so.
    pub(super) process: Option<(u32, u64)>,
    /// What it was started from, to tell a changed preference.
    pub(super) config: ServerMetricsConfig,
    /// Failed scrapes since the last good one.
    pub(super) failures: u32,
    /// Asked once already.
    pub(super) asked: bool,
    pub(super) worker: Background<Scraped>,
    pub(super) last: Option<Scrape>,
    pub(super) family: Option<Family>,
    pub(super) error: Option<String>,
}

impl Followed {
    /// Starts asking `config.url` on a thread of its own, once per `window`; `unix`: the
    /// engine's wall clock.
    pub(super) fn start(
        config: &ServerMetricsConfig,
        origin: Origin,
        window: Duration,
        unix: &Arc<dyn Fn() -> f64 + Send + Sync>,
    ) -> Followed {
        let client = MetricsClient::new(&config.url, config.token.clone());
        let shown = client.as_ref().map_or_else(
            |_| wattbar_outbound::shown(&config.url),
            |m| m.shown().to_string(),
        );
        let port = client.as_ref().ok().and_then(MetricsClient::loopback_port);
        let clock = Arc::clone(unix);
        let worker = Background::spawn("server-metrics", window * 3, move || {
            let client = client?;
            Ok(move || {
                // A server that answers nothing useful now may later (started with --metrics,
                // or a model loaded): the worker keeps asking.
                let scraped = client.scrape().map_err(|e| match e {
                    SourceError::Unavailable(m) => SourceError::Transient(m),
                    other => other,
                })?;
                Ok((clock(), scraped))
            })
        });
        Followed {
            url: shown,
            port,
            origin,
            process: None,
            config: config.clone(),
            failures: 0,
            asked: false,
            worker,
            last: None,
            family: None,
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_let_go_is_its_port_and_a_process_let_go_is_that_process_alone() {
        let mut let_go = LetGo::default();
        let_go.add(11434, None);
        let_go.add(8080, Some((4242, 100)));
        // Ollama behind the proxy: its port, whoever listens there.
        assert!(let_go.holds(11434, None));
        assert!(let_go.holds(11434, Some((1, 1))));
        // A process found listening: that process; another on its port is asked.
        assert!(let_go.holds(8080, Some((4242, 100))));
        assert!(!let_go.holds(8080, Some((4242, 200))));
        assert!(!let_go.holds(8080, None));
        // Bounded: the oldest is forgotten first.
        for port in 1..=LET_GO_KEPT as u16 {
            let_go.add(port, Some((u32::from(port), 0)));
        }
        assert!(!let_go.holds(11434, None));
        assert!(let_go.holds(1, Some((1, 0))));
    }
}
