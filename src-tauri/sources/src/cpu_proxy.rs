//! CPU-utilisation proxy: works on any machine, quality `estimated`.
//!
//! Power model: P = idle + (TDP − idle) × u, with idle = 10 % of TDP and u the share of all
//! logical CPUs busy since the last sample (0..1).
//!
//! TDP, in order: the configured value; the long-term RAPL limit of package 0
//! (`sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw`, readable without root);
//! otherwise 4.5 W per logical CPU, kept within 15–200 W.
//!
//! Accuracy, checked against RAPL package power on four real CPUs at 10–100 % load
//! (codecarbon's load profiles, `tests/fixtures/linux/cpu-load-vs-rapl/`): the mean error is
//! 17.5 % of TDP and the worst 49 % (an EPYC that never reached its TDP). Real curves are
//! concave: light loads draw more than the model says, heavy loads on big parts less. It is an
//! estimate, labelled so, and only a fallback for when no sensor can be read.
//!
//! The estimate is a counter too ([`EstimateCounter`]): CPU time is one, and the model is linear
//! in it, so the joules it gives over 5 s are the sum of those over five 1 s intervals. Each
//! reading carries the estimated energy since the source started, which the meter takes deltas
//! of, and an engine at rest may sample it as slowly as it samples a hardware counter.

use crate::error::Error;
use std::path::Path;
use std::time::Duration;
use sysinfo::{CpuRefreshKind, RefreshKind, System};
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp, Watts};

/// Share of TDP drawn by an idle package.
pub const IDLE_FRACTION: f64 = 0.10;
/// Fallback TDP per logical CPU when nothing better is known.
pub const FALLBACK_WATTS_PER_LOGICAL_CPU: f64 = 4.5;
pub const FALLBACK_TDP_MIN_WATTS: f64 = 15.0;
pub const FALLBACK_TDP_MAX_WATTS: f64 = 200.0;

const RAPL_PL1: &str = "sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw";

/// Where the TDP came from, shown to the user with the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TdpOrigin {
    Configured,
    RaplLimit,
    CoreCount,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuPowerModel {
    pub tdp: Watts,
    pub origin: TdpOrigin,
}

impl CpuPowerModel {
    pub fn with_tdp(tdp: Watts, origin: TdpOrigin) -> Self {
        CpuPowerModel { tdp, origin }
    }

    /// Picks the TDP as the module docs say.
    pub fn detect(root: &Path, configured_watts: Option<f64>) -> Self {
        if let Some(w) = configured_watts.filter(|w| w.is_finite() && *w > 0.0) {
            return CpuPowerModel::with_tdp(Watts(w), TdpOrigin::Configured);
        }
        if let Some(w) = std::fs::read_to_string(root.join(RAPL_PL1))
            .ok()
            .and_then(|s| parse_power_limit_uw(&s).ok())
        {
            return CpuPowerModel::with_tdp(w, TdpOrigin::RaplLimit);
        }
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        CpuPowerModel::with_tdp(fallback_tdp(cpus), TdpOrigin::CoreCount)
    }

    pub fn idle(&self) -> Watts {
        Watts(self.tdp.0 * IDLE_FRACTION)
    }

    /// Estimated package power at utilisation `u` (0..1; clamped).
    pub fn power_at(&self, utilisation: f64) -> Watts {
        let u = if utilisation.is_finite() {
            utilisation.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let idle = self.idle().0;
        Watts(idle + (self.tdp.0 - idle) * u)
    }
}

pub fn fallback_tdp(logical_cpus: usize) -> Watts {
    Watts(
        (logical_cpus as f64 * FALLBACK_WATTS_PER_LOGICAL_CPU)
            .clamp(FALLBACK_TDP_MIN_WATTS, FALLBACK_TDP_MAX_WATTS),
    )
}

/// Parses a powercap `constraint_*_power_limit_uw` file (µW).
pub fn parse_power_limit_uw(text: &str) -> Result<Watts, Error> {
    let t = text.trim();
    let uw: u64 = t.parse().map_err(|_| Error::Parse {
        what: "power limit",
        line: None,
        message: format!("{t:?} is not a whole number of µW"),
    })?;
    let w = Watts::from_microwatts(uw as f64);
    if w.0 <= 0.0 || w.0 > 1000.0 {
        return Err(Error::Parse {
            what: "power limit",
            line: None,
            message: format!("{} W is not a plausible CPU limit", w.0),
        });
    }
    Ok(w)
}

pub const SOURCE_ID: &str = "cpu-proxy";

/// The estimated energy since the source started: each read's power (the mean over the CPU time
/// since the read before) times the time since that read. The first read only starts it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EstimateCounter {
    joules: f64,
    last: Option<Duration>,
}

impl EstimateCounter {
    /// Adds `watts`, the mean since the last read, up to `at`; the total after it. A clock that
    /// went back adds nothing.
    pub fn add(&mut self, watts: Watts, at: Duration) -> Joules {
        if let Some(last) = self.last {
            let seconds = at.saturating_sub(last).as_secs_f64();
            if watts.0.is_finite() && watts.0 >= 0.0 {
                self.joules += watts.0 * seconds;
            }
        }
        if self.last.is_none_or(|l| at > l) {
            self.last = Some(at);
        }
        Joules(self.joules)
    }

    /// `reading`, carrying this counter after `reading.watts` up to its time.
    pub fn count(&mut self, mut reading: Reading) -> Reading {
        if let Some(watts) = reading.watts {
            reading.energy_counter = Some(self.add(watts, reading.at.monotonic));
        }
        reading
    }
}

/// The proxy as a [`Source`], reading utilisation through `sysinfo`.
pub struct CpuProxy {
    model: CpuPowerModel,
    system: System,
    counted: EstimateCounter,
}

impl CpuProxy {
    pub fn new(model: CpuPowerModel) -> Self {
        // The first refresh sets the baseline; the first read then gives the load since start.
        let system = System::new_with_specifics(
            RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing().with_cpu_usage()),
        );
        CpuProxy {
            model,
            system,
            counted: EstimateCounter::default(),
        }
    }

    pub fn model(&self) -> CpuPowerModel {
        self.model
    }
}

impl Source for CpuProxy {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Estimated
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        self.system.refresh_cpu_usage();
        if self.system.cpus().is_empty() {
            return Err(Error::Unavailable("the OS reports no CPUs to sysinfo".into()).into());
        }
        let percent = f64::from(self.system.global_cpu_usage());
        let watts = self.model.power_at(percent / 100.0);
        Ok(vec![self.counted.count(Reading::power(
            Domain::Cpu,
            watts,
            SOURCE_ID,
            Quality::Estimated,
            at,
        ))])
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::Cpu])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_model_spans_idle_floor_to_tdp() {
        let m = CpuPowerModel::with_tdp(Watts(65.0), TdpOrigin::Configured);
        assert_eq!(m.power_at(0.0), Watts(6.5));
        assert_eq!(m.power_at(1.0), Watts(65.0));
        assert!((m.power_at(0.5).0 - 35.75).abs() < 1e-9);
        assert_eq!(m.power_at(1.7), Watts(65.0));
        assert_eq!(m.power_at(f64::NAN), Watts(6.5));
    }

    #[test]
    fn without_a_limit_tdp_follows_the_core_count_within_bounds() {
        assert_eq!(fallback_tdp(2), Watts(15.0));
        assert_eq!(fallback_tdp(16), Watts(72.0));
        assert_eq!(fallback_tdp(256), Watts(200.0));
    }

    #[test]
    fn the_rapl_long_term_limit_sets_the_tdp() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let zone = dir.path().join("sys/class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(zone.join("constraint_0_power_limit_uw"), "15000000\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let m = CpuPowerModel::detect(dir.path(), None);
        assert_eq!(m.tdp, Watts(15.0));
        assert_eq!(m.origin, TdpOrigin::RaplLimit);
        let configured = CpuPowerModel::detect(dir.path(), Some(28.0));
        assert_eq!(configured.tdp, Watts(28.0));
        assert_eq!(configured.origin, TdpOrigin::Configured);
    }

    #[test]
    fn a_garbage_power_limit_is_a_parse_error() {
        assert!(parse_power_limit_uw("lots").is_err());
        assert!(parse_power_limit_uw("0").is_err());
        assert!(parse_power_limit_uw("5000000000").is_err());
    }

    #[test]
    fn the_proxy_reads_this_machine_as_an_estimate_within_the_model() {
        let model = CpuPowerModel::with_tdp(Watts(20.0), TdpOrigin::Configured);
        let mut proxy = CpuProxy::new(model);
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let readings = proxy
            .read(Stamp::new(Duration::from_secs(1), 0.0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(readings.len(), 1);
        let r = &readings[0];
        assert_eq!(r.quality, Quality::Estimated);
        assert_eq!(r.domain, Domain::Cpu);
        let w = r.watts.unwrap_or(Watts(-1.0));
        assert!(w.0 >= 2.0 && w.0 <= 20.0, "{w:?}");
    }
}
