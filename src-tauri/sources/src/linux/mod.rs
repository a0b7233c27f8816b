//! Linux sources: each reader takes `root: &Path` (tests point it at a fake sysfs tree).

pub mod hwmon;
pub mod listener;
pub mod power_supply;
pub mod proc_stat;
pub mod procs;
pub mod rapl;
#[cfg(target_os = "linux")]
pub mod sock_diag;
pub mod sysfs;

use crate::cpu_proxy::CpuPowerModel;
use crate::error::Error;
use crate::sample::Sample;
use std::path::Path;
use std::time::Duration;
use wattbar_core::{Source, Stamp};

/// The Linux hardware sources, best first, then the /proc/stat estimate.
pub fn linux_sources(root: &Path, model: CpuPowerModel) -> Vec<Box<dyn Source>> {
    vec![
        Box::new(power_supply::PowerSupply::new(root)),
        Box::new(rapl::Rapl::new(root)),
        Box::new(hwmon::Hwmon::new(root)),
        Box::new(proc_stat::ProcStat::new(root, model)),
    ]
}

fn note(sample: &mut Sample, source: &str, e: &Error) {
    let unavailable = sample
        .state
        .entry("unavailable")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let serde_json::Value::Object(m) = unavailable {
        m.insert(source.to_string(), e.to_string().into());
    }
}

/// Reads every Linux source once from `root`. With `then`, reads again from the second root as
/// if the duration had passed, which turns RAPL and hwmon counters and /proc/stat ticks into
/// watts. Unavailable sources are listed in `state.unavailable` with their reasons.
pub fn probe(root: &Path, then: Option<(&Path, Duration)>, model: CpuPowerModel) -> Sample {
    let t0 = Stamp::new(Duration::ZERO, 0.0);
    let mut sample = Sample::default();
    match power_supply::read_supplies(root).and_then(|s| power_supply::interpret(&s, t0)) {
        Ok(s) => {
            sample.readings.extend(s.readings);
            sample.state.extend(s.state);
        }
        Err(e) => note(&mut sample, power_supply::SOURCE_ID, &e),
    }
    let mut rapl = rapl::Rapl::new(root);
    let mut hwmon = hwmon::Hwmon::new(root);
    let mut stat = proc_stat::ProcStat::new(root, model);
    let first = (
        rapl.read_root(root, t0),
        hwmon.sample_root(root, t0),
        stat.read_root(root, t0),
    );
    let (r, h, p) = match then {
        Some((root2, after)) => {
            let t1 = Stamp::new(after, after.as_secs_f64());
            (
                rapl.read_root(root2, t1),
                hwmon.sample_root(root2, t1),
                stat.read_root(root2, t1),
            )
        }
        None => first,
    };
    match r {
        Ok(readings) => sample.readings.extend(readings),
        Err(e) => note(&mut sample, rapl::SOURCE_ID, &e),
    }
    match h {
        Ok(s) => {
            sample.readings.extend(s.readings);
            sample.state.extend(s.state);
        }
        Err(e) => note(&mut sample, hwmon::SOURCE_ID, &e),
    }
    match p {
        Ok(readings) => sample.readings.extend(readings),
        Err(e) => note(&mut sample, proc_stat::SOURCE_ID, &e),
    }
    sample
}
