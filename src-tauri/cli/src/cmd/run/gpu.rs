//! What the GPUs were doing during a run: utilisation (mean, max) and memory used (peak), per
//! device, read through NVML beside the power sources.
//!
//! Rules:
//! - Read on a thread of its own at the run's interval (no faster than 200 ms: NVML's
//!   utilisation is itself an average over its last sample period).
//! - A runtime-suspended NVIDIA GPU is not woken to be asked (see `wattbar_sources::nvidia`).
//! - No NVML, no GPU, or a GPU that does not report a value: `null`, with the reason, never 0.
//! - Each read also takes NVML's per-process samples since the last, and notes whether each
//!   process on a GPU descends from this one (the command's tree: `root/proc/[pid]/stat`'s
//!   parents, followed up once per process: pid and start time), for the tree's share of the
//!   GPUs' use ([`GpuWatch::tree_share`]). A sample counts at the time it was read: the first
//!   read inside a run may carry a little use from just before it.

use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_engine::unix_now;
use wattbar_sources::linux::procs::parse_pid_stat;
use wattbar_sources::nvidia::{self, Gpus, Memory, Utilisation};

const MIN_PERIOD: Duration = Duration::from_millis(200);

/// One reading of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    pub t: f64,
    pub index: u32,
    pub name: Option<String>,
    pub utilisation: Option<Utilisation>,
    pub memory: Option<Memory>,
}

/// One process's use of one GPU in one of NVML's per-process samples, read at `t`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessUse {
    pub t: f64,
    pub pid: u32,
    /// SM utilisation, percent.
    pub sm_percent: u32,
    /// Whether the process descends from this one.
    pub in_tree: bool,
}

/// The tree's and all processes' summed use of the GPUs from `from` to `to`.
pub fn tree_share(uses: &[ProcessUse], from: f64, to: f64) -> (f64, f64) {
    uses.iter()
        .filter(|u| u.t >= from && u.t <= to)
        .fold((0.0, 0.0), |(tree, all), u| {
            let sm = f64::from(u.sm_percent);
            (if u.in_tree { tree + sm } else { tree }, all + sm)
        })
}

/// When `pid` started (clock ticks since boot), where it can be read.
fn started_at(root: &Path, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(root.join(format!("proc/{pid}/stat"))).ok()?;
    parse_pid_stat(&text).ok().map(|p| p.start_ticks)
}

/// Whether `pid` descends from `ancestor`, by the parents in `root/proc/[pid]/stat`; false for a
/// process that cannot be read (it ended, or another PID namespace's).
pub fn descends_from(root: &Path, pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    // A chain longer than this is not a process tree worth following.
    for _ in 0..64 {
        let Ok(text) = std::fs::read_to_string(root.join(format!("proc/{at}/stat"))) else {
            return false;
        };
        match parse_pid_stat(&text) {
            Ok(p) if p.ppid == ancestor => return true,
            Ok(p) if p.ppid > 1 => at = p.ppid,
            _ => return false,
        }
    }
    false
}

/// One GPU over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFigure {
    pub index: u32,
    pub name: Option<String>,
    pub utilisation_mean_percent: Option<f64>,
    pub utilisation_max_percent: Option<u32>,
    pub memory_used_peak_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub samples: usize,
}

/// Per GPU, the samples from `from` to `to`.
pub fn figures(samples: &[GpuSample], from: f64, to: f64) -> Vec<GpuFigure> {
    let mut out: Vec<GpuFigure> = Vec::new();
    let mut sums: Vec<(u64, usize)> = Vec::new();
    for s in samples.iter().filter(|s| s.t >= from && s.t <= to) {
        let i = match out.iter().position(|g| g.index == s.index) {
            Some(i) => i,
            None => {
                out.push(GpuFigure {
                    index: s.index,
                    name: s.name.clone(),
                    utilisation_mean_percent: None,
                    utilisation_max_percent: None,
                    memory_used_peak_bytes: None,
                    memory_total_bytes: None,
                    samples: 0,
                });
                sums.push((0, 0));
                out.len() - 1
            }
        };
        let g = &mut out[i];
        g.samples += 1;
        if let Some(u) = s.utilisation {
            sums[i].0 += u64::from(u.gpu_percent);
            sums[i].1 += 1;
            g.utilisation_max_percent = Some(
                g.utilisation_max_percent
                    .map_or(u.gpu_percent, |m| m.max(u.gpu_percent)),
            );
        }
        if let Some(m) = s.memory {
            g.memory_used_peak_bytes = Some(
                g.memory_used_peak_bytes
                    .map_or(m.used_bytes, |p| p.max(m.used_bytes)),
            );
            g.memory_total_bytes = Some(m.total_bytes);
        }
    }
    for (g, (sum, n)) in out.iter_mut().zip(sums) {
        g.utilisation_mean_percent = (n > 0).then(|| sum as f64 / n as f64);
    }
    out.sort_by_key(|g| g.index);
    out
}

/// Reads every GPU once.
pub fn read_all<G: Gpus + ?Sized>(gpus: &G, t: f64) -> Result<Vec<GpuSample>, String> {
    let count = gpus.count().map_err(|e| e.to_string())?;
    if count == 0 {
        return Err("NVML reports no NVIDIA GPU".into());
    }
    Ok((0..count)
        .map(|index| GpuSample {
            t,
            index,
            name: gpus.name(index).ok().flatten(),
            utilisation: gpus.utilisation(index).ok().flatten(),
            memory: gpus.memory(index).ok().flatten(),
        })
        .collect())
}

/// The watcher: samples kept for the whole run, or why there are none.
pub struct GpuWatch {
    samples: Arc<Mutex<Vec<GpuSample>>>,
    uses: Arc<Mutex<Vec<ProcessUse>>>,
    why_not: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
}

impl GpuWatch {
    pub fn start(interval: Duration, root: &Path) -> GpuWatch {
        let watch = GpuWatch {
            samples: Arc::default(),
            uses: Arc::default(),
            why_not: Arc::new(Mutex::new(Some("not read yet".into()))),
            stop: Arc::default(),
        };
        let (samples, uses, why_not, stop) = (
            Arc::clone(&watch.samples),
            Arc::clone(&watch.uses),
            Arc::clone(&watch.why_not),
            Arc::clone(&watch.stop),
        );
        let root = root.to_path_buf();
        let period = interval.max(MIN_PERIOD);
        let spawned = std::thread::Builder::new()
            .name("wattbar-run-gpu".into())
            .spawn(move || {
                let set_why = |why: String| {
                    *why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                };
                let mut gpus = None;
                let mut seen: HashMap<u32, u64> = HashMap::new();
                let mut in_tree: HashMap<(u32, u64), bool> = HashMap::new();
                let me = std::process::id();
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = nvidia::check_runtime_pm(&root) {
                        set_why(e.to_string());
                    } else {
                        if gpus.is_none() {
                            match nvidia::NvmlGpus::open() {
                                Ok(g) => gpus = Some(g),
                                Err(e) => {
                                    set_why(e.to_string());
                                    return;
                                }
                            }
                        }
                        if let Some(g) = &gpus {
                            let t = unix_now();
                            let count = g.count().unwrap_or(0);
                            let mut read_uses = Vec::new();
                            for index in 0..count {
                                let since = seen.get(&index).copied().unwrap_or(0);
                                let Ok(Some(got)) = g.process_samples(index, since) else {
                                    continue;
                                };
                                for s in got.iter().filter(|s| s.timestamp_us > since) {
                                    let newest = seen.entry(index).or_insert(0);
                                    *newest = (*newest).max(s.timestamp_us);
                                    // Keyed by start time too: a pid reused between
                                    // runs is another process.
                                    let ours = started_at(&root, s.pid).is_some_and(|start| {
                                        *in_tree
                                            .entry((s.pid, start))
                                            .or_insert_with(|| descends_from(&root, s.pid, me))
                                    });
                                    read_uses.push(ProcessUse {
                                        t,
                                        pid: s.pid,
                                        sm_percent: s.sm_percent,
                                        in_tree: ours,
                                    });
                                }
                            }
                            uses.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .extend(read_uses);
                            match read_all(g, t) {
                                Ok(read) => {
                                    samples
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .extend(read);
                                    *why_not.lock().unwrap_or_else(|e| e.into_inner()) = None;
                                }
                                Err(why) => set_why(why),
                            }
                        }
                    }
                    std::thread::sleep(period);
                }
            });
        if let Err(e) = spawned {
            *watch.why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
        }
        watch
    }

    /// The command tree's and all processes' summed use of the GPUs over the window; `None`
    /// where NVML gave no per-process use in it.
    pub fn tree_share(&self, from: f64, to: f64) -> Option<(f64, f64)> {
        let uses = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        Some(tree_share(&uses, from, to)).filter(|(_, all)| *all > 0.0)
    }

    /// Per GPU over the window, or why nothing is known.
    pub fn figures(&self, from: f64, to: f64) -> (Vec<GpuFigure>, Option<String>) {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let figures = figures(&samples, from, to);
        let why = if figures.is_empty() {
            self.why_not
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .or_else(|| Some("no GPU sample fell inside the run".into()))
        } else {
            None
        };
        (figures, why)
    }
}

impl Drop for GpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, index: u32, util: Option<u32>, used_gib: Option<u64>) -> GpuSample {
        GpuSample {
            t,
            index,
            name: Some("NVIDIA H100 80GB HBM3".into()),
            utilisation: util.map(|u| Utilisation {
                gpu_percent: u,
                memory_percent: u / 2,
            }),
            memory: used_gib.map(|g| Memory {
                used_bytes: g << 30,
                total_bytes: 80 << 30,
            }),
        }
    }

    #[test]
    fn the_trees_share_counts_only_its_own_processes_inside_the_run() {
        let u = |t: f64, pid: u32, sm: u32, in_tree: bool| ProcessUse {
            t,
            pid,
            sm_percent: sm,
            in_tree,
        };
        let uses = [
            u(9.0, 100, 99, true), // before the run
            u(10.0, 100, 60, true),
            u(10.0, 200, 20, false),
            u(11.0, 101, 30, true),
            u(11.0, 200, 10, false),
        ];
        assert_eq!(tree_share(&uses, 10.0, 11.0), (90.0, 120.0));
    }

    #[test]
    fn a_grandchild_descends_from_this_process_and_a_stranger_does_not() {
        let child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let root = Path::new("/");
        let me = std::process::id();
        // The grandchild: `sleep`, the shell's child, once the shell has started it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            let children = std::fs::read_to_string(format!(
                "/proc/{}/task/{}/children",
                child.id(),
                child.id()
            ))
            .unwrap_or_default();
            if let Some(pid) = children
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok())
            {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sh never started sleep"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(descends_from(root, grandchild, me));
        assert!(descends_from(root, child.id(), me));
        assert!(!descends_from(root, 1, me));
        assert!(!descends_from(root, me, child.id()));
        let _ = std::process::Command::new("kill")
            .arg(grandchild.to_string())
            .status();
        let mut child = child;
        let _ = child.wait();
    }

    #[test]
    fn per_gpu_the_mean_and_max_utilisation_and_the_peak_memory_inside_the_run() {
        let samples = [
            sample(9.0, 0, Some(100), Some(79)), // before the run
            sample(10.0, 0, Some(20), Some(10)),
            sample(10.0, 1, None, Some(1)),
            sample(11.0, 0, Some(90), Some(40)),
            sample(11.0, 1, None, Some(2)),
            sample(12.0, 0, Some(70), Some(30)),
        ];
        let f = figures(&samples, 10.0, 12.0);
        assert_eq!(f.len(), 2);
        // GPU 0: (20 + 90 + 70) / 3 = 60 %, max 90 %, peak 40 GiB (79 GiB was before the run).
        assert_eq!(f[0].utilisation_mean_percent, Some(60.0));
        assert_eq!(f[0].utilisation_max_percent, Some(90));
        assert_eq!(f[0].memory_used_peak_bytes, Some(40 << 30));
        // GPU 1 reports no utilisation (MIG): absent, not 0 %.
        assert_eq!(f[1].utilisation_mean_percent, None);
        assert_eq!(f[1].utilisation_max_percent, None);
        assert_eq!(f[1].memory_used_peak_bytes, Some(2 << 30));
    }
}
