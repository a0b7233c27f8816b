//! A RAPL counter that freezes under load: the real RAPL and `/proc/stat` readers on trees the
//! test writes each second (made-up values, not captures: the package counter starts at the
//! i7-8550U capture's first value and runs at 12 W; the CPU is fully busy throughout), through
//! the real chain.

use std::path::Path;
use std::time::Duration;
use wattbar_core::{Chain, Source, Stamp};
use wattbar_sources::cpu_proxy::{CpuPowerModel, TdpOrigin};
use wattbar_sources::linux::proc_stat::ProcStat;
use wattbar_sources::linux::rapl::Rapl;

/// `energy_uj` of the s-tui capture's first snapshot (tests/fixtures/linux/powercap/
/// s-tui-56-i7-8550u-x1c6/t0).
const START_UJ: u64 = 1_299_915_068;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The package counter at second `s`: 12 W (12,000,000 µJ a second), frozen from 40 s to 70 s.
fn package_uj(s: u64) -> u64 {
    START_UJ + 12_000_000 * (s.min(40) + s.saturating_sub(70))
}

/// `/proc/stat` at second `s` with 4 CPUs fully busy: 400 ticks a second, all of them user.
fn proc_stat(s: u64) -> String {
    let busy = 100_000 + 400 * s;
    format!("cpu  {busy} 0 0 50000 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\nintr 0\n")
}

#[test]
fn a_rapl_counter_frozen_for_30_s_under_load_is_stalled_within_10_s_and_falls_back_once() {
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let zone = root.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.path().join("proc")).unwrap_or_else(|e| panic!("{e}"));
    write(&zone.join("name"), "package-0\n");
    let model = CpuPowerModel::with_tdp(wattbar_core::Watts(15.0), TdpOrigin::Configured);
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(Rapl::new(root.path())),
        Box::new(ProcStat::new(root.path(), model)),
    ];
    let mut chain = Chain::new(sources);
    let mut headline_sources: Vec<(u64, String)> = Vec::new();
    let mut first_stalled = None;
    let (mut during, mut after) = (Vec::new(), Vec::new());
    for s in 0..100 {
        write(&zone.join("energy_uj"), &format!("{}\n", package_uj(s)));
        write(&root.path().join("proc/stat"), &proc_stat(s));
        let snap = chain.sample(Stamp::new(Duration::from_secs(s), 1.8e9 + s as f64));
        match s {
            50 => during = chain.status(&snap),
            99 => after = chain.status(&snap),
            _ => {}
        }
        if first_stalled.is_none() && !snap.stalled.is_empty() {
            first_stalled = Some((s, snap.stalled[0].clone()));
        }
        let source = snap
            .headline_parts
            .first()
            .map(|p| p.source.clone())
            .unwrap_or_default();
        if headline_sources
            .last()
            .is_none_or(|(_, last)| *last != source)
        {
            headline_sources.push((s, source));
        }
        if (46..70).contains(&s) {
            // Absent is not zero: the headline stands on the estimate, 15 W at full load.
            let w = snap.headline_watts().map_or(f64::NAN, |w| w.0);
            assert!((w - 15.0).abs() < 1e-9, "second {s}: {w} W");
        }
    }
    // The first read gives RAPL's baseline (no power yet): the estimate stands in for it.
    let changes: Vec<(u64, &str)> = headline_sources
        .iter()
        .map(|(s, id)| (*s, id.as_str()))
        .collect();
    assert_eq!(
        changes,
        vec![
            (0, "proc-stat"),
            (1, "rapl"),
            (45, "proc-stat"),
            (71, "rapl")
        ]
    );
    let (at, stalled) = first_stalled.unwrap_or_else(|| panic!("never stalled"));
    // Frozen from the read at 40 s: 5 s still, with the estimate of 15 W against 3 × 12 J.
    assert_eq!(at, 45);
    assert_eq!(stalled.source, "rapl");
    assert!((stalled.evidence_watts - 15.0).abs() < 1e-9, "{stalled:?}");
    assert_eq!(
        stalled.reason,
        "stalled: its energy counter has not moved for 5 s while the CPU's load says 15.0 W"
    );
    let reason = |status: &[wattbar_core::SourceStatus]| {
        status
            .iter()
            .find(|s| s.id == "rapl")
            .and_then(|s| s.reason.clone())
    };
    assert_eq!(
        reason(&during).as_deref(),
        Some("stalled: its energy counter has not moved for 10 s while the CPU's load says 15.0 W")
    );
    assert_eq!(reason(&after), None);
}

#[test]
fn an_idle_machines_counter_that_keeps_moving_is_never_stalled() {
    // The capture's own three reads (0.92 W at idle, 1.17 s apart) and an idle CPU: the
    // counter moves at every read, and the estimate is never read beside it.
    let captured = [1_299_915_068_u64, 1_300_994_228, 1_302_058_007];
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let zone = root.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.path().join("proc")).unwrap_or_else(|e| panic!("{e}"));
    write(&zone.join("name"), "package-0\n");
    write(&root.path().join("proc/stat"), &proc_stat(0));
    let model = CpuPowerModel::with_tdp(wattbar_core::Watts(15.0), TdpOrigin::Configured);
    let mut chain = Chain::new(vec![
        Box::new(Rapl::new(root.path())) as Box<dyn Source>,
        Box::new(ProcStat::new(root.path(), model)),
    ]);
    for (i, uj) in captured.iter().enumerate() {
        write(&zone.join("energy_uj"), &format!("{uj}\n"));
        let t = Duration::from_millis(1168 * i as u64);
        let snap = chain.sample(Stamp::new(t, 1.8e9));
        assert_eq!(snap.stalled, Vec::new());
        if i > 0 {
            assert!(
                snap.breakdown.iter().all(|r| r.source == "rapl"),
                "{:?}",
                snap.breakdown
            );
        }
    }
}
