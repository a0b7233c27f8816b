//! `fleet`: many machines' watts side by side, live, from each machine's API (`--hosts`,
//! `--hostfile`) or from a Prometheus server that scrapes them (`--prometheus`).
//!
//! Rules:
//! - A host is healthy when it answered, its last sample is fresh and it has a headline. The
//!   total sums only healthy hosts and says how many of how many ("2 of 3"): a down or stale
//!   host is never counted as 0 W, nor its last figure as today's.
//! - A host is down when it did not answer within the timeout, or answered with an error; stale
//!   when it answered with a sample older than `--stale`.
//! - Hosts are polled at most [`MAX_IN_FLIGHT`] at once, each on its own pace: a slow or
//!   down host holds up no other, and a down host is asked less and less often.

mod api;
mod http;
mod prometheus;
mod show;

use anyhow::{Context, Result};
use serde::Serialize;
use std::time::Duration;
use wattbar_core::{Quality, Scope};

/// Requests in flight at once, whatever the number of hosts.
pub const MAX_IN_FLIGHT: usize = 64;
/// A down host is asked again after its interval doubled per failure, up to this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub enum Source {
    /// Each host's own API, `host:port` (port 9471 where none is given) or a URL.
    Hosts(Vec<String>),
    /// The Prometheus server at this URL.
    Prometheus(String),
}

pub struct Options {
    pub source: Source,
    /// How often the view refreshes; `None`: paced by the number of hosts.
    pub interval: Option<Duration>,
    pub timeout: Duration,
    /// A host whose last sample is older is stale; `None`: three intervals, at least 10 s.
    pub stale: Option<Duration>,
    pub json: bool,
    pub count: Option<u64>,
}

/// The refresh interval for `hosts` machines when none is given: a few machines every 2 s, a
/// large fleet less often, as all-smi paces its view.
pub fn paced_interval(hosts: usize) -> Duration {
    match hosts {
        0..=16 => Duration::from_secs(2),
        17..=64 => Duration::from_secs(3),
        _ => Duration::from_secs(5),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    /// Answered with a fresh headline.
    Up,
    /// Answered, but its last sample is old, or it has no headline.
    Stale,
    /// No answer within the timeout, or an error.
    Down,
    /// Not asked yet, or its first answer is on its way.
    Pending,
}

/// One machine as the view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HostRow {
    /// The address it was reached at (`--hosts`), or Prometheus' `instance` label.
    pub host: String,
    /// The machine's own host name, where it said.
    pub name: Option<String>,
    pub health: Health,
    /// Why it is down or stale.
    pub reason: Option<String>,
    pub watts: Option<f64>,
    pub scope: Option<Scope>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    pub age_seconds: Option<f64>,
    pub today_kwh: Option<f64>,
    pub today_cost: Option<f64>,
    pub currency: Option<String>,
    pub low_power: Option<bool>,
    pub top_program: Option<String>,
    pub top_program_watts: Option<f64>,
}

impl HostRow {
    pub fn pending(host: &str) -> HostRow {
        HostRow {
            host: host.to_string(),
            name: None,
            health: Health::Pending,
            reason: None,
            watts: None,
            scope: None,
            quality: None,
            source: None,
            age_seconds: None,
            today_kwh: None,
            today_cost: None,
            currency: None,
            low_power: None,
            top_program: None,
            top_program_watts: None,
        }
    }

    /// Down for `reason`: only its name is kept, no figure it gave before.
    pub fn down(self, reason: String) -> HostRow {
        HostRow {
            name: self.name,
            health: Health::Down,
            reason: Some(reason),
            ..HostRow::pending(&self.host)
        }
    }

    /// Up, or stale when its sample is older than `stale` or it has no headline.
    pub fn judged(mut self, stale: Duration) -> HostRow {
        self.health = Health::Up;
        if let Some(age) = self.age_seconds.filter(|a| *a > stale.as_secs_f64()) {
            self.health = Health::Stale;
            self.reason = Some(format!("its last sample is {age:.0} s old"));
        } else if self.watts.is_none() {
            self.health = Health::Stale;
            self.reason.get_or_insert_with(|| "no headline".to_string());
        }
        self
    }
}

/// One refresh of the view: `--json` prints it as one line.
#[derive(Debug, Clone, Serialize)]
pub struct FleetView {
    /// When it was put together, Unix seconds (this machine's clock).
    pub at: f64,
    /// The sum of the healthy hosts' watts; `None` when none is healthy.
    pub total_watts: Option<f64>,
    /// What the summed figures cover, each scope once.
    pub total_scopes: Vec<Scope>,
    pub total_today_kwh: Option<f64>,
    /// Healthy hosts, of `hosts_total`.
    pub hosts_up: usize,
    pub hosts_total: usize,
    /// Most watts first, hosts without a figure last.
    pub hosts: Vec<HostRow>,
}

impl FleetView {
    pub fn new(mut hosts: Vec<HostRow>, at: f64) -> FleetView {
        hosts.sort_by(|a, b| match (a.watts, b.watts) {
            (Some(x), Some(y)) => y.total_cmp(&x).then_with(|| a.host.cmp(&b.host)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.host.cmp(&b.host),
        });
        let healthy: Vec<&HostRow> = hosts.iter().filter(|h| h.health == Health::Up).collect();
        let mut total_scopes: Vec<Scope> = healthy.iter().filter_map(|h| h.scope).collect();
        total_scopes.sort();
        total_scopes.dedup();
        let sum = |f: fn(&HostRow) -> Option<f64>| -> Option<f64> {
            let figures: Vec<f64> = healthy.iter().filter_map(|h| f(h)).collect();
            (!figures.is_empty()).then(|| figures.iter().sum())
        };
        FleetView {
            at,
            total_watts: sum(|h| h.watts),
            total_scopes,
            total_today_kwh: sum(|h| h.today_kwh),
            hosts_up: healthy.len(),
            hosts_total: hosts.len(),
            hosts,
        }
    }
}

pub fn fleet(runtime: &tokio::runtime::Runtime, o: Options) -> Result<()> {
    let hosts = match &o.source {
        Source::Hosts(h) => h.len(),
        Source::Prometheus(_) => 16,
    };
    let interval = o.interval.unwrap_or_else(|| paced_interval(hosts));
    let stale = o
        .stale
        .unwrap_or_else(|| (interval * 3).max(Duration::from_secs(10)));
    let mut shown = 0u64;
    let mut print = |view: &FleetView| -> Result<bool> {
        show::print(view, o.json)?;
        shown += 1;
        Ok(o.count.is_none_or(|c| shown < c))
    };
    runtime.block_on(async {
        let stop = crate::engine::terminated();
        let work = async {
            match &o.source {
                Source::Hosts(hosts) => {
                    let targets = hosts
                        .iter()
                        .map(|h| api::Target::parse(h))
                        .collect::<Result<Vec<_>>>()?;
                    api::run(targets, interval, o.timeout, stale, &mut print).await
                }
                Source::Prometheus(url) => {
                    let server = prometheus::Server::new(url, o.timeout)?;
                    prometheus::run(&server, interval, stale, &mut print).await
                }
            }
        };
        tokio::select! {
            r = work => r,
            _ = stop => Ok(()),
        }
    })
}

/// The hosts of a host file: one per line, blank lines and `#` comments skipped.
pub fn read_hostfile(path: &std::path::Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests;
