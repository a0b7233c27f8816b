//! The CPU proxy's power model against RAPL package power measured on four real CPUs under
//! stepped load (codecarbon's profiles, `tests/fixtures/linux/cpu-load-vs-rapl/`).

use std::path::PathBuf;
use wattbar_core::Watts;
use wattbar_sources::cpu_proxy::{CpuPowerModel, TdpOrigin};

struct Step {
    load: f64,
    rapl: f64,
}

fn steps(file: &str) -> Vec<Step> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux/cpu-load-vs-rapl")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name} column"))
    };
    let (load, rapl) = (col("cpu_load"), col("rapl_power"));
    lines
        // The first step's RAPL figure is a first-interval artifact (see SOURCES.md).
        .skip(1)
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            Step {
                load: cells[load].parse().unwrap_or(f64::NAN),
                rapl: cells[rapl].parse().unwrap_or(f64::NAN),
            }
        })
        .collect()
}

const CPUS: [(&str, f64); 4] = [
    ("codecarbon-epyc-8024p-all_cores.csv", 90.0),
    ("codecarbon-threadripper-1950x-all_cores.csv", 180.0),
    ("codecarbon-xeon-e3-1240v2-all_cores.csv", 69.0),
    ("codecarbon-xeon-e5-2620v3-all_cores.csv", 85.0),
];

#[test]
fn the_cpu_model_is_within_its_documented_error_of_rapl() {
    let mut errors = Vec::new();
    for (file, tdp) in CPUS {
        let model = CpuPowerModel::with_tdp(Watts(tdp), TdpOrigin::Configured);
        let rows = steps(file);
        assert_eq!(rows.len(), 10, "{file}");
        for s in rows {
            assert!(s.load.is_finite() && s.rapl.is_finite(), "{file}");
            let estimate = model.power_at(s.load / 100.0).0;
            errors.push((estimate - s.rapl).abs() / tdp);
        }
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let worst = errors.iter().cloned().fold(0.0, f64::max);
    // The bounds the cpu_proxy module documents (measured: mean 17.5 %, worst 49 % of TDP); a
    // better model passes, a worse one fails.
    assert!(mean <= 0.18, "mean error {mean}");
    assert!(worst <= 0.50, "worst error {worst}");
}

#[test]
fn the_cpu_model_rises_with_load_as_every_measured_cpu_does() {
    for (file, tdp) in CPUS {
        let model = CpuPowerModel::with_tdp(Watts(tdp), TdpOrigin::Configured);
        let rows = steps(file);
        let (low, high) = (&rows[0], &rows[rows.len() - 1]);
        assert!(high.rapl > low.rapl, "{file}");
        assert!(model.power_at(high.load / 100.0).0 > model.power_at(low.load / 100.0).0);
    }
}
