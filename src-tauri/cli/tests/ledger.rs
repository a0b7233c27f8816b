//! The ledger as a user relies on it: energy survives kill -9 and SIGTERM, never goes backwards,
//! and `totals` and `integrate` read it back.

use crate::common::FILL_LEDGER;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn cli(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wattbar-cli"));
    c.env("WATTBAR_DATA_DIR", home.join("data"))
        .env("XDG_DATA_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("TMPDIR", home)
        .env("WATTBAR_REPLAY", home.join("trace.csv"));
    c
}

fn home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("trace.csv"), "t,watts\n0,100\n")
        .unwrap_or_else(|e| panic!("{e}"));
    dir
}

fn lifetime_joules(home: &Path) -> Option<f64> {
    let out = cli(home).args(["totals", "--json"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["lifetime"]["kwh"].as_f64().map(|kwh| kwh * 3.6e6)
}

/// A running `watch --json`, with its lines arriving on a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<serde_json::Value>,
}

impl Watch {
    fn start(home: &Path) -> Watch {
        let mut child = cli(home)
            .args(["watch", "--interval", "100ms", "--batch", "300ms", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Watch { child, lines }
    }

    /// SIGTERM and wait: the last batch is written and the data folder released.
    fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
    }

    fn next(&self) -> serde_json::Value {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("no line from watch: {e}"))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_loses_at_most_a_batch_and_lifetime_never_goes_backwards() {
    let home = home();
    let mut watch = Watch::start(home.path());
    let committed = wait_for("a committed batch", || {
        lifetime_joules(home.path()).filter(|j| *j > 0.0)
    });
    let later = wait_for("another batch", || {
        lifetime_joules(home.path()).filter(|j| *j > committed)
    });
    let mut printed = 0.0;
    while let Ok(v) = watch.lines.try_recv() {
        printed = v["session_joules"].as_f64().unwrap_or(printed);
    }
    watch.child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = watch.child.wait();
    let after_kill =
        lifetime_joules(home.path()).unwrap_or_else(|| panic!("unreadable after kill -9"));
    assert!(
        after_kill >= later,
        "lifetime went back: {later} → {after_kill}"
    );
    // At 100 W, a 300 ms batch is 30 J; allow two samples of slack on top of what was printed.
    assert!(
        after_kill <= printed + 100.0 * 0.3 + 20.0 + 1e-6,
        "{after_kill} > {printed}"
    );

    // A restart continues from there.
    let restarted = Watch::start(home.path());
    let first = restarted.next();
    assert!(
        first["session_joules"].as_f64().unwrap_or(-1.0) < 1.0,
        "a new session starts at zero"
    );
    let grown = wait_for("growth after restart", || {
        lifetime_joules(home.path()).filter(|j| *j > after_kill)
    });
    assert!(grown > after_kill);
}

#[cfg(unix)]
#[test]
fn sigterm_writes_the_last_batch_and_exits_0() {
    let home = home();
    let mut watch = Watch::start(home.path());
    let mut last = 0.0;
    for _ in 0..5 {
        last = watch.next()["session_joules"].as_f64().unwrap_or(-1.0);
    }
    let status = Command::new("kill")
        .args(["-TERM", &watch.child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    let exit = wait_for("exit", || watch.child.try_wait().ok().flatten());
    assert!(exit.success(), "{exit:?}");
    let stored = lifetime_joules(home.path()).unwrap_or(-1.0);
    assert!(
        stored >= last - 1e-6,
        "{stored} < {last}: the last batch was lost"
    );
}

#[test]
fn sigterm_with_a_last_batch_the_ledger_refuses_exits_1_and_says_so() {
    let home = home();
    let mut child = cli(home.path())
        .args(["watch", "--interval", "100ms", "--batch", "300ms", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    for _ in 0..3 {
        let _ = lines.next();
    }
    let db = home.path().join("data/wattbar.db");
    wait_for("a first batch", || db.exists().then_some(()));
    // Another writer holds the ledger: the last batch cannot be written.
    let other = rusqlite::Connection::open(&db).unwrap_or_else(|e| panic!("{e}"));
    other
        .execute_batch("BEGIN IMMEDIATE")
        .unwrap_or_else(|e| panic!("{e}"));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("last batch could not be written"), "{said}");
    drop(lines);
}

#[test]
fn integrate_prints_energy_and_gaps_and_names_a_bad_line() {
    let home = home();
    let csv = home.path().join("power.csv");
    std::fs::write(&csv, "t,watts\n0,300\n300,300\n600,300\n").unwrap_or_else(|e| panic!("{e}"));
    // 300 s steps are gaps: nothing is integrated across them.
    let out = cli(home.path())
        .arg("integrate")
        .arg(&csv)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["joules"], 0.0);
    assert_eq!(v["gaps"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["samples"], 3);

    let mut dense = String::from("t,watts\n");
    for t in 0..=600 {
        dense.push_str(&format!("{t},300\n"));
    }
    std::fs::write(&csv, dense).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path())
        .arg("integrate")
        .arg(&csv)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["joules"], 180_000.0);
    assert!((v["kwh"].as_f64().unwrap_or(0.0) - 0.05).abs() < 1e-12);

    std::fs::write(&csv, "t,watts\n0,1\nx,2\n").unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path())
        .arg("integrate")
        .arg(&csv)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 3"));
}

#[test]
fn models_and_inference_say_so_when_the_ledger_cannot_be_read() {
    let empty = home();
    let home = home();
    let data = home.path().join("data");
    std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(data.join("wattbar.db"), vec![0x42u8; 8192]).unwrap_or_else(|e| panic!("{e}"));
    for command in ["models", "inference"] {
        let out = cli(home.path())
            .arg(command)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {said}");
        assert!(said.contains("wattbar.db"), "{command}: {said}");
        assert!(out.stdout.is_empty(), "{command} printed a listing");
    }
    // No ledger at all is not an error: nothing was measured yet.
    let out = cli(empty.path())
        .arg("inference")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_listing_piped_to_a_reader_that_has_gone_ends_quietly() {
    let home = home();
    for args in [&["models"][..], &["token"], &["totals", "--json"]] {
        let mut child = cli(home.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        // `| head -0`: the reader is gone before the first line is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!said.contains("panicked"), "{args:?}: {said}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {said}");
    }
}

#[test]
fn a_corrupt_database_is_moved_aside_and_recording_goes_on() {
    let home = home();
    let data = home.path().join("data");
    std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(data.join("wattbar.db"), vec![0x42u8; 8192]).unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path())
        .args(["watch", "--interval", "100ms", "--count", "3", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("moved to"));
    let aside: Vec<_> = std::fs::read_dir(&data)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        aside.iter().any(|n| n.starts_with("wattbar.db.corrupt-")),
        "{aside:?}"
    );
    assert!(lifetime_joules(home.path()).is_some_and(|j| j > 0.0));
}

#[test]
fn export_gives_the_recorded_minutes_as_csv_and_json() {
    let home = home();
    let out = cli(home.path())
        .args(["watch", "--interval", "100ms", "--count", "11", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let last: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    let session = last["session_joules"].as_f64().unwrap_or(-1.0);

    let out = cli(home.path())
        .args(["export", "--from", "1h", "--step", "1m", "--format", "json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    let joules: f64 = rows.iter().filter_map(|r| r["joules"].as_f64()).sum();
    // Shutdown writes everything printed, and at most the one sample it may take meanwhile.
    assert!(
        joules >= session - 1e-6 && joules <= session + 100.0 * 0.1 + 1e-6,
        "{joules} vs {session}"
    );
    assert!(rows
        .iter()
        .all(|r| r["mean_watts"] == 100.0 && r["max_watts"] == 100.0));

    let out = cli(home.path())
        .args(["export", "--from", "1h", "--step", "1h"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("t,mean_watts,max_watts,joules\n"),
        "{text}"
    );

    let out = cli(home.path())
        .args(["export", "--step", "5m"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[possible values: 1m, 1h]"));
}

#[test]
fn reset_session_with_no_engine_running_reads_zero_and_keeps_lifetime() {
    let home = home();
    let mut watch = Watch::start(home.path());
    wait_for("session energy", || {
        let j = watch.next()["session_joules"].as_f64()?;
        (j > 50.0).then_some(j)
    });
    watch.terminate();
    let session = |h: &Path| -> Option<f64> {
        let out = cli(h).args(["totals", "--json"]).output().ok()?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["session"]["kwh"].as_f64()
    };
    assert!(session(home.path()).unwrap_or(0.0) > 0.0);
    let before = lifetime_joules(home.path()).unwrap_or(0.0);
    let out = cli(home.path())
        .arg("reset-session")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(session(home.path()), Some(0.0));
    assert_eq!(lifetime_joules(home.path()), Some(before));
}

#[test]
fn export_gives_each_domain_its_own_columns_and_filters_by_domain() {
    let home = home();
    std::fs::write(
        home.path().join("trace.csv"),
        "t,watts,domain\n0,100,system\n0,40,cpu\n0,25,gpu\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = cli(home.path())
        .args(FILL_LEDGER)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let export = |args: &[&str]| {
        let out = cli(home.path())
            .args(["export", "--from", "1h"])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, err) = export(&[]);
    assert_eq!(code, Some(0), "{err}");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("t,mean_watts,max_watts,joules,cpu_mean_watts,cpu_joules,gpu_mean_watts,gpu_joules")
    );
    // Each domain's mean is its own energy over its own metered time: 40 W and 25 W in every
    // minute, not diluted by the part of the minute before the first sample. The fill may cross
    // a minute boundary, so it may be one row or two; a minute that holds only the first sample
    // has no energy yet and no domain cells.
    let rows: Vec<Vec<f64>> = lines
        .map(|l| {
            l.split(',')
                .map(|c| c.parse().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    assert!((1..=2).contains(&rows.len()), "{text}");
    let metered: Vec<&Vec<f64>> = rows.iter().filter(|c| !c[4].is_nan()).collect();
    assert!(!metered.is_empty(), "{text}");
    for cells in &metered {
        assert!((cells[1] - 100.0).abs() < 1e-9, "{cells:?}");
        assert!(
            (cells[4] - 40.0).abs() < 1e-6 && (cells[6] - 25.0).abs() < 1e-6,
            "{cells:?}"
        );
    }
    // cpu's energy is 40 % of the headline's, as 40 W is of 100 W.
    let sum = |k: usize| metered.iter().map(|c| c[k]).sum::<f64>();
    assert!((sum(5) / sum(3) - 0.4).abs() < 0.02, "{text}");

    let (code, text, _) = export(&["--domain", "cpu"]);
    assert_eq!(code, Some(0));
    assert!(text.starts_with("t,cpu_mean_watts,cpu_joules\n"), "{text}");
    let (_, text, _) = export(&["--domain", "system", "--domain", "gpu", "--format", "json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["domains"].get("cpu").is_none()
        && r["mean_watts"] == 100.0
        && (r["domains"].get("gpu").is_none()
            || r["domains"]["gpu"]["mean_watts"]
                .as_f64()
                .is_some_and(|w| (w - 25.0).abs() < 1e-6))));
    assert!(
        rows.iter().any(|r| r["domains"].get("gpu").is_some()),
        "{text}"
    );
    let (code, _, err) = export(&["--domain", "ane"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no history for domain \"ane\"") && err.contains("cpu, gpu"),
        "{err}"
    );
}
