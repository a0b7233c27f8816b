//! The energy of the command's own process tree (`attributed_joules`).
//!
//! Rule: the tree's CPU time is what this process's waited-for children used (`cutime + cstime`
//! of `/proc/self/stat`, read before and after the run: the command and every descendant it
//! waited for); its share of the busy time of all CPUs over the same span (`/proc/stat`) takes
//! that share of the CPU domain's energy less its idle part, the way energy per program is split
//! ([`wattbar_core::programs::split`]). Other domains have no per-process figure yet: they are
//! not attributed. Linux only; elsewhere the run says why.

use std::collections::BTreeMap;
use wattbar_core::inference::WindowEnergy;
use wattbar_core::programs::{split, Measured};
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

/// The tree's share of `window`'s CPU-domain energy.
pub fn attributed(ticks: Result<TreeTicks, String>, window: &WindowEnergy) -> Attributed {
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
    let cpu_idle = (total > 0.0).then(|| cpu * (total - busy).max(0.0) / total);
    let s = split(
        Measured {
            headline: window.joules.unwrap_or(cpu).max(cpu),
            cpu: Some(cpu),
            cpu_idle,
            busy_ticks: busy,
        },
        &[("command".to_string(), t.tree as f64)].into(),
    );
    Attributed {
        joules: [(
            "cpu".to_string(),
            s.programs.get("command").copied().unwrap_or(0.0),
        )]
        .into(),
        note: Some("only the CPU domain is attributed per process".into()),
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
            by_domain: vec![("cpu".into(), cpu)],
            mean_watts: None,
            samples: 2,
            covered_fraction: 1.0,
            quality: None,
            sources: Vec::new(),
        }
    }

    #[test]
    fn a_tree_busy_on_one_core_of_two_gets_its_share_of_the_cpus_active_energy() {
        // 2 s on 2 CPUs: 400 ticks, 250 busy, 200 of them the tree's. 120 J of CPU energy: the
        // idle part is 150/400 of it (45 J), the tree gets 200/250 of the other 75 J = 60 J.
        let t = TreeTicks {
            tree: 200,
            busy: 250,
            total: 400,
        };
        let a = attributed(Ok(t), &window(120.0));
        assert_eq!(a.joules.get("cpu"), Some(&60.0));
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
        let a = attributed(Ok(t), &w);
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
