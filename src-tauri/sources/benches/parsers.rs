//! Parser costs on real captures (a model server's `/metrics` among them), and one full tick of the Linux chain over a fake root that
//! holds a RAPL package, a discharging battery, an amdgpu and /proc/stat (all real captures).
//!
//! `cargo bench -p wattbar-sources --bench parsers`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::{Chain, Stamp, Watts};
use wattbar_sources::cpu_proxy::{CpuPowerModel, TdpOrigin};
use wattbar_sources::linux::{self, power_supply, proc_stat, rapl};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/linux")
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
    {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap_or_else(|e| panic!("{e}"));
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// A laptop-like root assembled from real captures.
fn fake_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for case in [
        "powercap/procfs-testdata-intel",
        "power_supply/thinkpad-lgc-lnv45n1-discharging",
        "hwmon/amd-rx7900xtx",
        "proc-stat/sysstat-8cpu/t0",
    ] {
        copy_tree(&fixtures().join(case), dir.path());
    }
    dir
}

fn parsers(c: &mut Criterion) {
    let stat =
        std::fs::read_to_string(fixtures().join("proc-stat/scaphandre-xeon-bisocket/proc/stat"))
            .unwrap_or_default();
    c.bench_function("parse /proc/stat (24 CPUs)", |b| {
        b.iter(|| proc_stat::parse_proc_stat(black_box(&stat)))
    });
    let uevent =
        std::fs::read_to_string(fixtures().join(
            "power_supply/thinkpad-lgc-lnv45n1-discharging/sys/class/power_supply/BAT0/uevent",
        ))
        .unwrap_or_default();
    c.bench_function("parse power_supply uevent", |b| {
        b.iter(|| power_supply::parse_uevent(black_box(&uevent)))
    });
    c.bench_function("parse energy_uj", |b| {
        b.iter(|| rapl::parse_uj(black_box("240422366267\n")))
    });

    let macos = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/macos");
    let read = |name: &str| std::fs::read_to_string(macos.join(name)).unwrap_or_default();
    let plist = read("ioreg-a-applesilicon-m4pro-battery-1.plist");
    c.bench_function("parse ioreg plist (AppleSmartBattery)", |b| {
        b.iter(|| wattbar_sources::macos::ioreg::parse_ioreg(black_box(&plist)))
    });
    let text = read("ioreg-applesilicon-charging-60w.txt");
    c.bench_function("parse ioreg text", |b| {
        b.iter(|| wattbar_sources::macos::ioreg::parse_ioreg(black_box(&text)))
    });
    let pm = read("powermetrics-mac16-5-tahoe.plist");
    c.bench_function("parse powermetrics plist record", |b| {
        b.iter(|| wattbar_sources::macos::powermetrics::parse_powermetrics(black_box(&pm)))
    });
    let pm_text = read("powermetrics-m1-air-monterey.txt");
    c.bench_function("parse powermetrics text (10 records)", |b| {
        b.iter(|| wattbar_sources::macos::powermetrics::parse_powermetrics(black_box(&pm_text)))
    });
    let batt = read("pmset-batt-discharging-48pct.txt");
    c.bench_function("parse pmset -g batt", |b| {
        b.iter(|| wattbar_sources::macos::pmset::parse_pmset_batt(black_box(&batt)))
    });
    let top = read("top-l2-stats-power.txt");
    c.bench_function("parse top -l 2", |b| {
        b.iter(|| wattbar_sources::macos::top::parse_top(black_box(&top)))
    });
    // Read in place: server-metrics captures are never copied into the repository.
    let vllm = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../../../shared/fixtures/server-metrics/vllm-v0-metrics-opt-125m-one-request-2024-06.txt",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    c.bench_function("parse a vLLM /metrics scrape (120 series)", |b| {
        b.iter(|| wattbar_sources::server_metrics::parse_server_metrics(black_box(&vllm)))
    });
    // Two data-parallel ranks, as vLLM V1 labels them: the capture's vLLM series once per
    // `engine` (a label added to the genuine lines, nothing else changed): 224 series, more than
    // the 200 the goal names.
    let ranks = two_ranks(&vllm);
    let series = ranks
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count();
    assert_eq!(series, 224, "the two-rank exposition has {series} series");
    c.bench_function("parse a vLLM /metrics scrape (224 series, 2 ranks)", |b| {
        b.iter(|| wattbar_sources::server_metrics::parse_server_metrics(black_box(&ranks)))
    });

    let root = fake_root();
    let model = CpuPowerModel::with_tdp(Watts(15.0), TdpOrigin::Configured);
    let mut chain = Chain::new(linux::linux_sources(root.path(), model));
    let mut t = 0u64;
    c.bench_function(
        "full Linux tick (rapl + power_supply + hwmon + /proc/stat)",
        |b| {
            b.iter(|| {
                t += 1;
                let snap = chain.sample(Stamp::new(Duration::from_millis(t), t as f64 / 1000.0));
                assert!(snap.headline.is_some());
                snap
            })
        },
    );
}

criterion_group!(benches, parsers);
criterion_main!(benches);

/// `text`'s `vllm:` series once per rank `engine="0"` and `engine="1"`, its other lines once.
fn two_ranks(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if !line.starts_with("vllm:") {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        for engine in ["0", "1"] {
            let ranked = match line.split_once('{') {
                Some((name, rest)) => format!("{name}{{engine=\"{engine}\",{rest}"),
                None => match line.split_once(' ') {
                    Some((name, value)) => format!("{name}{{engine=\"{engine}\"}} {value}"),
                    None => line.to_string(),
                },
            };
            out.push_str(&ranked);
            out.push('\n');
        }
    }
    out
}
