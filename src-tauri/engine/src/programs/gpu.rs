//! A window's GPU energy, each GPU's to the programs that used it (by the sources' per-process
//! use), and why any GPU's energy stays nobody's.

use std::collections::BTreeMap;
use wattbar_core::programs::{DeviceUse, GpuShare};

/// Each GPU of the window with its programs' use of it (`uses`: what the sources said, by pid;
/// `program_of`: each pid's program), and why any GPU's energy is nobody's.
pub(super) fn gpu_shares(
    gpus: &BTreeMap<(String, String), f64>,
    uses: &[DeviceUse],
    program_of: &BTreeMap<u32, String>,
) -> (Vec<GpuShare>, Option<String>) {
    let mut why = Vec::new();
    let shares = gpus
        .iter()
        .map(|((source, device), joules)| {
            let mut by_program: BTreeMap<String, f64> = BTreeMap::new();
            match uses
                .iter()
                .find(|u| &u.source == source && &u.device == device)
            {
                Some(u) => {
                    for (pid, used) in &u.by_pid {
                        // A process this engine cannot see (another PID namespace) is nobody's.
                        if let Some(program) = program_of.get(pid) {
                            *by_program.entry(program.clone()).or_default() += used;
                        }
                    }
                    if let Some(reason) = &u.none_because {
                        why.push(reason.clone());
                    } else if by_program.is_empty() {
                        why.push(format!(
                            "the processes using {source} device {device} are not visible here"
                        ));
                    }
                }
                None => why.push(format!(
                    "{source} cannot tell which process uses device {device}"
                )),
            }
            GpuShare {
                joules: *joules,
                by_program,
            }
        })
        .collect();
    let why =
        (!why.is_empty()).then(|| format!("GPU energy left unattributed: {}", why.join("; ")));
    (shares, why)
}
