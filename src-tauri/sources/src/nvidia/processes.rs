//! Which processes use each GPU, for energy per program: NVML's per-process utilisation
//! samples (`nvmlDeviceGetProcessUtilization`), each process's SM use summed over the samples
//! newer than the last call's newest. A process's share of a GPU's energy is its share of that
//! sum.
//!
//! A GPU that cannot tell (NVML's `NotSupported`: older GPUs, some vGPUs), a failed query, or a
//! GPU no process used says so: its energy stays unattributed with that reason.

use crate::error::Error;
use std::collections::BTreeMap;
use wattbar_core::programs::DeviceUse;

/// One NVML per-process sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessSample {
    pub pid: u32,
    /// NVML's CPU timestamp of the sample, µs.
    pub timestamp_us: u64,
    /// SM (compute and 3D) utilisation over the sample period, percent.
    pub sm_percent: u32,
}

/// GPU `index`'s use by processes from `asked`, what NVML answered for the samples newer than
/// `since` (µs; `None`: all the driver holds), and the newest timestamp seen, to ask from next
/// time. `source`: the id of the source that meters this GPU.
pub(super) fn device_use(
    source: &str,
    index: u32,
    since: Option<u64>,
    asked: Result<Option<Vec<ProcessSample>>, Error>,
) -> (DeviceUse, Option<u64>) {
    let mut out = DeviceUse {
        source: source.to_string(),
        device: index.to_string(),
        by_pid: BTreeMap::new(),
        none_because: None,
    };
    let samples = match asked {
        Ok(Some(s)) => s,
        Ok(None) => {
            out.none_because = Some(format!(
                "GPU {index} does not report its use per process (NVML: not supported)"
            ));
            return (out, since);
        }
        Err(e) => {
            out.none_because = Some(format!("GPU {index}: {e}"));
            return (out, since);
        }
    };
    let mut newest = since;
    for s in samples
        .iter()
        .filter(|s| since.is_none_or(|t| s.timestamp_us > t))
    {
        newest = Some(newest.map_or(s.timestamp_us, |n| n.max(s.timestamp_us)));
        if s.sm_percent > 0 {
            *out.by_pid.entry(s.pid).or_default() += f64::from(s.sm_percent);
        }
    }
    if out.by_pid.is_empty() {
        out.none_because = Some(format!("no process used GPU {index}"));
    }
    (out, newest)
}
