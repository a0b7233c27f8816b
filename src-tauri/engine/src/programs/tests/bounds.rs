//! What a program's figures are when nothing was measured, how many are kept, and Wattbar's own.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};
use wattbar_core::programs::{ProcTimes, TableRead};

#[test]
fn a_window_with_no_measured_power_gives_no_program_watts_and_says_why() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter = ProgramMeter::new(dir.path(), BTreeMap::new(), None);
    write_tree(dir.path(), 0);
    meter.read_if_due(Duration::ZERO, 0.0);
    for _ in 0..10 {
        meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
    }
    write_tree(dir.path(), 10);
    assert!(meter.read_if_due(Duration::from_secs(10), 10.0));
    assert_the_issues_split(meter.view(), 10);
    // The next 10 s no source read: the processes ran, but nobody knows what they drew.
    write_tree(dir.path(), 20);
    assert!(meter.read_if_due(Duration::from_secs(20), 20.0));
    let v = meter.view();
    assert!(
        v.programs
            .iter()
            .all(|p| p.watts.is_none() && p.gpu_watts.is_none()),
        "{v:?}"
    );
    assert_eq!((v.idle_watts, v.unattributed_watts), (None, None));
    assert!(
        v.unavailable
            .as_deref()
            .is_some_and(|w| w.contains("no power was measured")),
        "{v:?}"
    );
    // Their energy is what was measured: 10 s at 24 W for p10, none since.
    assert_eq!(
        v.programs
            .iter()
            .find(|p| p.program == "p10")
            .map(|p| p.joules),
        Some(240.0)
    );
    let top = v.top(10, Sort::Watts);
    assert!(top.programs.iter().all(|p| p.watts.is_none()), "{top:?}");
    // Measured again: the split is back and the reason gone.
    for _ in 0..10 {
        meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
    }
    write_tree(dir.path(), 30);
    assert!(meter.read_if_due(Duration::from_secs(30), 30.0));
    assert_the_issues_split(meter.view(), 30);
    assert_eq!(meter.view().unavailable, None);
}

/// Window `k`'s read: `server` (pid 10) uses 10 ticks a window all along, and program `p<k>`
/// starts and uses 10 ticks in window `k` only. All CPUs' ticks are busy.
fn churn(windows: u64) -> wattbar_sources::processes::ProcessTable {
    let proc = |pid: u32, name: String, ticks: u64, start_ticks: u64| ProcTimes {
        pid,
        ppid: 1,
        name,
        ticks,
        child_ticks: 0,
        start_ticks,
        cmd: Vec::new(),
        energy_nj: None,
    };
    let reads = (0..=windows)
        .map(|k| {
            let now_ticks = 100 + 1_000 * k;
            let mut procs = vec![proc(10, "server".into(), 10 * k, 5)];
            if k > 0 {
                let pid = 1_000 + u32::try_from(k).unwrap_or(0);
                procs.push(proc(pid, format!("p{k}"), 10, now_ticks - 1));
            }
            TableRead {
                procs,
                now_ticks,
                busy_ticks: 20 * k,
                total_ticks: 20 * k,
                energy_from: None,
            }
        })
        .collect();
    wattbar_sources::processes::ProcessTable::Replay(reads)
}

#[test]
fn programs_past_the_bound_are_kept_as_other_and_no_joule_or_series_goes_down() {
    // 150 windows of 10 s at 2 W (20 J): 10 J to `server`, 10 J to that window's new program.
    let windows = 150_u64;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter = ProgramMeter::with_table(dir.path(), churn(windows), BTreeMap::new(), None);
    meter.read_if_due(Duration::ZERO, 1_800_000_000.0);
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    for k in 1..=windows {
        meter.add(20.0, Some(20.0), 10.0, Some(Quality::Measured));
        let at = Duration::from_secs(10 * k);
        assert!(meter.read_if_due(at, 1_800_000_000.0 + 10.0 * k as f64));
        let v = meter.view();
        // Kept: at most the bound, beside `(other)` and the programs of this window.
        assert!(
            v.programs.len() <= MAX_PROGRAMS + 1,
            "{} at {k}",
            v.programs.len()
        );
        let sum: f64 = v.programs.iter().map(|p| p.joules).sum();
        assert!(
            (sum - 20.0 * k as f64).abs() < 1e-9,
            "{sum} J at window {k}"
        );
        let today: f64 = v.programs.iter().map(|p| p.today_joules).sum();
        assert!(
            (today - 20.0 * k as f64).abs() < 1e-9,
            "{today} J today at {k}"
        );
        let series: BTreeMap<String, f64> = v.metric_series().into_iter().collect();
        for (name, before) in &last {
            let now = series.get(name).copied().unwrap_or(f64::NAN);
            assert!(
                now >= *before || !series.contains_key(name),
                "{name}: {before} → {now}"
            );
        }
        assert!(series.len() <= MAX_PROGRAM_SERIES + 3, "{series:?}");
        last = series;
    }
    let v = meter.view();
    // The program of the last window is kept by name with its 10 J; the oldest are in (other).
    let joules = |name: &str| {
        v.programs
            .iter()
            .find(|p| p.program == name)
            .map(|p| p.joules)
    };
    assert_eq!(joules(&format!("p{windows}")), Some(10.0));
    assert_eq!(joules("server"), Some(10.0 * windows as f64));
    assert_eq!(joules("p1"), None);
    // 150 one-window programs, 62 or 63 of them kept by name: the rest, 10 J each, are (other).
    let named = v
        .programs
        .iter()
        .filter(|p| p.program.starts_with('p'))
        .count();
    assert_eq!(
        joules(OTHER),
        Some(10.0 * (windows as usize - named) as f64)
    );
}

static OWN_CPU_NANOS: AtomicU64 = AtomicU64::new(0);

fn own_cpu_time() -> Option<Duration> {
    Some(Duration::from_nanos(OWN_CPU_NANOS.load(Ordering::SeqCst)))
}

#[test]
fn wattbars_own_energy_counts_cpu_time_too_short_for_a_tick() {
    // The fake tree: 60 busy and 15 idle ticks a second, 60 W on the CPU domain, no idle draw
    // learnt yet: 12 W idle, 48 W active over 60 busy ticks a second, 0.8 J a tick. Wattbar
    // uses 20 ms of CPU time a 10 s window (two ticks' worth, never a whole tick in one read
    // of its own stat at 0.2 % of a core): 1.6 J a window.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter =
        ProgramMeter::new(dir.path(), BTreeMap::new(), None).with_own_cpu_time(own_cpu_time);
    write_tree(dir.path(), 0);
    meter.read_if_due(Duration::ZERO, 0.0);
    for w in 1..=3_u64 {
        for _ in 0..10 {
            meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
        }
        OWN_CPU_NANOS.fetch_add(20_000_000, Ordering::SeqCst);
        write_tree(dir.path(), 10 * w);
        assert!(meter.read_if_due(Duration::from_secs(10 * w), 10.0 * w as f64));
        let own = meter.view().self_joules;
        assert!(
            (own - 1.6 * w as f64).abs() < 1e-9,
            "{own} J after window {w}"
        );
    }
}
