//! CPU proxy from `top -l 2` (source `top`, estimated).
//!
//! Rule: busy = 100 − idle % of the SECOND `CPU usage:` line. The first sample of `top -l` has
//! no previous one to difference against (its per-process POWER column is all 0.0 for the same
//! reason), so it is never used. Watts = [`CpuPowerModel::power_at`](crate::cpu_proxy::CpuPowerModel::power_at)(busy),
//! domain `cpu`, quality estimated. The POWER column is Apple's unitless energy impact, not
//! watts, and is ignored.

use crate::cpu_proxy::CpuPowerModel;
use crate::error::Error;
use crate::sample::Sample;
use serde_json::{json, Map};
use wattbar_core::{Domain, Quality, Reading, Stamp};

pub const SOURCE_ID: &str = "top";

/// The `CPU usage:` line of the second sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopCpu {
    pub user_percent: f64,
    pub sys_percent: f64,
    pub idle_percent: f64,
}

impl TopCpu {
    /// Busy share of all CPUs, 0..1.
    pub fn busy_fraction(&self) -> f64 {
        ((100.0 - self.idle_percent) / 100.0).clamp(0.0, 1.0)
    }

    /// The estimated CPU reading under `model`.
    pub fn estimate(&self, model: &CpuPowerModel, at: Stamp) -> Reading {
        Reading::power(
            Domain::Cpu,
            model.power_at(self.busy_fraction()),
            SOURCE_ID,
            Quality::Estimated,
            at,
        )
    }

    /// Utilisation only (no model known): state, no readings.
    pub fn to_sample(&self, _at: Stamp) -> Sample {
        let mut state = Map::new();
        state.insert("cpu_user_percent".into(), json!(self.user_percent));
        state.insert("cpu_sys_percent".into(), json!(self.sys_percent));
        state.insert("cpu_idle_percent".into(), json!(self.idle_percent));
        state.insert(
            "cpu_busy_percent".into(),
            json!(self.busy_fraction() * 100.0),
        );
        Sample {
            readings: Vec::new(),
            state,
        }
    }

    /// Utilisation and the estimated CPU power under `model`.
    pub fn to_sample_with_model(&self, model: &CpuPowerModel, at: Stamp) -> Sample {
        let mut sample = self.to_sample(at);
        sample.readings.push(self.estimate(model, at));
        sample
    }
}

fn parse_err(line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        what: "top -l 2",
        line,
        message: message.into(),
    }
}

/// `27.39% user, 40.18% sys, 32.42% idle`.
fn parse_usage(s: &str) -> Option<TopCpu> {
    let (mut user, mut sys, mut idle) = (None, None, None);
    for part in s.split(',') {
        let (num, label) = part.trim().split_once('%')?;
        let v: f64 = num.trim().parse().ok().filter(|v: &f64| v.is_finite())?;
        match label.trim() {
            "user" => user = Some(v),
            "sys" => sys = Some(v),
            "idle" => idle = Some(v),
            _ => {}
        }
    }
    Some(TopCpu {
        user_percent: user?,
        sys_percent: sys?,
        idle_percent: idle?,
    })
}

/// Parses `top -l 2` output and returns the second sample's CPU usage.
pub fn parse_top(text: &str) -> Result<TopCpu, Error> {
    let usage: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| l.trim().strip_prefix("CPU usage:").map(|u| (i + 1, u)))
        .collect();
    let (n, line) = match usage.as_slice() {
        [_, second, ..] => *second,
        [(n, _)] => {
            return Err(parse_err(
                Some(*n),
                "only one sample: the first `top -l` sample is not an interval; run `top -l 2`",
            ))
        }
        [] => return Err(parse_err(None, "no `CPU usage:` line")),
    };
    parse_usage(line).ok_or_else(|| parse_err(Some(n), format!("cannot read {:?}", line.trim())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_proxy::TdpOrigin;
    use wattbar_core::Watts;

    #[test]
    fn the_first_sample_alone_is_not_an_interval() {
        let one = "Processes: 1 total\nCPU usage: 10.0% user, 5.0% sys, 85.0% idle \n";
        assert!(parse_top(one).is_err());
        assert!(parse_top("").is_err());
        assert!(parse_top("CPU usage: a\nCPU usage: 1% user, 2% sys\n").is_err());
    }

    #[test]
    fn busy_share_drives_the_power_model() {
        let text = "CPU usage: 1.0% user, 1.0% sys, 98.0% idle\nCPU usage: 30.0% user, 20.0% sys, 50.0% idle\n";
        let cpu = parse_top(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cpu.busy_fraction(), 0.5);
        // 10 % idle floor of 20 W + 18 W × 0.5 = 11 W.
        let model = CpuPowerModel::with_tdp(Watts(20.0), TdpOrigin::Configured);
        let r = cpu.estimate(&model, Stamp::default());
        assert_eq!(r.watts, Some(Watts(11.0)));
        assert_eq!(r.quality, Quality::Estimated);
        assert_eq!(r.source, "top");
    }
}
