//! Which program draws the watts: each sampling interval's energy split among programs, so that
//! the parts add up exactly to the headline.
//!
//! Rules:
//! - A process is known by its pid *and* start time: a pid reused by a new process is another
//!   process, never merged with the old one.
//! - A process's CPU time over an interval is the growth of its own time plus the growth of its
//!   waited-for children's time, less what those children had when last seen. So the part of a
//!   child's life no read saw (it ended between two reads) lands on its parent, and nothing is
//!   counted twice, whichever living ancestor it was waited into (a child and its parent may both
//!   end between two reads). A process that started after the previous read counts all of its
//!   time: one
//!   alive for a single interval counts. Times are cumulative, so a process read late still gets
//!   its exact share of the window.
//! - Energy ([`split`]): the CPU domain's energy less its idle part ([`IdleModel`]: the domain's
//!   idle draw × the interval where known, at most the domain's energy) is the active part,
//!   shared by each program's share of the busy ticks of all CPUs. The engine (per program) and
//!   `wattbar-cli run` (per command) split with this one model, so they agree on one process. Busy ticks no process accounts for (kernel threads, a
//!   process that ended unseen with no parent waiting) leave their part unattributed; processes
//!   that add up to more than the busy ticks (reads a few milliseconds apart) are scaled down to
//!   them. What the CPU domain does not cover of the headline is unattributed too.
//! - A GPU's energy over the interval goes to the programs that used it, by their share of its
//!   use ([`GpuShare`]: NVML's per-process utilisation samples); a GPU no readable process used
//!   stays unattributed. The GPUs together get at most what the CPU domain leaves of the
//!   headline.
//! - Invariant: Σ programs + idle + unattributed = the headline's energy.
//!
//! Times are clock ticks (`USER_HZ`); the caller says which program each process belongs to.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One process as one read saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcTimes {
    pub pid: u32,
    pub ppid: u32,
    /// The command name (`comm`).
    pub name: String,
    /// Its own CPU time (user + system).
    pub ticks: u64,
    /// CPU time of its children that ended and were waited for.
    pub child_ticks: u64,
    /// When it started, ticks since boot.
    pub start_ticks: u64,
    /// The first arguments of its command line, `argv[0]` first ([`MAX_ARGS`] at most); empty
    /// where not readable (the kernel's threads, a process that ended).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<String>,
    /// The energy the kernel counted for it, nJ, where it counts one (macOS on Apple Silicon:
    /// `ri_energy_nj`); its own, not its children's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_nj: Option<u64>,
}

/// Command-line arguments kept per process: enough for `python3 -u -m module`.
pub const MAX_ARGS: usize = 4;

/// Clock ticks a second per CPU, in which [`TableRead`] counts (Linux's `USER_HZ`).
pub const TICKS_PER_SECOND: f64 = 100.0;

/// One read of every process, with the moment of the read and all CPUs' time so far, in clock
/// ticks ([`TICKS_PER_SECOND`] per CPU).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableRead {
    pub procs: Vec<ProcTimes>,
    /// Ticks since the processes' start times count from (boot on Linux), at this read.
    pub now_ticks: u64,
    pub busy_ticks: u64,
    pub total_ticks: u64,
    /// What the processes' `energy_nj` is, where they have one.
    pub energy_from: Option<&'static str>,
}

type Key = (u32, u64);

fn key(p: &ProcTimes) -> Key {
    (p.pid, p.start_ticks)
}

/// Each process's CPU time between two reads.
#[derive(Debug, Default)]
pub struct CpuTimes {
    last: BTreeMap<Key, ProcTimes>,
    /// Ticks since boot at the last read.
    last_at: Option<u64>,
}

/// One process's CPU ticks over an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Used {
    pub pid: u32,
    /// Its parent, as the process table gave it.
    pub ppid: u32,
    pub start_ticks: u64,
    pub name: String,
    /// The program it belongs to ([`programs_of`]).
    pub program: String,
    pub ticks: f64,
    /// The energy the kernel counted for it over the interval, nJ, where it counts one.
    pub energy_nj: Option<f64>,
}

/// The program a process is on its own: `kernel` for the kernel's own threads (pid 2,
/// `kthreadd`, and its children), whose names change with their work; the module a Python
/// interpreter runs (`python3 -m llama_cpp.server` is `llama_cpp.server`); else its command name.
pub fn program_of(p: &ProcTimes) -> String {
    if p.pid == 2 || p.ppid == 2 {
        return "kernel".to_string();
    }
    python_module(&p.cmd).unwrap_or_else(|| p.name.clone())
}

/// `X` of `python… [-flags] -m X …`.
fn python_module(cmd: &[String]) -> Option<String> {
    let interpreter = cmd.first()?.rsplit('/').next()?;
    if !interpreter.starts_with("python") {
        return None;
    }
    let mut args = cmd.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-m" => return args.next().filter(|m| !m.is_empty()).cloned(),
            "-c" => return None,
            // Options that take the next argument as their value.
            "-X" | "-W" | "-Q" => {
                args.next();
            }
            attached if attached.starts_with("-m") => return Some(attached[2..].to_string()),
            flag if flag.starts_with('-') => {}
            _ => return None,
        }
    }
    None
}

/// The program of each process: a process started from the same executable as its parent
/// (`argv[0]` alike) is part of its parent's program, so a browser's content processes and a
/// server's workers are the program the person started ([`program_of`] of the topmost).
/// Grouping goes by executable, not by systemd scope: a terminal's or an editor's scope also
/// holds whatever is run from it, and that is a program of its own.
pub fn programs_of<'a>(
    procs: impl IntoIterator<Item = &'a ProcTimes>,
) -> BTreeMap<(u32, u64), String> {
    let by_pid: BTreeMap<u32, &ProcTimes> = procs.into_iter().map(|p| (p.pid, p)).collect();
    by_pid
        .values()
        .map(|p| {
            let mut top = *p;
            // A chain longer than this is not a process tree worth following.
            for _ in 0..64 {
                match by_pid.get(&top.ppid).filter(|up| {
                    up.start_ticks <= top.start_ticks
                        && !top.cmd.is_empty()
                        && up.cmd.first() == top.cmd.first()
                        && up.pid != 2
                        && up.ppid != 2
                }) {
                    Some(up) => top = up,
                    None => break,
                }
            }
            (key(p), program_of(top))
        })
        .collect()
}

impl CpuTimes {
    /// The ticks each process used since the previous read; `None` at the first read (it is
    /// the baseline). `at`: ticks since boot at this read.
    pub fn step(&mut self, procs: Vec<ProcTimes>, at: u64) -> Option<Vec<Used>> {
        let now: BTreeMap<Key, ProcTimes> = procs.into_iter().map(|p| (key(&p), p)).collect();
        let out = self.last_at.map(|since| self.used(&now, since));
        self.last = now;
        self.last_at = Some(at);
        out
    }

    fn used(&self, now: &BTreeMap<Key, ProcTimes>, since: u64) -> Vec<Used> {
        // What the ended processes had when last seen, charged to their nearest living
        // ancestor: its children's time grows by their whole lives when it (or an ended
        // process between them) waits for them, and the part already seen must not count twice.
        let living: BTreeMap<u32, &ProcTimes> = now.values().map(|p| (p.pid, p)).collect();
        let ended: BTreeMap<u32, &ProcTimes> = self
            .last
            .iter()
            .filter(|(k, _)| !now.contains_key(k))
            .map(|(_, p)| (p.pid, p))
            .collect();
        let mut ended_children: BTreeMap<Key, u64> = BTreeMap::new();
        for gone in ended.values() {
            let (mut ppid, mut born) = (gone.ppid, gone.start_ticks);
            // A chain longer than this is not a process tree worth following.
            for _ in 0..64 {
                if let Some(parent) = living.get(&ppid).filter(|p| p.start_ticks <= born) {
                    *ended_children.entry(key(parent)).or_default() +=
                        gone.ticks + gone.child_ticks;
                    break;
                }
                match ended.get(&ppid).filter(|p| p.start_ticks <= born) {
                    Some(up) => (ppid, born) = (up.ppid, up.start_ticks),
                    None => break,
                }
            }
        }
        let programs = programs_of(now.values());
        now.iter()
            .filter_map(|(k, p)| {
                let energy_nj = match self.last.get(k) {
                    Some(before) => p
                        .energy_nj
                        .zip(before.energy_nj)
                        .map(|(now, then)| now.saturating_sub(then) as f64),
                    None => p.energy_nj.map(|e| e as f64),
                };
                let ticks = match self.last.get(k) {
                    Some(before) => {
                        let own = p.ticks.saturating_sub(before.ticks);
                        let children = p
                            .child_ticks
                            .saturating_sub(before.child_ticks)
                            .saturating_sub(ended_children.get(k).copied().unwrap_or(0));
                        own + children
                    }
                    None if p.start_ticks >= since => p.ticks + p.child_ticks,
                    None => return None,
                };
                Some(Used {
                    pid: p.pid,
                    ppid: p.ppid,
                    start_ticks: p.start_ticks,
                    name: p.name.clone(),
                    program: programs.get(k).cloned().unwrap_or_else(|| program_of(p)),
                    ticks: ticks as f64,
                    energy_nj,
                })
            })
            .collect()
    }
}

/// One interval's energy, split.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Joules per program.
    pub programs: BTreeMap<String, f64>,
    /// The part of each program's joules that came from GPUs.
    #[serde(default)]
    pub gpu: BTreeMap<String, f64>,
    /// The CPU domain's idle draw over the interval: no program's.
    pub idle: f64,
    /// What no program accounts for.
    pub unattributed: f64,
    /// The CPU domain's active joules one busy tick was given (0 where none was).
    #[serde(default)]
    pub per_tick: f64,
}

impl Split {
    pub fn total(&self) -> f64 {
        self.programs.values().sum::<f64>() + self.idle + self.unattributed
    }
}

/// What one interval measured, for [`split`].
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// The headline's energy, joules.
    pub headline: f64,
    /// The CPU domain's energy, where measured or estimated.
    pub cpu: Option<f64>,
    /// Busy ticks of all CPUs over the interval (`/proc/stat`).
    pub busy_ticks: f64,
}

/// The part of the CPU domain's energy over an interval that is its idle draw: no program's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IdleModel {
    /// The domain's idle draw is known (learnt from windows at rest, or measured as a baseline
    /// before a run): `watts` over the interval's `seconds`.
    Draw { watts: f64, seconds: f64 },
    /// Not known: the CPUs' idle share of their time (`1 − busy ÷ total` ticks). On many cores
    /// this leaves a one-thread program little of what it adds, so it is the fallback only.
    IdleTime { busy_ticks: f64, total_ticks: f64 },
    /// Nothing is idle.
    Nothing,
}

impl IdleModel {
    /// The idle part of `cpu` joules: never negative, never more than `cpu`.
    pub fn joules(self, cpu: f64) -> f64 {
        let idle = match self {
            IdleModel::Draw { watts, seconds } => watts * seconds,
            IdleModel::IdleTime {
                busy_ticks,
                total_ticks,
            } if total_ticks > 0.0 => cpu * (total_ticks - busy_ticks).max(0.0) / total_ticks,
            IdleModel::IdleTime { .. } | IdleModel::Nothing => 0.0,
        };
        if idle.is_finite() {
            idle.clamp(0.0, cpu.max(0.0))
        } else {
            0.0
        }
    }
}

/// Which process is on a device: a device's id as its source names it, with each process's use
/// of it over a window (NVML: the sum of its SM utilisation samples), for [`GpuShare`]; or why
/// the source cannot say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceUse {
    pub source: String,
    pub device: String,
    pub by_pid: BTreeMap<u32, f64>,
    /// Why no process has a share, where none has.
    pub none_because: Option<String>,
}

/// One GPU over an interval: its energy and its programs' use of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuShare {
    pub joules: f64,
    pub by_program: BTreeMap<String, f64>,
}

/// Splits an interval's energy among `programs` (their CPU ticks over it), the CPU domain's
/// idle part taken by `idle`.
pub fn split(m: Measured, programs: &BTreeMap<String, f64>, idle: IdleModel) -> Split {
    split_with_gpus(m, programs, idle, &[])
}

/// [`split`], with each GPU's energy shared by the programs that used it.
pub fn split_with_gpus(
    m: Measured,
    programs: &BTreeMap<String, f64>,
    idle: IdleModel,
    gpus: &[GpuShare],
) -> Split {
    let headline = m.headline.max(0.0);
    let cpu = m.cpu.unwrap_or(0.0).clamp(0.0, headline);
    let idle = idle.joules(cpu);
    let active = cpu - idle;
    let used: f64 = programs.values().filter(|t| **t > 0.0).sum();
    let scale = used.max(m.busy_ticks);
    let mut out = Split {
        idle,
        ..Split::default()
    };
    let mut given = 0.0;
    if scale > 0.0 && active > 0.0 {
        out.per_tick = active / scale;
        for (name, ticks) in programs.iter().filter(|(_, t)| **t > 0.0) {
            let joules = active * ticks / scale;
            given += joules;
            out.programs.insert(name.clone(), joules);
        }
    }
    let used_gpus: Vec<(&GpuShare, f64)> = gpus
        .iter()
        .map(|g| (g, g.by_program.values().filter(|u| **u > 0.0).sum::<f64>()))
        .filter(|(g, used)| *used > 0.0 && g.joules > 0.0)
        .collect();
    let gpu_joules: f64 = used_gpus.iter().map(|(g, _)| g.joules).sum();
    let room = headline - cpu;
    let scale = if gpu_joules > room && gpu_joules > 0.0 {
        room / gpu_joules
    } else {
        1.0
    };
    for (g, used) in used_gpus {
        for (name, u) in g.by_program.iter().filter(|(_, u)| **u > 0.0) {
            let joules = g.joules * scale * u / used;
            given += joules;
            *out.programs.entry(name.clone()).or_default() += joules;
            *out.gpu.entry(name.clone()).or_default() += joules;
        }
    }
    // The rest by subtraction, so the parts add up to the headline to the last bit.
    out.unattributed = (headline - idle - given).max(0.0);
    out
}

pub mod idle;
pub mod process_gpu;

#[cfg(test)]
mod tests;
