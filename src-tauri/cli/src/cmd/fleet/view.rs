//! What the fleet view shows, whichever way it is fed: each host's row, judged up, stale or
//! down, and the total over the healthy ones.

use serde::Serialize;
use std::time::Duration;
use wattbar_core::{Quality, Scope};

/// Requests in flight at once, whatever the number of hosts.
pub const MAX_IN_FLIGHT: usize = 64;
/// A down host is asked again after its interval doubled per failure, up to this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
    /// The period the host samples at, where it says (its API does; Prometheus does not).
    pub period_seconds: Option<f64>,
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
            period_seconds: None,
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

    /// Up, or stale when it has no headline or its sample is older than `stale` (or than three
    /// of its own periods, for a host that samples slowly); down stays down.
    pub fn judged(mut self, stale: Duration) -> HostRow {
        if self.health == Health::Down {
            return self;
        }
        self.health = Health::Up;
        let limit = stale
            .as_secs_f64()
            .max(3.0 * self.period_seconds.unwrap_or(0.0));
        if let Some(age) = self.age_seconds.filter(|a| *a > limit) {
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
