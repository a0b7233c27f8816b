//! `wattbar-cli watch` as a user runs it.

use std::process::Command;

/// The CPU-utilisation estimate: /proc/stat on Linux, sysinfo elsewhere.
const CPU_ESTIMATE: &str = if cfg!(target_os = "linux") {
    "proc-stat"
} else {
    "cpu-proxy"
};

fn cli(data: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wattbar-cli"));
    c.env("WATTBAR_DATA_DIR", data)
        .env("XDG_DATA_HOME", data)
        .env("XDG_CONFIG_HOME", data)
        .env("TMPDIR", data)
        .env_remove("WATTBAR_REPLAY");
    c
}

#[test]
fn watch_count_3_json_prints_three_json_lines_from_this_machine() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args(["watch", "--interval", "200ms", "--count", "3", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let mut last_t = 0.0;
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let t = v["t"].as_f64().unwrap_or_else(|| panic!("no t in {line}"));
        assert!(t > last_t, "t must increase: {line}");
        last_t = t;
        // This machine has no power sensor, so the CPU-utilisation estimate answers, labelled so.
        assert!(v["watts"].as_f64().is_some_and(|w| w > 0.0), "{line}");
        assert_eq!(v["quality"], "estimated", "{line}");
        assert_eq!(v["source"], CPU_ESTIMATE, "{line}");
        assert_eq!(v["domain"], "system", "{line}");
        // ... and said to cover the CPU package alone, not the machine.
        assert_eq!(v["scope"], "components", "{line}");
        assert_eq!(v["covers"], serde_json::json!(["cpu-package"]), "{line}");
        assert!(
            v["session_joules"].as_f64().is_some_and(|j| j >= 0.0),
            "{line}"
        );
    }
}

#[test]
fn watch_replays_a_trace_and_integrates_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,50\n").unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["watch", "--interval", "100ms", "--count", "4", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(rows.len(), 4);
    assert!(rows
        .iter()
        .all(|r| r["watts"] == 50.0 && r["quality"] == "measured"));
    // From the first line to the fourth, 50 W × the seconds between them (about 0.3 s: 15 J).
    let at = |i: usize, key: &str| {
        rows[i][key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {}", rows[i]))
    };
    let (joules, seconds) = (
        at(3, "session_joules") - at(0, "session_joules"),
        at(3, "t") - at(0, "t"),
    );
    assert!(seconds > 0.0, "{seconds} s");
    assert!(
        (joules - 50.0 * seconds).abs() < 0.01 * joules,
        "{joules} J in {seconds} s"
    );
}

#[test]
fn watch_piped_to_a_reader_that_leaves_keeps_what_it_printed() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,3600\n").unwrap_or_else(|e| panic!("{e}"));
    // An hour between batches: nothing is written unless the exit writes it (`watch | head -5`).
    let mut child = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["watch", "--interval", "100ms", "--batch", "1h", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let rows: Vec<serde_json::Value> = std::io::BufReader::new(stdout)
        .lines()
        .take(5)
        .map(|l| {
            let l = l.unwrap_or_else(|e| panic!("{e}"));
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect();
    // The reader has gone: the next line written meets a broken pipe.
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = rows[4]["session_joules"].as_f64().unwrap_or_default();
    assert!(printed > 0.0, "{:?}", rows[4]);
    let totals = cli(dir.path())
        .args(["totals", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let totals: serde_json::Value =
        serde_json::from_slice(&totals.stdout).unwrap_or_else(|e| panic!("{e}"));
    let stored = totals["lifetime"]["kwh"].as_f64().unwrap_or_default() * 3.6e6;
    assert!(
        stored >= printed - 1e-6,
        "stored {stored} J, printed {printed} J"
    );
}

#[test]
fn a_bad_interval_or_trace_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args(["watch", "--interval", "5ms", "--count", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("100 ms"));

    let trace = dir.path().join("bad.csv");
    std::fs::write(&trace, "t,watts\n0,oops\n").unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["watch", "--count", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.csv") && err.contains("line 2"), "{err}");
}

#[test]
fn watch_csv_records_a_trace_that_replays_the_same_watts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let source = dir.path().join("source.csv");
    std::fs::write(&source, "t,watts\n0,40\n").unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", &source)
        .args(["watch", "--interval", "100ms", "--count", "3", "--csv"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), 4, "{recorded}");
    assert_eq!(lines[0], "t,watts,domain,quality");
    assert!(
        lines[1].starts_with("0.000,40,system,measured"),
        "{recorded}"
    );

    let trace = dir.path().join("recorded.csv");
    std::fs::write(&trace, &recorded).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["watch", "--interval", "100ms", "--count", "2", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["watts"], 40.0);
    }
}

#[test]
fn sources_lists_each_source_with_its_quality_and_availability() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .arg("sources")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let sources = v["sources"].as_array().cloned().unwrap_or_default();
    let proxy = sources
        .iter()
        .find(|s| s["id"] == CPU_ESTIMATE)
        .unwrap_or_else(|| panic!("no {CPU_ESTIMATE} in {v}"));
    if cfg!(target_os = "linux") {
        // This machine has no RAPL, battery or GPU: each says why instead of reading 0 W.
        for id in ["nvml", "rapl", "power-supply", "hwmon"] {
            let s = sources
                .iter()
                .find(|s| s["id"] == id)
                .unwrap_or_else(|| panic!("no {id} in {v}"));
            assert_eq!(s["available"], false, "{s}");
        }
    }
    assert_eq!(proxy["quality"], "estimated");
    assert_eq!(proxy["available"], true);
    // The estimate, and the headline made of it, cover the CPU package only.
    assert_eq!(
        proxy["covers"],
        serde_json::json!([{"scope": "components", "covers": ["cpu-package"]}]),
        "{proxy}"
    );
    assert_eq!(v["scope"], "components", "{v}");
    assert_eq!(v["covers"], serde_json::json!(["cpu-package"]), "{v}");
    assert_eq!(v["scope_text"], "the CPU package only", "{v}");
    for s in &sources {
        // Every unavailable source says why.
        if s["available"] == false {
            assert!(s["reason"].as_str().is_some_and(|r| !r.is_empty()), "{s}");
        }
    }
}

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux")
        .join(rel)
}

#[test]
fn probe_turns_two_rapl_snapshots_into_package_watts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let base = fixture("powercap/s-tui-56-i7-8550u-x1c6");
    let out = cli(dir.path())
        .arg("probe")
        .arg("--sysfs-root")
        .arg(base.join("t0"))
        .arg("--then")
        .arg(base.join("t1"))
        .args(["--after", "1.1679787635803223"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let readings = v["samples"][0]["readings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rapl: Vec<_> = readings.iter().filter(|r| r["source"] == "rapl").collect();
    assert_eq!(rapl.len(), 1, "{v}");
    assert_eq!(rapl[0]["domain"], "cpu");
    assert_eq!(rapl[0]["quality"], "measured");
    let w = rapl[0]["watts"].as_f64().unwrap_or(0.0);
    assert!((w - 0.923955).abs() < 1e-6, "{w}");
    assert!(v["samples"][0]["state"]["unavailable"]["power-supply"].is_string());
    // A span no clock holds is refused with the usage's words, not a panic (exit 101).
    for after in ["1e308", "0", "NaN"] {
        let out = cli(dir.path())
            .arg("probe")
            .arg("--sysfs-root")
            .arg(base.join("t0"))
            .arg("--then")
            .arg(base.join("t1"))
            .args(["--after", after])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{after}: {said}");
        assert!(said.contains("--after must be"), "{said}");
    }
}

#[test]
fn probe_of_a_not_charging_battery_has_no_zero_watts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .arg("probe")
        .arg("--sysfs-root")
        .arg(fixture("power_supply/dell-xps15-9560-not-charging"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let readings = v["samples"][0]["readings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(readings.iter().all(|r| r["watts"] != 0.0), "{v}");
    assert_eq!(v["samples"][0]["state"]["BAT0_status"], "Not charging");

    let out = cli(dir.path())
        .args(["probe", "--sysfs-root", "/no/such/dir"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}

fn macos_fixture(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/macos")
        .join(name)
}

fn parse_json(kind: &str, file: &std::path::Path) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args(["parse", kind])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn parse_ioreg_gives_system_load_as_the_system_draw() {
    let v = parse_json(
        "ioreg",
        &macos_fixture("ioreg-applesilicon-charging-60w.txt"),
    );
    let readings = v["samples"][0]["readings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let system: Vec<_> = readings
        .iter()
        .filter(|r| r["domain"] == "system")
        .collect();
    assert_eq!(system.len(), 1, "{v}");
    assert!((system[0]["watts"].as_f64().unwrap_or(0.0) - 23.437).abs() < 1e-9);
    assert_eq!(system[0]["source"], "smart-battery");
    assert_eq!(system[0]["quality"], "measured");
    // The plist form is detected on its own.
    let plist = parse_json(
        "ioreg",
        &macos_fixture("ioreg-a-applesilicon-m4pro-battery-1.plist"),
    );
    let readings = plist["samples"][0]["readings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(readings
        .iter()
        .any(|r| r["domain"] == "system"
            && (r["watts"].as_f64().unwrap_or(0.0) - 18.922).abs() < 1e-9));
}

#[test]
fn parse_powermetrics_gives_one_sample_per_record_and_bad_input_exits_1() {
    let v = parse_json(
        "powermetrics",
        &macos_fixture("powermetrics-m1-air-monterey.txt"),
    );
    assert!(
        v["samples"].as_array().map(Vec::len).unwrap_or(0) > 1,
        "{v}"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello").unwrap_or_else(|e| panic!("{e}"));
    for kind in ["ioreg", "powermetrics", "pmset-batt", "top"] {
        let out = cli(dir.path())
            .args(["parse", kind])
            .arg(&junk)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(1), "{kind}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("junk.txt"),
            "{kind}"
        );
    }
    // An unknown kind is a usage error, answered with the kinds there are.
    let out = cli(dir.path())
        .args(["parse", "nope"])
        .arg(&junk)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ioreg, powermetrics, pmset-batt"));
}

fn plug_capture(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/plugs")
        .join(rel)
}

#[test]
fn parse_plug_prints_the_draw_the_counter_and_each_channel_or_exits_1_with_the_reason() {
    // Shelly Plus Plug S: 2.7 W; 7258.589 Wh × 3600 = 26 130 920.4 J.
    let v = parse_json(
        "plug",
        &plug_capture("shelly-gen2/plus-plug-s-gen2-fw1.1.0-switch-getstatus.json"),
    );
    assert_eq!(v["vendor"], "shelly-gen2");
    assert_eq!(v["watts"], 2.7);
    assert!((v["energy_joules"].as_f64().unwrap_or(0.0) - 26_130_920.4).abs() < 1e-6);
    assert_eq!(v["channels"][0]["id"], "switch:0");
    // Exporting: no draw, and the channels keep their sign.
    let export = parse_json(
        "plug",
        &plug_capture("shelly-gen1/em-gen1-fw1.12.1-status-negative-power.json"),
    );
    assert!(export["watts"].is_null(), "{export}");
    assert_eq!(export["channels"][0]["watts"], -620.34);
    // A Tasmota without an energy sensor: exit 1 and why, nothing on stdout.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args(["parse", "plug"])
        .arg(plug_capture(
            "tasmota/pow-r2-fw6.1.1-status8-no-energy-object.json",
        ))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no ENERGY"), "{stderr}");
}
