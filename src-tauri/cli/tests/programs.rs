//! Energy per program on this machine's real processes: `serve` on a replayed CPU domain, a
//! Python busy loop beside it.

mod common;

use common::Serve;
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
fn a_python_busy_loop_has_the_largest_share_and_the_parts_add_up_to_the_headline() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), "t,watts,domain\n0,60,cpu\n", &[]);
    let _busy = Busy::start(30);
    // Two process reads 5 s apart with the loop running: the second window is all its own.
    let deadline = Instant::now() + Duration::from_secs(25);
    let view = loop {
        let v = serve.get("/v1/processes?limit=5");
        let top = v["programs"][0]["program"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if top == "python3" && v["window_seconds"].as_f64().is_some_and(|s| s > 4.0) {
            break v;
        }
        assert!(Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let python = &view["programs"][0];
    // One core of two busy: about half the 60 W CPU domain, and far above anything else.
    assert!(f(&python["watts"]) > 15.0, "{view}");
    assert!(
        f(&python["watts"]) > 3.0 * f(&view["programs"][1]["watts"]),
        "{view}"
    );
    assert_eq!(python["quality"], "measured");
    // The window's parts add up to the headline's 60 W.
    let all = serve.get(&format!("/v1/processes?limit={}", 1000));
    let programs: f64 = all["programs"]
        .as_array()
        .map(|a| a.iter().map(|p| f(&p["watts"])).sum())
        .unwrap_or_default();
    let total = programs + f(&all["idle_watts"]) + f(&all["unattributed_watts"]);
    if all["window_seconds"] == view["window_seconds"] {
        assert!((total - 60.0).abs() < 1e-6, "{total} W: {all}");
    }
    // Wattbar itself is a program too, and says what it drew.
    let names: Vec<&str> = all["programs"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["program"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"wattbar-cli"), "{names:?}");
    let metrics = ureq::get(&format!("{}/metrics", serve.url))
        .call()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_string()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        metrics.contains("wattbar_program_energy_joules_total{program=\"python3\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("wattbar_program_energy_joules_total{program=\"idle\"}"));
    assert!(metrics.contains("wattbar_self_energy_joules_total"));
    // Bad requests are refused with a reason.
    for bad in ["limit=0", "sort=cpu", "limit=x"] {
        let r = ureq::get(&format!("{}/v1/processes?{bad}", serve.url)).call();
        assert!(
            matches!(r, Err(ureq::Error::Status(400, _))),
            "{bad}: {r:?}"
        );
    }
}
