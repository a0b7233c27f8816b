//! One process's share of the GPUs' energy over a span, for a model server's windows: from the
//! programs' windows, in which each GPU's energy is shared among the processes that used it.
//!
//! Rules:
//! - In a window, a process gets of each GPU `joules × its use ÷ every process's use` (the
//!   sources' per-process use: NVML's SM samples), as energy per program does. A GPU whose use
//!   per process is not known gives nobody anything, and counts in no share.
//! - Over a span, its share is its joules over every GPU's (those that tell no use per process,
//!   or that nobody used, included), from the windows that overlap the span, each in proportion
//!   to its overlap; where none overlaps it yet (the programs are
//!   read every 10 s, a minute at rest), the newest window that ended at most [`MAX_AGE_S`]
//!   before it. A process that drew on no GPU there has no share: unknown, never 0.
//! - A process's share is its process tree's: its own use and that of every process it started,
//!   at any depth (vLLM V1 runs the model in a child `EngineCore`, SGLang in scheduler
//!   children): the window keeps each process's ancestors, as the process table gave them when
//!   it was read.
//! - The span's GPU energy times that share is the process's, and covers only the GPUs it drew
//!   on (`gpu:0`, …): a quantity of its own, never added to the headline's.

use super::DeviceUse;
use std::collections::BTreeMap;

/// How long before a span the newest programs window may have ended and still give the
/// process's share, where no window overlaps the span: a read at rest's period.
pub const MAX_AGE_S: f64 = 60.0;

/// One programs window's GPU energy per process: pid → GPU (`gpu:0`) → joules, over `from..to`
/// (Unix seconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessGpuWindow {
    pub from: f64,
    pub to: f64,
    pub by_pid: BTreeMap<u32, BTreeMap<String, f64>>,
    /// Every GPU's energy in the window, whoever used it.
    pub all_joules: f64,
    /// Each pid of `by_pid`'s ancestors, its parent first; empty where not known.
    pub ancestors: BTreeMap<u32, Vec<u32>>,
}

/// The deepest chain of parents followed: a longer one is no process tree worth following.
const MAX_DEPTH: usize = 64;

/// `pid`'s ancestors by `parents` (pid → parent pid), its parent first, up to pid 1 (or 0).
fn ancestors_of(pid: u32, parents: &BTreeMap<u32, u32>) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut at = pid;
    while let Some(&parent) = parents.get(&at) {
        if parent <= 1 || chain.len() == MAX_DEPTH || chain.contains(&parent) {
            break;
        }
        chain.push(parent);
        at = parent;
    }
    chain
}

impl ProcessGpuWindow {
    /// The window `from..to` whose GPUs drew `gpus` (joules by source and device), shared by
    /// `uses`; `parents`: each process's parent pid, as the process table gave them.
    pub fn of(
        from: f64,
        to: f64,
        gpus: &BTreeMap<(String, String), f64>,
        uses: &[DeviceUse],
        parents: &BTreeMap<u32, u32>,
    ) -> ProcessGpuWindow {
        let mut by_pid: BTreeMap<u32, BTreeMap<String, f64>> = BTreeMap::new();
        let all_joules = gpus.values().filter(|j| j.is_finite() && **j > 0.0).sum();
        for ((source, device), joules) in gpus {
            let Some(u) = uses
                .iter()
                .find(|u| &u.source == source && &u.device == device)
            else {
                continue;
            };
            let used: f64 = u.by_pid.values().filter(|v| **v > 0.0).sum();
            if used <= 0.0 || !joules.is_finite() || *joules <= 0.0 {
                continue;
            }
            for (pid, v) in u.by_pid.iter().filter(|(_, v)| **v > 0.0) {
                *by_pid
                    .entry(*pid)
                    .or_default()
                    .entry(format!("gpu:{device}"))
                    .or_default() += joules * v / used;
            }
        }
        let ancestors = by_pid
            .keys()
            .map(|pid| (*pid, ancestors_of(*pid, parents)))
            .collect();
        ProcessGpuWindow {
            from,
            to,
            by_pid,
            all_joules,
            ancestors,
        }
    }

    /// The pids of `root`'s tree that drew on a GPU in the window: itself and its descendants.
    fn tree_of(&self, root: u32) -> impl Iterator<Item = (&u32, &BTreeMap<String, f64>)> {
        self.by_pid.iter().filter(move |(pid, _)| {
            **pid == root
                || self
                    .ancestors
                    .get(pid)
                    .is_some_and(|chain| chain.contains(&root))
        })
    }
}

/// A process's share of the GPUs' energy over a span.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessGpuShare {
    /// Of every process's GPU energy, 0–1.
    pub share: f64,
    /// The GPUs it drew on (`gpu:0`, …).
    pub covers: Vec<String>,
    /// The processes of its tree that drew on them: 1 for itself alone.
    pub processes: usize,
}

/// `pid`'s share, with its descendants', of the GPUs' energy over `from..to` (Unix seconds),
/// from `windows` (oldest first); `None` where its tree drew on none there, or no window is
/// near enough.
pub fn process_gpu_share(
    windows: &[ProcessGpuWindow],
    pid: u32,
    from: f64,
    to: f64,
) -> Option<ProcessGpuShare> {
    let overlap = |w: &ProcessGpuWindow| w.to.min(to) - w.from.max(from);
    let overlapping: Vec<(&ProcessGpuWindow, f64)> = windows
        .iter()
        .filter(|w| w.to > w.from && overlap(w) > 0.0)
        .map(|w| (w, overlap(w) / (w.to - w.from)))
        .collect();
    let chosen = if overlapping.is_empty() {
        windows
            .iter()
            .rev()
            .find(|w| w.to <= from && from - w.to <= MAX_AGE_S)
            .map(|w| vec![(w, 1.0)])?
    } else {
        overlapping
    };
    let mut mine: BTreeMap<&str, f64> = BTreeMap::new();
    let mut processes = std::collections::BTreeSet::new();
    let mut all = 0.0;
    for (w, part) in chosen {
        all += w.all_joules * part;
        for (p, gpus) in w.tree_of(pid) {
            processes.insert(*p);
            for (gpu, joules) in gpus {
                *mine.entry(gpu).or_default() += joules * part;
            }
        }
    }
    let own: f64 = mine.values().sum();
    (all > 0.0 && own > 0.0).then(|| ProcessGpuShare {
        share: (own / all).clamp(0.0, 1.0),
        covers: mine.keys().map(|g| g.to_string()).collect(),
        processes: processes.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(device: &str, by_pid: &[(u32, f64)]) -> DeviceUse {
        DeviceUse {
            source: "nvml".into(),
            device: device.into(),
            by_pid: by_pid.iter().copied().collect(),
            none_because: None,
        }
    }

    /// GPU 0 drew 3,000 J in a 10 s window, the server (pid 100) using 3 parts of its SM time
    /// to another process's 1: 2,250 J are the server's. GPU 1 (1,000 J) tells no use per
    /// process: nobody's.
    #[test]
    fn a_window_gives_each_process_its_share_of_each_gpu_it_used() {
        let gpus = BTreeMap::from([
            (("nvml".to_string(), "0".to_string()), 3000.0),
            (("nvml".to_string(), "1".to_string()), 1000.0),
        ]);
        let w = ProcessGpuWindow::of(
            0.0,
            10.0,
            &gpus,
            &[uses("0", &[(100, 75.0), (200, 25.0)])],
            &BTreeMap::new(),
        );
        assert_eq!(
            w.by_pid.get(&100),
            Some(&BTreeMap::from([("gpu:0".to_string(), 2250.0)]))
        );
        assert_eq!(
            w.by_pid.get(&200).and_then(|g| g.get("gpu:0")),
            Some(&750.0)
        );
        assert!(w.by_pid.values().all(|g| !g.contains_key("gpu:1")));
        // Over the window, the server's share is of both GPUs' 4,000 J: 2,250 J of it, 0.5625,
        // never 0.75 of GPU 1's energy too.
        let share = process_gpu_share(&[w], 100, 0.0, 10.0).map(|s| s.share);
        assert_eq!(share, Some(2250.0 / 4000.0));
    }

    /// The server (pid 100) drew 2,000 J of the GPUs' 4,000 J in the window 0–10 s, and all
    /// of the 1,000 J in 10–20 s. A span from 5 s to 15 s takes half of each window: 1,000 +
    /// 500 J of 2,000 + 500 J, a share of 0.6.
    #[test]
    fn a_span_takes_each_window_in_proportion_to_its_overlap() {
        let window = |from: f64, by_pid: &[(u32, f64)]| ProcessGpuWindow {
            from,
            to: from + 10.0,
            by_pid: by_pid
                .iter()
                .map(|(p, j)| (*p, BTreeMap::from([("gpu:0".to_string(), *j)])))
                .collect(),
            all_joules: by_pid.iter().map(|(_, j)| j).sum(),
            ancestors: BTreeMap::new(),
        };
        let windows = [
            window(0.0, &[(100, 2000.0), (200, 2000.0)]),
            window(10.0, &[(100, 1000.0)]),
        ];
        let s = process_gpu_share(&windows, 100, 5.0, 15.0);
        assert_eq!(
            s,
            Some(ProcessGpuShare {
                share: 0.6,
                covers: vec!["gpu:0".into()],
                processes: 1,
            })
        );
        // Another process drew on no GPU there: unknown, never a share of 0.
        assert_eq!(process_gpu_share(&windows, 300, 5.0, 15.0), None);
        // A span after the windows: the newest, 30 s before it, gives the whole share; one
        // past a minute, nothing.
        assert_eq!(
            process_gpu_share(&windows, 100, 50.0, 60.0).map(|s| s.share),
            Some(1.0)
        );
        assert_eq!(process_gpu_share(&windows, 100, 81.0, 91.0), None);
    }

    /// vLLM V1: the API server (pid 100, the one listening) does no GPU work; its child
    /// EngineCore (pid 101) drew 2,700 J of GPU 0's 3,000 J, a worker of the child (pid 102)
    /// 100 J more; another program (pid 200) the rest. The server's tree has 2,800 J: 0.933,
    /// never "no share" nor the whole GPU.
    #[test]
    fn a_server_whose_gpu_work_runs_in_child_processes_has_their_share() {
        let gpus = BTreeMap::from([(("nvml".to_string(), "0".to_string()), 3000.0)]);
        let parents = BTreeMap::from([(100, 1), (101, 100), (102, 101), (200, 1)]);
        let w = ProcessGpuWindow::of(
            0.0,
            10.0,
            &gpus,
            &[uses(
                "0",
                &[(101, 90.0), (102, 10.0 / 3.0), (200, 20.0 / 3.0)],
            )],
            &parents,
        );
        let s = process_gpu_share(std::slice::from_ref(&w), 100, 0.0, 10.0)
            .unwrap_or_else(|| panic!("no share"));
        assert!((s.share - 2800.0 / 3000.0).abs() < 1e-9, "{s:?}");
        assert_eq!(
            (s.processes, s.covers.clone()),
            (2, vec!["gpu:0".to_string()])
        );
        // The child alone is its own tree; the other program is not in the server's.
        assert_eq!(
            process_gpu_share(std::slice::from_ref(&w), 101, 0.0, 10.0).map(|s| s.processes),
            Some(2)
        );
        let other = process_gpu_share(&[w], 200, 0.0, 10.0).map(|s| s.share);
        assert!(other.is_some_and(|o| (o - 200.0 / 3000.0).abs() < 1e-9));
    }
}
