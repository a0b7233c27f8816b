//! `profile --sweep powermode` as a user runs it: llama.cpp's real `llama-server` (SmolLM2), a
//! replayed 100 W machine, and a stand-in power-profiles-daemon speaking the daemon's own D-Bus
//! interface (`tests/desktop/power_profiles_daemon.py`) on a bus of the test's own, which
//! `wattbar-cli` is given as its system bus. The daemon starts at `balanced` and offers
//! `performance`, `balanced` and `power-saver`; it prints each change it is asked for, so the
//! test sees every setting the sweep made, in order, and that `balanced` came back after
//! success, a failing prompt, Ctrl+C, SIGTERM, and a kill -9 (at the next start of
//! `wattbar-cli`). The signals and the kill come while the first setting settles, before any
//! prompt is sent, so those tests need no model server.

use crate::common::model_server::ModelServer;
use crate::common::private_bus::PrivateBus;
use crate::common::profiles_daemon::Daemon;
use crate::common::{cli, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const HUNDRED_WATTS: &str = "t,watts\n0,100\n1,100\n";
const TWO_PROMPTS: &str = r#"{"prompt":"What is 2 plus 3? Answer with a number.","answer":"5"}
{"prompt":"Name a colour of the sky.","answer":"blue"}
"#;

/// One sweep test at a time: each runs a model server or waits on one, and four at once beside
/// the other tests' servers would slow every answer on a 2-core machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test's folder, bus, daemon and, where prompts are answered, model server.
struct Setup {
    dir: tempfile::TempDir,
    bus: PrivateBus,
    daemon: Daemon,
    server: Option<ModelServer>,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Setup {
    /// With llama.cpp's `llama-server` answering.
    fn answering() -> Setup {
        let mut s = Setup::new();
        s.server = Some(ModelServer::llama());
        s
    }

    /// With no model server: for a sweep stopped before its first prompt.
    fn new() -> Setup {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("trace.csv"), HUNDRED_WATTS)
            .unwrap_or_else(|e| panic!("{e}"));
        let bus = PrivateBus::start();
        let daemon = Daemon::start_at(&bus, &repo_root(), "balanced");
        Setup {
            dir,
            bus,
            daemon,
            server: None,
            _one: one,
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn journal(&self) -> PathBuf {
        self.dir.path().join("knobs.json")
    }

    /// `wattbar-cli` with the test's bus as its system bus.
    fn cli(&self) -> Command {
        let mut c = cli(self.dir.path());
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus.address)
            .env("WATTBAR_REPLAY", self.dir.path().join("trace.csv"));
        c
    }

    /// `profile --sweep powermode` over `prompts`, each setting left `settle` first.
    fn sweep(&self, prompts: &str, settle: &str, extra: &[&str]) -> Command {
        self.sweep_of("powermode", prompts, settle, extra)
    }

    /// `profile --sweep KNOB` over `prompts`, each setting left `settle` first.
    fn sweep_of(&self, knob: &str, prompts: &str, settle: &str, extra: &[&str]) -> Command {
        let file = self.dir.path().join("prompts.jsonl");
        std::fs::write(&file, prompts).unwrap_or_else(|e| panic!("{e}"));
        let mut c = self.cli();
        c.args(["profile", "--sweep", knob, "--model", "smollm2"])
            .args(["--api", "openai", "--idle", "0", "--max-tokens", "8"])
            .args(["--settle", settle, "--upstream"])
            // Never asked where no server answers: the sweep is stopped before its first prompt.
            .arg(
                self.server
                    .as_ref()
                    .map_or("http://127.0.0.1:9", |m| m.url.as_str()),
            )
            .arg("--prompts")
            .arg(&file)
            .arg("--out")
            .arg(self.out())
            .args(extra);
        c
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_sweep_profiles_each_power_profile_chooses_by_its_rule_and_puts_balanced_back() {
    let mut s = Setup::answering();
    let out = s
        .sweep(TWO_PROMPTS, "0", &["--choose", "slowdown<=5%"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // Each offered profile, the most power first, then the one it started at.
    assert_eq!(
        s.daemon.all_sets(),
        ["performance", "balanced", "power-saver", "balanced"]
    );
    assert!(
        said.contains("the power profile is back to balanced (from power-saver)"),
        "{said}"
    );
    assert!(!s.journal().exists(), "the journal outlived the sweep");

    let sweep = read_json(&s.out().join("sweep.json"));
    assert_eq!(sweep["knob"], "powermode");
    assert_eq!(sweep["original"], "balanced");
    let steps = sweep["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps: {sweep}"));
    assert_eq!(steps.len(), 3);
    // Worked again from each step's own summary: J per query (or per correct answer where every
    // step had one right), tokens/s, the slowdown against balanced, and the least energy within
    // 5 %.
    let summaries: Vec<serde_json::Value> = ["performance", "balanced", "power-saver"]
        .iter()
        .map(|p| read_json(&s.out().join(format!("powermode-{p}/summary.json"))))
        .collect();
    let per_correct = summaries.iter().all(|m| {
        m["unevaluated"].as_u64() == Some(0) && m["correct"].as_u64().is_some_and(|c| c > 0)
    });
    assert_eq!(
        sweep["per"],
        if per_correct {
            "correct_answer"
        } else {
            "query"
        }
    );
    let figures: Vec<(f64, f64)> = summaries
        .iter()
        .map(|m| {
            assert_eq!(m["queries"], 2);
            let units = if per_correct {
                f(&m["correct"])
            } else {
                f(&m["queries"])
            };
            let wall = f(&m["totals"]["wall_seconds"]);
            let joules = f(&m["totals"]["energy_joules"]);
            // A replayed 100 W machine: each step's energy is 100 W over its queries' time.
            assert!((joules - 100.0 * wall).abs() <= 0.03 * joules + 1.0, "{m}");
            (joules / units, f(&m["totals"]["completion_tokens"]) / wall)
        })
        .collect();
    for (step, (j, tps)) in steps.iter().zip(&figures) {
        assert!((f(&step["joules_per_unit"]) - j).abs() < 1e-6 * j, "{step}");
        assert!(
            (f(&step["tokens_per_second"]) - tps).abs() < 1e-6 * tps,
            "{step}"
        );
        let slower = (figures[1].1 / tps - 1.0) * 100.0;
        assert!(
            (f(&step["slowdown_percent"]) - slower).abs() < 1e-6,
            "{step}"
        );
    }
    let chosen = (0..3)
        .filter(|&i| i == 1 || (figures[1].1 / figures[i].1 - 1.0) * 100.0 <= 5.0 + 1e-9)
        .min_by(|&a, &b| figures[a].0.total_cmp(&figures[b].0))
        .unwrap_or(1);
    assert_eq!(
        sweep["chosen"],
        ["performance", "balanced", "power-saver"][chosen]
    );
    let saving = (1.0 - figures[chosen].0 / figures[1].0) * 100.0;
    assert!((f(&sweep["saving"]["percent"]) - saving).abs() < 1e-6);
    assert!(f(&sweep["saving"]["at_least_percent"]) <= saving + 1e-9);
    assert!(f(&sweep["saving"]["at_most_percent"]) >= saving - 1e-9);
    let svg = std::fs::read_to_string(s.out().join("sweep.svg")).unwrap_or_else(|e| panic!("{e}"));
    assert!(svg.contains("(chosen)"), "the chart marks no chosen step");
}

#[test]
fn a_prompt_that_fails_mid_sweep_still_puts_the_profile_back() {
    let mut s = Setup::answering();
    // The second prompt is longer than the server's 4,096-token context: refused with 400.
    let long = "word ".repeat(6000);
    let prompts = format!(
        "{}{{\"prompt\":\"{long}\"}}\n",
        TWO_PROMPTS.lines().next().unwrap_or_default().to_string() + "\n"
    );
    let out = s
        .sweep(&prompts, "0", &[])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("the step at performance"), "{said}");
    assert_eq!(s.daemon.all_sets(), ["performance", "balanced"]);
    assert!(
        said.contains("the power profile is back to balanced (from performance)"),
        "{said}"
    );
    assert!(!s.journal().exists());
}

/// Starts a sweep, waits until it has switched to its first step (performance), and sends
/// `signal` while the setting settles; its exit and what it said.
fn interrupted_at_performance(s: &mut Setup, signal: &str) -> (std::process::ExitStatus, String) {
    let mut child = s
        .sweep(TWO_PROMPTS, "30s", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut err = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut text);
        text
    });
    s.daemon
        .wait_for("set performance", Duration::from_secs(60));
    assert!(s.journal().exists(), "nothing journalled before the change");
    let sent = Command::new("kill")
        .args(["-s", signal, &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(sent.success());
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    (status, said.join().unwrap_or_default())
}

#[test]
fn ctrl_c_during_a_sweep_puts_the_profile_back() {
    let mut s = Setup::new();
    let (status, said) = interrupted_at_performance(&mut s, "INT");
    assert!(!status.success(), "{said}");
    assert!(said.contains("stopped by Ctrl+C (SIGINT)"), "{said}");
    assert!(
        said.contains("the power profile is back to balanced (from performance)"),
        "{said}"
    );
    assert_eq!(s.daemon.all_sets(), ["performance", "balanced"]);
    assert!(!s.journal().exists());
}

#[test]
fn sigterm_during_a_sweep_puts_the_profile_back() {
    let mut s = Setup::new();
    let (status, said) = interrupted_at_performance(&mut s, "TERM");
    assert!(!status.success(), "{said}");
    assert!(said.contains("stopped by SIGTERM"), "{said}");
    assert_eq!(s.daemon.all_sets(), ["performance", "balanced"]);
    assert!(!s.journal().exists());
}

#[test]
fn after_a_kill_9_the_next_wattbar_cli_puts_the_profile_back_and_says_so() {
    let mut s = Setup::new();
    let mut child = s
        .sweep(TWO_PROMPTS, "30s", &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    s.daemon
        .wait_for("set performance", Duration::from_secs(60));
    let pid = child.id();
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = child.wait();
    // Nothing put it back: the journal says what to.
    assert_eq!(s.daemon.all_sets(), ["performance"]);
    let journal = read_json(&s.journal());
    assert_eq!(journal["original"], "balanced");
    assert_eq!(journal["pid"], pid);

    let next = s
        .cli()
        .arg("version")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&next.stderr);
    assert!(next.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "the power profile is back to balanced (performance before): a sweep (pid {pid}) \
             ended without putting it back"
        )),
        "{said}"
    );
    assert_eq!(s.daemon.all_sets(), ["performance", "balanced"]);
    assert!(!s.journal().exists());
}

#[test]
fn a_sweep_of_rapls_package_limit_steps_down_to_half_the_rated_power_and_puts_it_back() {
    let s = Setup::answering();
    // A copy of a real Intel machine's powercap tree (the capture itself is never written):
    // its package's long-term limit is firmware's 4,090 W "no limit", its rated power 95 W.
    let sys = s.dir.path().join("sysfs");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(repo_root().join("tests/fixtures/linux/powercap/procfs-testdata-intel"))
        .arg(&sys)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(copied.success());
    let limit = sys.join("sys/class/powercap/intel-rapl:0/constraint_0_power_limit_uw");
    let out = s
        .sweep_of("rapl-limit", TWO_PROMPTS, "0", &[])
        .env("WATTBAR_SYSFS_ROOT", &sys)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let sweep = read_json(&s.out().join("sweep.json"));
    let settings: Vec<&str> = sweep["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|st| st["setting"].as_str())
        .collect();
    // 4,090 W, then 95 W, 75 % and 50 % of it.
    assert_eq!(settings, ["4090W", "95W", "71.25W", "47.5W"]);
    assert_eq!(sweep["original"], "4090W");
    assert_eq!(
        std::fs::read_to_string(&limit).unwrap_or_default().trim(),
        "4090000000"
    );
    assert!(
        said.contains("RAPL's package power limit is back to 4090W (from 47.5W)"),
        "{said}"
    );
    assert!(!s.journal().exists());
}

#[test]
fn without_nvml_a_gpu_power_limit_or_clock_sweep_is_refused_before_anything_changes() {
    if std::path::Path::new("/proc/driver/nvidia").exists() {
        // A machine with the NVIDIA driver: scripts/gpu-check sweeps its GPU for real.
        eprintln!("skipped: this machine has an NVIDIA driver");
        return;
    }
    let s = Setup::new();
    for knob in ["power-limit", "clocks"] {
        let out = s
            .sweep_of(knob, TWO_PROMPTS, "0", &[])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{knob}: {said}");
        assert!(
            said.contains("the NVIDIA management library libnvidia-ml.so.1 could not be loaded"),
            "{knob}: {said}"
        );
        assert!(!s.journal().exists());
        assert!(!s.out().join("sweep.json").exists());
    }
}
