//! CPU utilisation from `root/proc/stat`, as a CPU power estimate.
//!
//! busy = user + nice + system + irq + softirq + steal; total = busy + idle + iowait. `guest`
//! and `guest_nice` are already counted inside `user` and `nice`, so they are never added.
//! Utilisation is Δbusy / Δtotal between two reads (the first read uses the ticks since boot, so
//! the very first sample already has an estimate); the power comes from the CPU model
//! (`cpu_proxy::CpuPowerModel`), quality `estimated`, and each reading carries the estimated
//! energy since the source started ([`EstimateCounter`]): CPU time is a counter, so the estimate
//! over a slow pace is the sum of the estimates over a fast one.
//!
//! Cost: the source keeps the file open and reads its first 4 KiB at offset 0 each time (one
//! `pread`, which makes the kernel write the file afresh), since the aggregate line comes first.
//! Opening it every second cost an open, a stat, a close and a dozen reads of a growing buffer.

use crate::cpu_proxy::{CpuPowerModel, EstimateCounter};
use crate::error::Error;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use wattbar_core::{Domain, Quality, Reading, Source, Stamp};

pub const SOURCE_ID: &str = "proc-stat";

/// Ticks of the aggregate `cpu` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub busy: u64,
    pub total: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Result<CpuTicks, Error> {
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with("cpu "))
        .ok_or_else(|| Error::Parse {
            what: "/proc/stat",
            line: None,
            message: "no aggregate `cpu` line".into(),
        })?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Parse {
            what: "/proc/stat",
            line: Some(n + 1),
            message: e.to_string(),
        })?;
    if fields.len() < 4 {
        return Err(Error::Parse {
            what: "/proc/stat",
            line: Some(n + 1),
            message: format!("{} columns, need at least 4", fields.len()),
        });
    }
    let f = |i: usize| fields.get(i).copied().unwrap_or(0);
    let (user, nice, system, idle, iowait, irq, softirq, steal) =
        (f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7));
    let busy = user + nice + system + irq + softirq + steal;
    Ok(CpuTicks {
        busy,
        total: busy + idle + iowait,
    })
}

/// Share of time busy between two reads, 0..1; `None` when no time passed or counters went back.
pub fn utilisation(prev: CpuTicks, cur: CpuTicks) -> Option<f64> {
    let total = cur.total.checked_sub(prev.total)?;
    let busy = cur.busy.checked_sub(prev.busy)?;
    (total > 0).then(|| busy as f64 / total as f64)
}

/// How much of `/proc/stat` is read: the aggregate `cpu` line is its first.
const HEAD_BYTES: usize = 4096;

pub struct ProcStat {
    /// `root/proc/stat`.
    path: PathBuf,
    model: CpuPowerModel,
    prev: Option<CpuTicks>,
    /// `root/proc/stat`, open while reads succeed.
    file: Option<File>,
    buf: Vec<u8>,
    counted: EstimateCounter,
}

impl ProcStat {
    pub fn new(root: &Path, model: CpuPowerModel) -> Self {
        ProcStat {
            path: root.join("proc/stat"),
            model,
            prev: None,
            file: None,
            buf: vec![0; HEAD_BYTES],
            counted: EstimateCounter::default(),
        }
    }

    /// Reads `root/proc/stat` afresh (`probe` compares two roots).
    pub fn read_root(&mut self, root: &Path, at: Stamp) -> Result<Vec<Reading>, Error> {
        let path = root.join("proc/stat");
        let text = super::sysfs::read_proc_text(&path)
            .map_err(|e| Error::Unavailable(format!("{}: {e}", path.display())))?;
        self.estimate(parse_proc_stat(&text)?, at)
    }

    /// The ticks in the head of the kept-open `/proc/stat`, parsed in place (its whole lines).
    fn read_head(&mut self) -> Result<CpuTicks, Error> {
        if self.file.is_none() {
            let file = File::open(&self.path)
                .map_err(|e| Error::Unavailable(format!("{}: {e}", self.path.display())))?;
            self.file = Some(file);
        }
        let read = match &self.file {
            Some(file) => file.read_at(&mut self.buf, 0),
            None => {
                return Err(Error::Transient(format!(
                    "{} is not open",
                    self.path.display()
                )))
            }
        };
        let n = read.map_err(|e| {
            self.file = None;
            Error::Transient(format!("{}: {e}", self.path.display()))
        })?;
        let head = &self.buf[..n];
        let whole = head
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(head, |end| &head[..end]);
        parse_proc_stat(&String::from_utf8_lossy(whole))
    }

    fn estimate(&mut self, cur: CpuTicks, at: Stamp) -> Result<Vec<Reading>, Error> {
        let prev = self.prev.replace(cur).unwrap_or_default();
        let Some(u) = utilisation(prev, cur) else {
            return Err(Error::Transient(
                "no CPU time passed since the last read".into(),
            ));
        };
        Ok(vec![self.counted.count(Reading::power(
            Domain::Cpu,
            self.model.power_at(u),
            SOURCE_ID,
            Quality::Estimated,
            at,
        ))])
    }
}

impl Source for ProcStat {
    fn id(&self) -> &str {
        SOURCE_ID
    }
    fn quality(&self) -> Quality {
        Quality::Estimated
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let cur = self.read_head()?;
        self.estimate(cur, at).map_err(Into::into)
    }
    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::Cpu])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_time_is_not_added_again() {
        // user 100 includes guest 40: busy = 100 + 0 + 10 = 110, total = 110 + 880 + 10.
        let t =
            parse_proc_stat("cpu  100 0 10 880 10 0 0 0 40 0\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t,
            CpuTicks {
                busy: 110,
                total: 1000
            }
        );
    }

    #[test]
    fn a_garbled_line_is_a_parse_error_with_its_line() {
        let err = parse_proc_stat("intr 5\ncpu  1 x 3 4\n")
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("line 2")));
        assert!(parse_proc_stat("cpu0 1 2 3 4\n").is_err());
    }

    #[test]
    fn counters_that_go_back_give_no_utilisation() {
        let a = CpuTicks {
            busy: 10,
            total: 100,
        };
        let b = CpuTicks { busy: 5, total: 50 };
        assert_eq!(utilisation(a, b), None);
        assert_eq!(utilisation(a, a), None);
    }

    /// `/proc/stat` under `root` after `busy` and `idle` ticks in all.
    fn write_ticks(root: &Path, busy: u64, idle: u64) {
        std::fs::create_dir_all(root.join("proc")).unwrap_or_else(|e| panic!("{e}"));
        let line = format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\nintr 1\n");
        std::fs::write(root.join("proc/stat"), line).unwrap_or_else(|e| panic!("{e}"));
    }

    fn counted(readings: Vec<Reading>) -> f64 {
        readings
            .first()
            .and_then(|r| r.energy_counter)
            .map_or(f64::NAN, |j| j.0)
    }

    #[test]
    fn five_reads_a_second_apart_count_what_one_read_after_five_seconds_does() {
        use std::time::Duration;
        use wattbar_core::units::Watts;
        // 4 CPUs at 100 ticks/s: 400 ticks a second, busy 40 %, 90 %, 10 %, 60 % and 20 %.
        // TDP 65 W (idle 6.5 W): 6.5 × 5 + 58.5 × (0.4 + 0.9 + 0.1 + 0.6 + 0.2) = 161.2 J.
        let model = crate::cpu_proxy::CpuPowerModel::with_tdp(
            Watts(65.0),
            crate::cpu_proxy::TdpOrigin::Configured,
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let at = |s: u64| Stamp::new(Duration::from_secs(s), 1.7e9 + s as f64);
        let (mut every_second, mut after_five) = (
            ProcStat::new(dir.path(), model),
            ProcStat::new(dir.path(), model),
        );
        let (mut busy, mut idle) = (1_000, 9_000);
        write_ticks(dir.path(), busy, idle);
        let first = counted(
            every_second
                .read_root(dir.path(), at(0))
                .unwrap_or_default(),
        );
        let start = counted(after_five.read_root(dir.path(), at(0)).unwrap_or_default());
        assert_eq!(
            (first, start),
            (0.0, 0.0),
            "the first read only starts the count"
        );
        let mut fast = 0.0;
        for (second, share) in [(1, 40), (2, 90), (3, 10), (4, 60), (5, 20)] {
            busy += 4 * share;
            idle += 400 - 4 * share;
            write_ticks(dir.path(), busy, idle);
            fast = counted(
                every_second
                    .read_root(dir.path(), at(second))
                    .unwrap_or_default(),
            );
        }
        let slow = counted(after_five.read_root(dir.path(), at(5)).unwrap_or_default());
        assert!((fast - 161.2).abs() < 1e-9, "{fast}");
        assert!((slow - 161.2).abs() < 1e-9, "{slow}");
    }

    #[test]
    fn an_hour_at_a_steady_load_counts_the_same_at_the_rest_pace_as_at_one_second() {
        use std::time::Duration;
        use wattbar_core::units::Watts;
        // 8 CPUs at 100 ticks/s (800 a second), busy 30 % with a ±10 % swing each second, for an
        // hour, read every second and every 5 s. TDP 65 W, idle 6.5 W: the mean load is 30 %
        // over the hour, so 3600 × (6.5 + 58.5 × 0.30) = 86,580 J either way.
        let model = crate::cpu_proxy::CpuPowerModel::with_tdp(
            Watts(65.0),
            crate::cpu_proxy::TdpOrigin::Configured,
        );
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let at = |s: u64| Stamp::new(Duration::from_secs(s), 1.7e9 + s as f64);
        let mut every_second = ProcStat::new(dir.path(), model);
        let mut at_rest = ProcStat::new(dir.path(), model);
        let (mut busy, mut idle) = (50_000, 450_000);
        write_ticks(dir.path(), busy, idle);
        let _ = every_second.read_root(dir.path(), at(0));
        let _ = at_rest.read_root(dir.path(), at(0));
        let (mut fast, mut slow) = (0.0, 0.0);
        for second in 1..=3600u64 {
            // 240 ticks busy of 800 on average: 160, 320, 160, 320, …
            let share = if second % 2 == 0 { 320 } else { 160 };
            busy += share;
            idle += 800 - share;
            write_ticks(dir.path(), busy, idle);
            fast = counted(
                every_second
                    .read_root(dir.path(), at(second))
                    .unwrap_or_default(),
            );
            if second % 5 == 0 {
                slow = counted(
                    at_rest
                        .read_root(dir.path(), at(second))
                        .unwrap_or_default(),
                );
            }
        }
        assert!((fast - 86_580.0).abs() < 1e-6, "{fast}");
        assert!((slow - fast).abs() < 1e-6, "{slow} against {fast}");
    }
}
