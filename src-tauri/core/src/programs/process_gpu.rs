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
}

impl ProcessGpuWindow {
    /// The window `from..to` whose GPUs drew `gpus` (joules by source and device), shared by
    /// `uses`.
    pub fn of(
        from: f64,
        to: f64,
        gpus: &BTreeMap<(String, String), f64>,
        uses: &[DeviceUse],
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
        ProcessGpuWindow {
            from,
            to,
            by_pid,
            all_joules,
        }
    }
}

/// A process's share of the GPUs' energy over a span.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessGpuShare {
    /// Of every process's GPU energy, 0–1.
    pub share: f64,
    /// The GPUs it drew on (`gpu:0`, …).
    pub covers: Vec<String>,
}

/// `pid`'s share of the GPUs' energy over `from..to` (Unix seconds), from `windows` (oldest
/// first); `None` where it drew on none there, or no window is near enough.
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
    let mut all = 0.0;
    for (w, part) in chosen {
        all += w.all_joules * part;
        for (gpu, joules) in w.by_pid.get(&pid).into_iter().flatten() {
            *mine.entry(gpu).or_default() += joules * part;
        }
    }
    let own: f64 = mine.values().sum();
    (all > 0.0 && own > 0.0).then(|| ProcessGpuShare {
        share: (own / all).clamp(0.0, 1.0),
        covers: mine.keys().map(|g| g.to_string()).collect(),
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
        let w = ProcessGpuWindow::of(0.0, 10.0, &gpus, &[uses("0", &[(100, 75.0), (200, 25.0)])]);
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
}
