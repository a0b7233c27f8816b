//! Every process on macOS, for energy per program: `sysinfo`'s process table (pid, parent,
//! name, command line, start time, CPU time) and, where the kernel counts it and lets this
//! process read it, each process's own energy ([`super::rusage`]).
//!
//! Times are given in clock ticks of 100 a second, as on Linux: a process's CPU time in ms / 10;
//! start times from the Unix epoch. The CPUs' busy and total ticks are accumulated from
//! `sysinfo`'s utilisation between reads × the wall time × the CPU count (macOS keeps its
//! per-CPU tick counters behind Mach calls that libc only has deprecated).
//!
//! Energy is given for each process whose count can be read (all of them as root, on Apple
//! Silicon); one that cannot be read has none (unknown, not 0 J), and the engine shares by
//! energy only while those used little of the CPU time. Command lines are read at every read:
//! one seen between `fork` and `exec` would keep its shell's otherwise.

use super::rusage::read_rusage_v6;
use crate::error::Error;
use std::time::Instant;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System, UpdateKind};
use wattbar_core::programs::{ProcTimes, TableRead, MAX_ARGS};

pub struct MacTable {
    system: System,
    last: Option<Instant>,
    busy_ticks: f64,
    total_ticks: f64,
}

impl MacTable {
    pub fn new() -> Self {
        MacTable {
            system: System::new(),
            last: None,
            busy_ticks: 0.0,
            total_ticks: 0.0,
        }
    }

    pub fn read(&mut self) -> Result<TableRead, Error> {
        let now = Instant::now();
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| Error::Transient(format!("the clock is before 1970: {e}")))?;
        self.system.refresh_cpu_usage();
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing()
                .with_cpu()
                .with_cmd(UpdateKind::Always),
        );
        let cpus = self.system.cpus().len().max(1) as f64;
        if let Some(last) = self.last {
            let ticks = now.duration_since(last).as_secs_f64() * 100.0 * cpus;
            let busy = f64::from(self.system.global_cpu_usage()).clamp(0.0, 100.0) / 100.0;
            self.total_ticks += ticks;
            self.busy_ticks += ticks * busy;
        }
        self.last = Some(now);
        let mut procs: Vec<ProcTimes> = self
            .system
            .processes()
            .iter()
            .map(|(pid, p)| ProcTimes {
                pid: pid.as_u32(),
                ppid: p.parent().map_or(0, |pp| pp.as_u32()),
                name: p.name().to_string_lossy().into_owned(),
                ticks: p.accumulated_cpu_time() / 10,
                child_ticks: 0,
                start_ticks: p.start_time() * 100,
                cmd: p
                    .cmd()
                    .iter()
                    .take(MAX_ARGS)
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                energy_nj: None,
            })
            .collect();
        for p in &mut procs {
            // Another user's process without root, or one that just ended: unknown.
            p.energy_nj = read_rusage_v6(p.pid).ok().and_then(|r| r.energy_nj);
        }
        let counted = procs.iter().any(|p| p.energy_nj.is_some());
        Ok(TableRead {
            procs,
            now_ticks: unix.as_secs() * 100,
            busy_ticks: self.busy_ticks as u64,
            total_ticks: self.total_ticks as u64,
            energy_from: counted.then_some("the kernel's per-process energy (ri_energy_nj)"),
        })
    }
}

impl Default for MacTable {
    fn default() -> Self {
        Self::new()
    }
}
