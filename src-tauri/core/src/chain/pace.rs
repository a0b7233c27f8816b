//! When the chain reads each source: only when it could add something.
//!
//! Rules, for each source in priority order within one sample:
//! - It is read when it could give a consumption domain (system, platform, cpu, gpu, ane, dram,
//!   soc) that no better source gave a usable reading of in this sample. What it can give is what
//!   its last successful read gave, else what it declares ([`Source::domains`](crate::Source::domains)), else unknown:
//!   then it is read.
//! - Otherwise it stands by, unread. So the moment a better source fails, or stops giving a
//!   domain, the one below is read in that same sample.
//! - A standing-by source that carries slowly changing state (battery charge, power source, the
//!   battery and adapter flows, declared or seen) is still read every [`SLOW_PACE`], the first time
//!   at once, to keep that state fresh.
//! - After a transient failure the source is asked again at the next sample; after k ≥ 2 in a row
//!   it waits min(2^(k−2) s, [`SLOW_PACE`]), and its last reason stays listed meanwhile.
//!
//! Every read is counted, with the time it took when the chain has a timer
//! ([`Chain::with_timer`](super::Chain::with_timer)): [`ReadCounter`].

use crate::reading::{Domain, Reading};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often a standing-by source that carries slow state is read, and the longest wait after
/// repeated failures.
pub const SLOW_PACE: Duration = Duration::from_secs(30);

/// Domains that are the machine's consumption, which a better source can cover. Battery and
/// adapter flows are not: they are state, refreshed at [`SLOW_PACE`].
pub fn is_consumption(domain: Domain) -> bool {
    !matches!(domain, Domain::Battery | Domain::Adapter)
}

/// How many times one source was read and how long its reads took, shared with readers (the
/// metrics) without copying anything per sample.
#[derive(Debug)]
pub struct ReadCounter {
    pub id: String,
    reads: AtomicU64,
    nanos: AtomicU64,
}

impl ReadCounter {
    pub(super) fn new(id: &str) -> Self {
        ReadCounter {
            id: id.to_string(),
            reads: AtomicU64::new(0),
            nanos: AtomicU64::new(0),
        }
    }

    /// A counter for the same source that goes on from this one's counts.
    pub(super) fn carried(&self) -> Self {
        ReadCounter {
            id: self.id.clone(),
            reads: AtomicU64::new(self.reads()),
            nanos: AtomicU64::new(self.nanos.load(Ordering::Relaxed)),
        }
    }

    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    pub fn seconds(&self) -> f64 {
        self.nanos.load(Ordering::Relaxed) as f64 / 1e9
    }

    fn add(&self, took: Duration) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// One source's schedule.
#[derive(Debug, Default)]
pub(super) struct Pace {
    /// Consumption domains of the last successful read that gave any.
    learned: Option<Vec<Domain>>,
    /// It has given a battery state or supply flows.
    carries_state: bool,
    last_read: Option<Duration>,
    failures: u32,
    /// The reason of the last transient failure, while it lasts.
    pub failing: Option<String>,
    /// It was left unread in the last sample because better sources covered it.
    pub standby: bool,
}

impl Pace {
    /// Whether to read the source at `now`, given what it declares and the consumption domains
    /// better sources already gave in this sample. Sets [`Pace::standby`].
    pub fn due(&mut self, now: Duration, declared: Option<&[Domain]>, covered: &[Domain]) -> bool {
        let adds = match self.learned.as_deref().or(declared) {
            None => true,
            Some(domains) => domains.iter().any(|d| !covered.contains(d)),
        };
        let carries_state =
            self.carries_state || declared.is_some_and(|ds| ds.iter().any(|d| !is_consumption(*d)));
        let refresh = carries_state && self.since_read(now).is_none_or(|s| s >= SLOW_PACE);
        self.standby = !adds;
        if !(adds || refresh) {
            return false;
        }
        if self.failures >= 2 {
            let wait = Duration::from_secs(1u64 << (self.failures - 2).min(5)).min(SLOW_PACE);
            return self.since_read(now).is_none_or(|s| s >= wait);
        }
        true
    }

    fn since_read(&self, now: Duration) -> Option<Duration> {
        self.last_read.map(|t| now.saturating_sub(t))
    }

    /// Notes a read at `now` that took `took` and gave `result`.
    pub fn read(
        &mut self,
        now: Duration,
        took: Duration,
        counter: &ReadCounter,
        result: Result<&[Reading], &str>,
        has_battery: bool,
    ) {
        counter.add(took);
        self.last_read = Some(now);
        self.carries_state |= has_battery;
        match result {
            Ok(readings) => {
                self.failures = 0;
                self.failing = None;
                self.carries_state |= readings.iter().any(|r| !is_consumption(r.domain));
                let mut domains: Vec<Domain> = readings
                    .iter()
                    .map(|r| r.domain)
                    .filter(|d| is_consumption(*d))
                    .collect();
                domains.dedup();
                if !domains.is_empty() {
                    self.learned = Some(domains);
                }
            }
            Err(reason) => {
                self.failures = self.failures.saturating_add(1);
                self.failing = Some(reason.to_string());
            }
        }
    }
}
