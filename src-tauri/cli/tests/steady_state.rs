//! What `serve` asks of the system once it runs: on this machine's own sources (no replay), no
//! process is ever started and no file that is not there is looked for, sample after sample.

use crate::common::cli;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Long enough for two batches to the ledger (every 5 s) and one retry of the Ollama probe
/// (every 10 s).
const WATCHED: Duration = Duration::from_secs(12);

#[test]
fn serve_starts_no_process_and_probes_no_missing_file_in_the_steady_state() {
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut serve = cli(data.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = serve.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = BufReader::new(stderr).lines();
    let started = Instant::now();
    let url = loop {
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        if let Some(at) = line.find("serving on http://") {
            let rest = &line[at + "serving on ".len()..];
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "serve never started"
        );
    };
    std::thread::spawn(move || lines.for_each(drop));
    // Past the first samples, the first batch and the first probe of every source: two samples
    // published, however slowly this machine starts, then a little more.
    let client = wattbar_client::Client::at(url.trim_end_matches('/'));
    let sampled_at = || {
        client
            .get("/v1/snapshot")
            .ok()
            .and_then(|s| s["at"].as_f64())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        if let Some(at) = sampled_at() {
            break at;
        }
        assert!(Instant::now() < deadline, "serve never sampled");
        std::thread::sleep(Duration::from_millis(100));
    };
    while sampled_at().is_none_or(|at| at <= first) {
        assert!(Instant::now() < deadline, "serve sampled only once");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));

    let trace = data.path().join("strace.txt");
    let strace = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=execve,execveat,open,openat,openat2,creat,pread64",
        ])
        .arg("-o")
        .arg(&trace)
        .args(["-p", &serve.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("strace is needed (scripts/setup installs it): {e}"));
    std::thread::sleep(WATCHED);
    let _ = Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status();
    let out = strace.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let _ = serve.kill();
    let _ = serve.wait();
    let calls = std::fs::read_to_string(&trace).unwrap_or_else(|e| {
        panic!(
            "strace wrote nothing ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // The engine at work, seen: /proc/stat and the ledger are read with pread every second.
    let reads = calls.lines().filter(|l| l.contains("pread64(")).count();
    assert!(
        reads >= 5,
        "strace saw {reads} reads: was it attached? {}\n{calls}",
        String::from_utf8_lossy(&out.stderr)
    );
    let execs: Vec<&str> = calls.lines().filter(|l| l.contains("execve")).collect();
    assert!(execs.is_empty(), "processes started: {execs:#?}");
    let failed: Vec<&str> = calls
        .lines()
        .filter(|l| l.contains("open") && l.contains("= -1"))
        .filter(|l| !of_a_process_now_gone(l))
        .collect();
    assert!(
        failed.is_empty(),
        "files looked for and not found: {failed:#?}"
    );
}

/// Whether a failed open is of `/proc/PID/…` for a process that has since ended: the per-process
/// scan lists `/proc` and then reads each process, and one that exits in between (another test's
/// child) is gone, not a file looked for that was never there. A live process's missing file still
/// counts.
fn of_a_process_now_gone(line: &str) -> bool {
    let Some(at) = line.find("\"/proc/") else {
        return false;
    };
    let rest = &line[at + "\"/proc/".len()..];
    let pid: String = rest.chars().take_while(char::is_ascii_digit).collect();
    !pid.is_empty()
        && rest[pid.len()..].starts_with('/')
        && !std::path::Path::new("/proc").join(&pid).exists()
}
