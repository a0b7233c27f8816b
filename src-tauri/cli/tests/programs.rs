//! Energy per program on this machine's real processes: `serve` on a replayed CPU domain, a
//! Python busy loop beside it.

use crate::common::Serve;
use std::process::Command;
use std::time::{Duration, Instant};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A Python busy loop that ends itself after `seconds`.
struct Busy(std::process::Child);

impl Busy {
    fn start(seconds: u32) -> Busy {
        let code = format!(
            "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass\n"
        );
        Busy(
            Command::new("python3")
                .args(["-c", &code])
                .spawn()
                .unwrap_or_else(|e| panic!("python3: {e}")),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_python_busy_loop_draws_far_more_than_wattbar_and_the_parts_add_up_to_the_headline() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), "t,watts,domain\n0,60,cpu\n", &[]);
    let _busy = Busy::start(60);
    // Two process reads 10 s apart with the loop running: the window holds a whole 10 s of it.
    // On an idle machine it is the first program, with one core's share of the 60 W; beside
    // other busy programs (a loaded CI machine) it still holds a good part of a core, far
    // above Wattbar's own share.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let floor = 0.2 * 60.0 / cores;
    let watts_of = |v: &serde_json::Value, name: &str| {
        v["programs"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["program"] == name))
            .map(|p| f(&p["watts"]))
    };
    let deadline = Instant::now() + Duration::from_secs(45);
    let view = loop {
        let v = serve.get("/v1/processes?limit=1000");
        let started = v["window_seconds"].as_f64().is_some_and(|s| s > 9.0);
        if started && watts_of(&v, "python3").is_some_and(|w| w >= floor) {
            break v;
        }
        assert!(Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let python = view["programs"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["program"] == "python3"))
        .cloned()
        .unwrap_or_default();
    // This engine's own energy since it started, against the loop's over the same time (every
    // `wattbar-cli` on the machine is one program: other tests' engines are in it too).
    let own = f(&view["self_joules"]);
    assert!(f(&python["joules"]) > 10.0 * own, "{view}");
    assert_eq!(python["quality"], "measured");
    // The window's parts add up to the headline's 60 W.
    let programs: f64 = view["programs"]
        .as_array()
        .map(|a| a.iter().map(|p| f(&p["watts"])).sum())
        .unwrap_or_default();
    assert_eq!(view["others"], 0);
    let total = programs + f(&view["idle_watts"]) + f(&view["unattributed_watts"]);
    assert!((total - 60.0).abs() < 1e-6, "{total} W: {view}");
    // The dashboard's state carries the top programs.
    let shown = serve.get("/v1/snapshot")["programs"]["programs"].clone();
    assert!(
        shown
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["program"] == "python3")),
        "{shown}"
    );
    // Wattbar itself is a program too, and says what it drew.
    let names: Vec<&str> = view["programs"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["program"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"wattbar-cli"), "{names:?}");
    let metrics = serve.text("/metrics");
    assert!(
        metrics.contains("wattbar_program_energy_joules_total{program=\"python3\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("wattbar_program_energy_joules_total{program=\"(idle)\"}"));
    assert!(metrics.contains("wattbar_program_energy_joules_total{program=\"(other)\"}"));
    assert!(metrics.contains("wattbar_self_energy_joules_total"));
    // `top` beside the running engine follows it.
    let out = crate::common::cli(dir.path())
        .args(["top", "--json", "--count", "1", "--limit", "3"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    crate::common::assert_ok(&out);
    let top: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(top["programs"].as_array().map(Vec::len), Some(3), "{top}");
    assert!(top["programs"][0]["watts"].as_f64() >= top["programs"][2]["watts"].as_f64());
    assert!(String::from_utf8_lossy(&out.stderr).contains("following it"));
    // Energy since a time comes from the ledger, from the start of that UTC hour.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let since_view = loop {
        let v = serve.get(&format!("/v1/processes?limit=1000&since={:.0}", now - 1.0));
        let stored = v["programs"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["program"] == "python3"))
            .is_some_and(|p| f(&p["joules"]) > 0.0);
        if stored {
            break v;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(15), "{v}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let from = f(&since_view["since"]);
    assert_eq!(
        from,
        ((now - 1.0) / 3600.0).floor() * 3600.0,
        "{since_view}"
    );
    // Bad requests are refused with a reason.
    let future = format!("since={:.0}", now + 3600.0);
    for bad in [
        "limit=0", "sort=cpu", "limit=x", "since=x", "since=1", &future,
    ] {
        let r = serve.client().get(&format!("/v1/processes?{bad}"));
        assert_eq!(
            r.as_ref().err().and_then(|e| e.status()),
            Some(400),
            "{bad}: {r:?}"
        );
    }
}

#[test]
fn top_with_an_engine_of_its_own_lists_a_busy_loop_with_its_watts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts,domain\n0,60,cpu\n").unwrap_or_else(|e| panic!("{e}"));
    let _busy = Busy::start(30);
    let out = crate::common::cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["top", "--count", "1", "--limit", "1000"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    crate::common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("program"), "{text}");
    // On a loaded machine other programs may draw more; the loop is listed all the same.
    assert!(
        lines[1..].iter().any(|l| l.starts_with("python3 ")),
        "the busy loop is not listed: {text}"
    );
    assert!(text.contains("\nidle "), "{text}");
    assert!(text.contains("\nunattributed "), "{text}");
}
