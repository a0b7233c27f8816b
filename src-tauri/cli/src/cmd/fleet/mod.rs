//! `fleet`: many machines' watts side by side, live, from each machine's API (`--hosts`,
//! `--hostfile`) or from a Prometheus server that scrapes them (`--prometheus`).
//!
//! Rules:
//! - A host is healthy when it answered, its last sample is fresh and it has a headline. The
//!   total sums only healthy hosts and says how many of how many ("2 of 3"): a down or stale
//!   host is never counted as 0 W, nor its last figure as today's.
//! - A host is down when it did not answer within the timeout, or answered with an error; stale
//!   when it answered with a sample older than `--stale` (or three of its own sampling periods).
//! - Hosts are polled at most [`MAX_IN_FLIGHT`] at once, each on its own pace: a slow or
//!   down host holds up no other, and a down host is asked less and less often.

mod api;
mod http;
mod prometheus;
mod show;
mod view;

use view::{paced_interval, FleetView};

use anyhow::{Context, Result};
use std::time::Duration;

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
    let text = wattbar_engine::home::paths::read_at_most(
        path,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests;
