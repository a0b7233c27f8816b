//! `wattbar-cli run` end to end: a real child, a replayed 100 W machine, the exit statuses a
//! shell gives, signals passed on, the files of `--out`, and a running engine asked instead of
//! sampling twice.

use crate::common::{assert_ok, cli, Serve, FILL_LEDGER};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const HUNDRED_WATTS: &str = "t,watts\n0,100\n1,100\n";

fn replayed(data: &Path, trace: &str) -> Command {
    let path = data.join("trace.csv");
    std::fs::write(&path, trace).unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(data);
    c.env("WATTBAR_REPLAY", &path);
    c
}

fn output(mut c: Command) -> Output {
    c.output().unwrap_or_else(|e| panic!("{e}"))
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited 20 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` has a handler for SIGINT (bit 1 of `SigCgt` in /proc/PID/status).
fn catches_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|mask| mask & 0b10 != 0)
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn sleep_2_on_a_100_w_machine_is_200_joules() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = replayed(dir.path(), HUNDRED_WATTS);
    c.args(["run", "--json", "--idle", "1s", "--", "sleep", "2"]);
    let out = output(c);
    assert_ok(&out);
    let v = json(&out);
    let run = &v["results"][0]["runs"][0];
    // 100 W × 2 s = 200 J, plus what starting `sleep` took (a loaded machine takes longer),
    // never the idle second before it (300 J); and exactly 100 W over the child's own lifetime.
    let joules = num(&run["gross_joules"]);
    assert!((199.0..290.0).contains(&joules), "{joules} J");
    let seconds = num(&run["seconds"]);
    assert!(seconds >= 2.0, "{seconds} s");
    assert!(
        (joules / seconds - 100.0).abs() < 0.5,
        "{joules} J in {seconds} s"
    );
    // The idle machine also draws 100 W: nothing is left net.
    assert!((num(&v["baseline"]["mean_watts"]) - 100.0).abs() < 0.5);
    assert!(num(&run["net_joules"]).abs() < 2.0, "{}", run["net_joules"]);
    assert_eq!(run["sources"][0], "replay");
    assert_eq!(run["coarse"], false);
    assert_eq!(v["exit_code"], 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("gross") && stderr.contains("idle"),
        "{stderr}"
    );
}

#[test]
fn the_exit_status_is_the_childs_as_a_shell_gives_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let status = |args: &[&str]| {
        let mut c = replayed(dir.path(), HUNDRED_WATTS);
        c.args(["run", "--idle", "0", "--"]).args(args);
        output(c).status.code()
    };
    assert_eq!(status(&["sh", "-c", "exit 7"]), Some(7));
    assert_eq!(status(&["sh", "-c", "kill -KILL $$"]), Some(137));
    assert_eq!(status(&["/nonexistent/command"]), Some(127));
}

#[test]
fn sigterm_is_passed_on_and_the_energy_of_what_ran_is_still_reported() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = replayed(dir.path(), HUNDRED_WATTS);
    let ready = dir.path().join("ready");
    // The child leaves with 42 when it gets SIGTERM; nothing else would end it for 30 s. It
    // says when its trap is set.
    c.env("READY", &ready);
    let child = spawn_json_run(c, "trap 'exit 42' TERM; touch \"$READY\"; sleep 30 & wait");
    wait_until("the child set its trap", || ready.exists());
    // Some energy to report: 100 W for a second.
    std::thread::sleep(Duration::from_secs(1));
    let out = terminate(child);
    assert_eq!(
        out.status.code(),
        Some(42),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert!(num(&v["results"][0]["runs"][0]["gross_joules"]) > 50.0);
}

/// Starts `run --json --idle 0 -- sh -c SCRIPT` with its output piped.
fn spawn_json_run(mut c: Command, script: &str) -> std::process::Child {
    c.args(["run", "--json", "--idle", "0", "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap_or_else(|e| panic!("{e}"))
}

/// Sends SIGTERM to Wattbar and waits for it to end.
fn terminate(wattbar: std::process::Child) -> Output {
    let killed = Command::new("kill")
        .args(["-TERM", &wattbar.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    wattbar.wait_with_output().unwrap_or_else(|e| panic!("{e}"))
}

/// Whether process `pid` is still running (a zombie waiting for its parent counts as ended).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

#[test]
fn with_no_terminal_a_signal_reaches_what_the_command_started_too() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // With no controlling terminal, as a service or CI has, whether or not the tests themselves
    // were started from one: `setsid` starts a new session and execs Wattbar in place.
    let wattbar = replayed(dir.path(), HUNDRED_WATTS);
    let mut c = Command::new("setsid");
    c.arg(wattbar.get_program());
    for (key, value) in wattbar.get_envs() {
        match value {
            Some(v) => c.env(key, v),
            None => c.env_remove(key),
        };
    }
    let pid_file = dir.path().join("sleep.pid");
    // sh starts a sleep of its own and waits for it. SIGTERM ends sh; sent to sh alone, it
    // would leave the sleep running for a minute. The sleep holds none of the test's pipes, so
    // that reading Wattbar's output does not wait for it.
    c.env("PID_FILE", &pid_file);
    let child = spawn_json_run(
        c,
        "sleep 60 </dev/null >/dev/null 2>&1 & echo $! > \"$PID_FILE.new\"; mv \"$PID_FILE.new\" \"$PID_FILE\"; wait",
    );
    wait_until("the command started its sleep", || pid_file.exists());
    let sleep_pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|e| panic!("{e}"));
    let sleep_pid = sleep_pid.trim();
    assert!(running(sleep_pid));
    let out = terminate(child);
    // sh was killed by SIGTERM: 128 + 15.
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until("the command's own sleep ended", || !running(sleep_pid));
}

#[test]
fn out_holds_four_files_and_the_phases_add_up_to_the_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out_dir = dir.path().join("out");
    let script = r#"
        ev() { printf '%s\n' "$1" >> "$WATTBAR_RUN_EVENTS"; }
        ev '{"type":"phase","name":"load"}'; sleep 0.6
        ev '{"type":"mark","name":"halfway","step":3}'
        ev '{"type":"phase","name":"infer"}'; sleep 0.9
        ev 'this is not an event'
    "#;
    let mut c = replayed(
        dir.path(),
        "t,watts,domain\n0,100,system\n0,40,cpu\n1,100,system\n1,40,cpu\n",
    );
    c.args(["run", "--idle", "0", "--out"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", script]);
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("line 4"),
        "the bad line is not named: {stderr}"
    );
    let read = |name: &str| {
        std::fs::read_to_string(out_dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let summary: serde_json::Value =
        serde_json::from_str(&read("summary.json")).unwrap_or_else(|e| panic!("{e}"));
    let run = &summary["results"][0]["runs"][0];
    let gross = num(&run["gross_joules"]);
    let phases = run["phases"]
        .as_array()
        .unwrap_or_else(|| panic!("no phases"));
    let names: Vec<&str> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["before first phase", "load", "infer"]);
    let sum: f64 = phases.iter().map(|p| num(&p["joules"])).sum();
    assert!(
        (sum - gross).abs() < 1e-6 * gross,
        "phases {sum} J, run {gross} J"
    );
    // The cpu domain is its own figure: 40 W of the 100.
    let cpu = run["by_domain"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["domain"] == "cpu"))
        .unwrap_or_else(|| panic!("no cpu domain: {run}"));
    assert!((num(&cpu["mean_watts"]) - 40.0).abs() < 0.5);

    let events: Vec<serde_json::Value> = read("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["start", "phase", "mark", "phase", "end"]);
    assert_eq!(events[2]["step"], 3);
    assert!(events
        .windows(2)
        .all(|w| num(&w[0]["ts"]) <= num(&w[1]["ts"])));
    // Each phase is 100 W over its own span, from its event to the next phase or the end: load
    // held a sleep of 0.6 s, infer one of 0.9 s (spans stamped as the events are read).
    let span = |from: usize, to: usize| num(&events[to]["ts"]) - num(&events[from]["ts"]);
    for (phase, (from, to), slept) in [(&phases[1], (1, 3), 0.6), (&phases[2], (3, 4), 0.9)] {
        let seconds = span(from, to);
        assert!(seconds > slept / 2.0, "{seconds} s: {phase}");
        let joules = num(&phase["joules"]);
        assert!(
            (joules - 100.0 * seconds).abs() < 0.02 * joules,
            "{joules} J in {seconds} s: {phase}"
        );
    }

    let samples = read("samples.csv");
    let mut lines = samples.lines();
    assert_eq!(
        lines.next(),
        Some("t,domain,device,source,quality,watts,joules")
    );
    assert!(samples
        .lines()
        .any(|l| l.contains(",cpu,,replay,measured,40,")));
    // Each row has its own part's energy: over the same intervals, cpu's 40 W is 0.4 of the
    // headline's 100 W, row by row and in all.
    let mut sums = std::collections::BTreeMap::<String, f64>::new();
    let mut rows_with_energy = 0;
    for line in samples.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let Ok(joules) = cells[6].parse::<f64>() else {
            continue;
        };
        rows_with_energy += 1;
        *sums.entry(cells[1].to_string()).or_default() += joules;
    }
    let (system, cpu) = (sums["system"], sums["cpu"]);
    assert!(rows_with_energy >= 5, "{samples}");
    assert!(system > 100.0, "{system} J");
    assert!(
        (cpu / system - 0.4).abs() < 1e-9,
        "cpu {cpu} J, system {system} J"
    );
    let svg = read("report.svg");
    assert!(svg.starts_with("<svg") && svg.contains("load") && svg.contains("halfway"));
}

#[test]
fn with_a_running_engine_the_run_asks_it_instead_of_sampling_again() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), HUNDRED_WATTS, &["--interval", "200ms"]);
    let mut c = cli(dir.path());
    // No trace for the run itself: were it to sample, it would read this machine instead.
    c.args(["run", "--json", "--idle", "1s", "--", "sleep", "2"]);
    let out = output(c);
    assert_ok(&out);
    let v = json(&out);
    assert!(
        v["measured"]
            .as_str()
            .is_some_and(|m| m.contains(&serve.url)),
        "{}",
        v["measured"]
    );
    // 100 W × 2 s = 200 J, plus the start of `sleep`, never the idle second before it.
    let joules = num(&v["results"][0]["runs"][0]["gross_joules"]);
    assert!((199.0..290.0).contains(&joules), "{joules} J");
    assert!((num(&v["interval_seconds"]) - 0.2).abs() < 1e-9);
}

#[test]
fn report_draws_the_ledger_as_svg_and_png_of_at_least_1200_by_600() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = replayed(dir.path(), HUNDRED_WATTS);
    c.args(FILL_LEDGER);
    assert!(output(c).status.success());
    let out_dir = dir.path().join("report");
    let mut c = cli(dir.path());
    c.args(["report", "--from", "1h", "--out"])
        .arg(format!("{}/", out_dir.display()));
    let out = output(c);
    assert_ok(&out);
    let svg = std::fs::read_to_string(out_dir.join("wattbar-report.svg"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(svg.contains("power (W)") && svg.contains("energy (kWh)"));
    let png = std::fs::read(out_dir.join("wattbar-report.png")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert!(width >= 1200 && height >= 600, "{width}×{height}");
    let mut c = cli(dir.path());
    c.args(["report", "--out", "report.pdf"]);
    let refused = output(c);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains(".svg or .png"));
}

#[test]
fn commands_are_compared_side_by_side_over_several_runs_after_warm_ups() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = replayed(dir.path(), HUNDRED_WATTS);
    c.args([
        "run",
        "--json",
        "--idle",
        "0",
        "--runs",
        "2",
        "--warmup",
        "1",
        "--cmd",
        "sleep 0.4",
        "--cmd",
        "sleep 0.8",
    ]);
    let out = output(c);
    assert_ok(&out);
    let v = json(&out);
    let results = v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results"));
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["command"], "sleep 0.4");
    assert_eq!(results[1]["exit_codes"], serde_json::json!([0, 0]));
    // 100 W × 0.4 s = 40 J and 100 W × 0.8 s = 80 J, each plus its start: the second is
    // about 40 J more than the first, and neither is the other's (swapped, 80 J and 40 J).
    let a = num(&results[0]["gross_joules"]["mean"]);
    let b = num(&results[1]["gross_joules"]["mean"]);
    assert!(a >= 39.5 && b >= 79.5 && b > a + 20.0, "{a} J, {b} J");
    for r in results {
        let g = &r["gross_joules"];
        assert!(num(&g["min"]) <= num(&g["median"]) && num(&g["median"]) <= num(&g["max"]));
        assert!(num(&g["stddev"]) >= 0.0);
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("side by side"));
}

#[test]
fn ctrl_c_during_the_idle_baseline_runs_nothing_and_leaves_with_130() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let marker = dir.path().join("ran");
    let mut c = replayed(dir.path(), HUNDRED_WATTS);
    c.args(["run", "--idle", "10s", "--", "touch"])
        .arg(&marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap_or_else(|e| panic!("{e}"));
    let pid = child.id();
    wait_until("wattbar catches SIGINT", || catches_sigint(pid));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(killed.is_ok_and(|s| s.success()));
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("idle baseline"));
    assert!(!marker.exists(), "the command ran after Ctrl+C");
}

#[test]
fn a_busy_command_is_given_its_share_of_the_cpu_energy_and_a_sleeping_one_almost_none() {
    let attributed = |idle: &str, command: &[&str]| {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut c = replayed(dir.path(), "t,watts,domain\n0,60,cpu\n");
        c.args(["run", "--json", "--idle", idle, "--"])
            .args(command);
        let out = output(c);
        assert_ok(&out);
        let v = json(&out);
        let run = v["results"][0]["runs"][0].clone();
        let cpu = run["by_domain"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["domain"] == "cpu"))
            .map(|d| num(&d["joules"]))
            .unwrap_or_else(|| panic!("no CPU energy: {run}"));
        (num(&run["attributed_joules"]["cpu"]), cpu, run)
    };
    // Without a baseline the idle part is the CPUs' idle share of their time, so a command gets
    // the CPU energy × its ticks ÷ all CPUs' ticks (on N cores a busy loop holds about 1/N):
    // the busy loop gets some, never more than all, and several times what `sleep 2` gets (it
    // starts in a millisecond or so, however loaded the machine, and then uses no CPU at all);
    // the run says how idle was taken.
    let busy = [
        "python3",
        "-c",
        "import time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass\n",
    ];
    let (mine, cpu, run) = attributed("0", &busy);
    assert!(mine > 0.0 && mine <= cpu, "{mine} J of {cpu} J: {run}");
    assert!(
        run["attributed_note"]
            .as_str()
            .is_some_and(|n| n.contains("no idle baseline")),
        "{run}"
    );
    let (sleeping, cpu, run) = attributed("0", &["sleep", "2"]);
    assert!(
        sleeping < 0.05 * cpu && sleeping < mine / 4.0,
        "{sleeping} J of {cpu} J: {run}"
    );
    // With a baseline, the idle part is its draw: the replayed CPU draws 60 W at rest and 60 W
    // under the loop, so the loop added nothing and is given nothing.
    let (mine, cpu, run) = attributed("1s", &busy);
    assert!(mine.abs() < 1e-4 * cpu, "{mine} J of {cpu} J: {run}");
}

#[test]
fn a_run_on_a_laptops_battery_says_its_share_and_wear_and_costs_the_grid_nothing() {
    // 20 W drawn from a 70 Wh battery priced 200 EUR for 1,000 cycles: 2.857 EUR a kWh of
    // wear, so 2 s (40 J) wears 40 ÷ 3.6e6 × 2.857 = 0.0000317 EUR, and the grid gives none.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"battery_price": 200, "currency": "EUR", "price_per_kwh": 0.30}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = replayed(
        dir.path(),
        "t,watts,on_battery,battery_design_wh\n0,20,1,70\n1,20,1,70\n",
    );
    c.args(["run", "--json", "--idle", "0", "--", "sleep", "2"]);
    let out = output(c);
    assert_ok(&out);
    let v = json(&out);
    let run = &v["results"][0]["runs"][0];
    let gross = num(&run["gross_joules"]);
    let battery = &run["battery"];
    assert!((num(&battery["joules"]) - gross).abs() < 1e-6, "{run}");
    assert_eq!(num(&battery["share_percent"]), 100.0);
    let wear = num(&battery["wear"]);
    assert!((wear - gross / 3.6e6 * 200.0 / 70.0).abs() < 1e-12, "{run}");
    assert_eq!(battery["currency"], "EUR");
    assert_eq!(num(&run["cost"]), 0.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("on battery") && stderr.contains("(100 %), wear 0.0000"),
        "{stderr}"
    );
}
