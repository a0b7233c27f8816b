//! `wattbar-cli calibrate --from-csv`: a recorded trace fitted with the engine's own maths.
//! The traces are made here from a known truth: the wall draws 1.6 W per watt of the parts over
//! a 25 W floor, with ±2 % noise on every second.

use crate::common::cli;

/// xorshift64: the same noise on every run.
struct Noise(u64);

impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `seconds` of the trace at 1 s: the parts step through 10–90 W, 90 s at each level.
fn trace(seconds: usize, levels: &[f64]) -> String {
    let mut noise = Noise(0x5eed_cafe);
    let mut csv = String::from("t,reference_watts,components_watts\n");
    for t in 0..seconds {
        let parts = levels[(t / 90) % levels.len()];
        let wall = (1.6 * parts + 25.0) * (1.0 + 0.04 * (noise.uniform() - 0.5));
        csv.push_str(&format!("{t},{wall:.3},{parts:.3}\n"));
    }
    csv
}

const SWEEP: [f64; 9] = [10.0, 50.0, 30.0, 90.0, 20.0, 70.0, 40.0, 80.0, 60.0];

fn calibrate(csv: &str, json: bool) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("trace.csv");
    std::fs::write(&file, csv).unwrap_or_else(|e| panic!("{e}"));
    let path = file.display().to_string();
    let mut args = vec!["calibrate", "--from-csv", path.as_str()];
    if json {
        args.push("--json");
    }
    cli(dir.path())
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_recorded_trace_gives_back_the_line_it_was_made_from() {
    // 30 minutes: 60 windows of 30 s across 10–90 W of parts.
    let out = calibrate(&trace(1800, &SWEEP), true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fit: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let get = |k: &str| fit[k].as_f64().unwrap_or(f64::NAN);
    assert!((get("slope") - 1.6).abs() <= 0.02 * 1.6, "{fit}");
    assert!((get("offset_watts") - 25.0).abs() <= 0.02 * 25.0, "{fit}");
    assert!(get("r2") > 0.99, "{fit}");
    assert!(get("heldout_mape") <= 0.03, "{fit}");
    assert_eq!(fit["windows"], 59, "{fit}");
    // The parts alone: 25 W + 0.6 × parts short of the wall, about half of it on this sweep.
    assert!(get("before_mape") > 0.3, "{fit}");

    let human = calibrate(&trace(1800, &SWEEP), false);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("the reference ≈ 2"), "{text}");
    assert!(text.contains("Held-out error"), "{text}");
}

#[test]
fn too_few_windows_a_flat_load_and_a_bad_row_exit_1_with_their_reason() {
    // 11 windows of 30 s: one short of the twelve a fit needs.
    let short = calibrate(&trace(345, &SWEEP[..4]), true);
    assert_eq!(short.status.code(), Some(1));
    let why = String::from_utf8_lossy(&short.stderr);
    assert!(
        why.contains("12 windows") && why.contains("11 so far"),
        "{why}"
    );
    assert!(short.stdout.is_empty());

    // The same 40 W for 20 minutes: no range to fit a line over.
    let flat = calibrate(&trace(1200, &[40.0]), true);
    assert_eq!(flat.status.code(), Some(1));
    let why = String::from_utf8_lossy(&flat.stderr);
    assert!(why.contains("the load varied by 0.0 W"), "{why}");

    let bad = calibrate(
        "t,reference_watts,components_watts\n0,100,40\n1,lots,40\n",
        false,
    );
    assert_eq!(bad.status.code(), Some(1));
    let why = String::from_utf8_lossy(&bad.stderr);
    assert!(why.contains("line 3") && why.contains("\"lots\""), "{why}");
}
