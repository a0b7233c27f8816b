//! The energy of the command's own process tree (`attributed_joules`).
//!
//! Rule: the tree's CPU time is what this process's waited-for children used (`cutime + cstime`
//! of `/proc/self/stat`, read before and after the run: the command and every descendant it
//! waited for); its share of the busy time of all CPUs over the same span (`/proc/stat`) takes
//! that share of the CPU domain's energy less its idle part, with the model energy per program is
//! split with ([`wattbar_core::programs::split`]), so `run` and `top` agree on one process. The
//! idle part is the CPU domain's baseline draw (`--idle`) over the run; without a baseline, the
//! CPUs' idle share of their time, as the engine does until it has learnt an idle draw. The GPU domain's energy goes to the tree by its share of
//! the GPUs' use in NVML's per-process samples over the run ([`super::gpu`]). Other domains have
//! no per-process figure: they are not attributed. Linux only; elsewhere the run says why.

use std::collections::BTreeMap;
use wattbar_core::inference::WindowEnergy;
use wattbar_core::programs::{split, IdleModel, Measured};
use wattbar_sources::linux::proc_stat::{parse_proc_stat, CpuTicks};
use wattbar_sources::linux::procs::parse_pid_stat;

/// The counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct TreeClock {
    child_ticks: u64,
    cpu: CpuTicks,
}

/// The tree's ticks and all CPUs' over a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeTicks {
    pub tree: u64,
    pub busy: u64,
    pub total: u64,
}

/// What the tree was given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributed {
    /// Joules per domain.
    pub joules: BTreeMap<String, f64>,
    /// What was left out, or why nothing was attributed.
    pub note: Option<String>,
}

pub fn read() -> Result<TreeClock, String> {
    let own =
        std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    Ok(TreeClock {
        child_ticks: parse_pid_stat(&own).map_err(|e| e.to_string())?.child_ticks,
        cpu: parse_proc_stat(&stat).map_err(|e| e.to_string())?,
    })
}

pub fn between(before: &TreeClock, after: &TreeClock) -> TreeTicks {
    TreeTicks {
        tree: after.child_ticks.saturating_sub(before.child_ticks),
        busy: after.cpu.busy.saturating_sub(before.cpu.busy),
        total: after.cpu.total.saturating_sub(before.cpu.total),
    }
}

/// The tree's share of `window`'s CPU-domain energy less `cpu_idle_watts` (the CPU domain's
/// baseline draw) over it and, with `gpu_use` (the tree's and all processes' use of the GPUs over
/// the run), of its GPU-domain energy.
pub fn attributed(
    ticks: Result<TreeTicks, String>,
    gpu_use: Option<(f64, f64)>,
    window: &WindowEnergy,
    cpu_idle_watts: Option<f64>,
) -> Attributed {
    let mut out = cpu_attributed(ticks, window, cpu_idle_watts);
    let Some(gpu) = window
        .by_domain
        .iter()
        .find(|(d, _)| d == "gpu")
        .map(|(_, j)| *j)
    else {
        return out;
    };
    let why_not = match gpu_use {
        Some((tree, all)) if all > 0.0 => {
            out.joules
                .insert("gpu".into(), gpu * (tree / all).clamp(0.0, 1.0));
            None
        }
        _ => Some("the GPUs gave no per-process use over the run: their energy is not attributed"),
    };
    let notes: Vec<String> = out
        .note
        .take()
        .into_iter()
        .chain(why_not.map(String::from))
        .collect();
    out.note = (!notes.is_empty()).then(|| notes.join("; "));
    out
}

fn cpu_attributed(
    ticks: Result<TreeTicks, String>,
    window: &WindowEnergy,
    cpu_idle_watts: Option<f64>,
) -> Attributed {
    let t = match ticks {
        Ok(t) => t,
        Err(why) => {
            return Attributed {
                note: Some(format!("the command's CPU time could not be read: {why}")),
                ..Attributed::default()
            }
        }
    };
    let Some(cpu) = window
        .by_domain
        .iter()
        .find(|(d, _)| d == "cpu")
        .map(|(_, j)| *j)
    else {
        return Attributed {
            note: Some("no CPU energy was measured apart: nothing is attributed".into()),
            ..Attributed::default()
        };
    };
    let (busy, total) = (t.busy as f64, t.total as f64);
    let (idle, note) = match cpu_idle_watts {
        Some(watts) => (
            IdleModel::Draw {
                watts,
                // The energy is of the measured part of the run.
                seconds: (window.to - window.from) * window.covered_fraction,
            },
            None,
        ),
        None => (
            IdleModel::IdleTime {
                busy_ticks: busy,
                total_ticks: total,
            },
            Some(
                "no idle baseline of the CPU domain: its idle part is the CPUs' idle share of \
                 their time, which leaves a command on few of many cores less than it added"
                    .to_string(),
            ),
        ),
    };
    let s = split(
        Measured {
            headline: window.joules.unwrap_or(cpu).max(cpu),
            cpu: Some(cpu),
            busy_ticks: busy,
        },
        &[("command".to_string(), t.tree as f64)].into(),
        idle,
    );
    Attributed {
        joules: [(
            "cpu".to_string(),
            s.programs.get("command").copied().unwrap_or(0.0),
        )]
        .into(),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(cpu: f64) -> WindowEnergy {
        WindowEnergy {
            from: 0.0,
            to: 2.0,
            joules: Some(cpu + 20.0),
            bound_joules: None,
            by_domain: vec![("cpu".into(), cpu)],
            mean_watts: None,
            samples: 2,
            covered_fraction: 1.0,
            quality: None,
            sources: Vec::new(),
            coverage: None,
        }
    }

    #[test]
    fn a_tree_busy_on_one_core_of_two_gets_its_share_of_the_cpus_active_energy() {
        // 2 s on 2 CPUs: 400 ticks, 250 busy, 200 of them the tree's. 120 J of CPU energy and no
        // baseline: the idle part is 150/400 of it (45 J), the tree gets 200/250 of the other
        // 75 J = 60 J, and the run says how the idle part was taken.
        let t = TreeTicks {
            tree: 200,
            busy: 250,
            total: 400,
        };
        let a = attributed(Ok(t), None, &window(120.0), None);
        assert_eq!(a.joules.get("cpu"), Some(&60.0));
        assert!(a.note.is_some_and(|n| n.contains("no idle baseline")));
    }

    #[test]
    fn a_one_thread_command_on_sixteen_cores_gets_what_it_added_over_the_baseline() {
        // 2 s on 16 CPUs: 3,200 ticks, 210 busy, 200 of them the tree's. The CPU domain drew
        // 120 J and 20 W at rest before the run (40 J over 2 s): the tree gets 200/210 of the
        // 80 J it added, 76.2 J. The idle share of time would have left it 200/210 × 120 ×
        // 210/3,200 = 7.5 J, a sixteenth of a core's worth.
        let t = TreeTicks {
            tree: 200,
            busy: 210,
            total: 3_200,
        };
        let a = attributed(Ok(t), None, &window(120.0), Some(20.0));
        let mine = a.joules.get("cpu").copied().unwrap_or(0.0);
        assert!((mine - 80.0 * 200.0 / 210.0).abs() < 1e-9, "{mine}");
        assert_eq!(a.note, None);
        // The engine splits a window among programs with the same model: with its idle draw
        // learnt at 20 W, a program with the tree's ticks gets the same joules.
        let programs = [("loop".to_string(), 200.0)].into();
        let m = Measured {
            headline: 140.0,
            cpu: Some(120.0),
            busy_ticks: 210.0,
        };
        let engine = wattbar_core::programs::split_with_gpus(
            m,
            &programs,
            IdleModel::Draw {
                watts: 20.0,
                seconds: 2.0,
            },
            &[],
        );
        assert_eq!(engine.programs.get("loop"), Some(&mine));
    }

    #[test]
    fn the_gpus_energy_goes_to_the_tree_by_its_share_of_their_use() {
        // 2 s, 300 J on the GPU; the tree's processes used 90 of the 120 SM-percent samples
        // NVML gave: three quarters, 225 J.
        let mut w = window(120.0);
        w.by_domain.push(("gpu".into(), 300.0));
        let t = TreeTicks {
            tree: 200,
            busy: 250,
            total: 400,
        };
        let a = attributed(Ok(t), Some((90.0, 120.0)), &w, None);
        assert_eq!(a.joules.get("gpu"), Some(&225.0));
        assert_eq!(a.joules.get("cpu"), Some(&60.0));
        assert!(a.note.is_some_and(|n| !n.contains("GPU")));
        // No per-process use: the GPU is not attributed, and the run says why.
        let a = attributed(Ok(t), None, &w, None);
        assert_eq!(a.joules.get("gpu"), None);
        assert!(a.note.is_some_and(|n| n.contains("no per-process use")));
    }

    #[test]
    fn without_a_cpu_domain_nothing_is_attributed_and_the_run_says_why() {
        let mut w = window(0.0);
        w.by_domain.clear();
        let t = TreeTicks {
            tree: 10,
            busy: 10,
            total: 20,
        };
        let a = attributed(Ok(t), None, &w, None);
        assert!(a.joules.is_empty());
        assert!(a.note.is_some_and(|n| n.contains("no CPU energy")));
    }

    #[test]
    fn a_child_waited_for_adds_its_cpu_time_to_the_tree() {
        let before = read().unwrap_or_else(|e| panic!("{e}"));
        // Busy for half a second of wall time: tens of ticks on any machine, at least one on
        // a loaded one.
        let status = std::process::Command::new("python3")
            .args([
                "-c",
                "import time\nend = time.monotonic() + 0.5\nwhile time.monotonic() < end: pass",
            ])
            .status()
            .unwrap_or_else(|e| panic!("python3: {e}"));
        assert!(status.success());
        let t = between(&before, &read().unwrap_or_else(|e| panic!("{e}")));
        assert!(
            t.tree >= 1 && t.tree <= t.busy && t.busy <= t.total,
            "{t:?}"
        );
    }
}
