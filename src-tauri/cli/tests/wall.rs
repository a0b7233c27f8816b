//! A smart plug as the wall meter (`--wall-meter`): the headline while it reads, the machine's
//! own sensors beside it and in its place when it stops.
//! `tests/plugs/device.mjs` plays a Shelly in its captured shape, its counter advancing.

use crate::common::{node_server, Serve};
use std::process::Child;
use std::time::{Duration, Instant};

/// A plug on loopback drawing `watts`, its counter starting again from zero `reset_after`
/// seconds in.
struct Plug {
    child: Child,
    url: String,
}

impl Plug {
    fn start(watts: f64, reset_after: f64) -> Plug {
        let (child, url) = node_server(
            "tests/plugs/device.mjs",
            &[
                "--watts",
                &watts.to_string(),
                "--reset-after",
                &reset_after.to_string(),
            ],
        );
        Plug { child, url }
    }

    /// Every counter value the plug has answered, in Wh.
    fn served(&self) -> Vec<f64> {
        let v: serde_json::Value = wattbar_client::Client::at(&self.url)
            .get("/__served")
            .unwrap_or_else(|e| panic!("{e}"));
        v.as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default()
    }

    fn unplug(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Plug {
    fn drop(&mut self) {
        self.unplug();
    }
}

/// The energy the first `n` answers count, in joules: each rise, and after a fall (a counter
/// started again from zero) what it counted since.
fn counted(served: &[f64], n: usize) -> f64 {
    served[..n]
        .windows(2)
        .map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] })
        .sum::<f64>()
        * 3600.0
}

fn wall_item(snapshot: &serde_json::Value) -> Option<serde_json::Value> {
    snapshot["breakdown"]
        .as_array()
        .and_then(|b| b.iter().find(|r| r["domain"] == "wall"))
        .cloned()
}

#[test]
fn a_plug_reads_the_wall_beside_the_sensors_and_a_counter_reset_loses_nothing() {
    // 100 W at the wall, 60 W of CPU package in the replayed trace; the plug's counter starts
    // again from zero 3 s in.
    let mut plug = Plug::start(100.0, 3.0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts,domain\n0,60,cpu\n",
        &["--interval", "200ms", "--wall-meter", &plug.url],
    );
    // Asked at most once a second: six answers span the reset.
    let deadline = Instant::now() + Duration::from_secs(60);
    let snapshot = loop {
        let s = serve.get("/v1/snapshot");
        if wall_item(&s).is_some() && plug.served().len() >= 6 {
            break s;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let served = plug.served();
    let wall = wall_item(&snapshot).unwrap_or_default();
    assert_eq!(wall["watts"], 100.0, "{wall}");
    assert_eq!(wall["scope"], "wall", "{wall}");
    assert_eq!(wall["quality"], "measured", "{wall}");
    assert_eq!(wall["source"], "wall-meter", "{wall}");
    // The wall is the headline; the sensors' 60 W (the CPU package) is set beside it.
    assert_eq!(snapshot["watts"], 100.0, "{snapshot}");
    assert_eq!(snapshot["scope"], "wall", "{snapshot}");
    assert_eq!(snapshot["source"], "wall-meter", "{snapshot}");
    assert_eq!(snapshot["wall_watts"], 100.0, "{snapshot}");
    assert_eq!(snapshot["sensors_watts"], 60.0, "{snapshot}");
    assert_eq!(
        snapshot["sensors_scope_text"], "the CPU package only",
        "{snapshot}"
    );
    let metrics = serve.text("/metrics");
    assert!(
        metrics.contains("wattbar_scope_gap_watts{scope=\"components\"} 40"),
        "{metrics}"
    );
    // The wall's energy is the plug's own count, the reset included, and the plug's own 100 W
    // since the newest answer the engine took (at most a second and a sample's step ago, 120 J):
    // never behind the count by more than its 3.6 J step, never ahead by more than that time.
    let total = wall["total_joules"]
        .as_f64()
        .unwrap_or_else(|| panic!("no wall energy: {wall}"));
    let fall = served.windows(2).position(|w| w[1] < w[0]);
    assert!(fall.is_some(), "no reset in {served:?}");
    let taken = (2..=served.len()).rev().find(|&n| {
        let ahead = total - counted(&served, n);
        (-3.6 - 1e-6..=120.0).contains(&ahead)
    });
    assert!(
        taken.is_some_and(|n| n > fall.unwrap_or(0) + 1),
        "{total} J is not what the plug counted across its reset: {served:?}"
    );

    // Unplugged: the wall says why and is gone, never 0 W; the headline falls back to the
    // sensors in the same sample, and says it covers the CPU package only.
    plug.unplug();
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        let s = serve.get("/v1/snapshot");
        let why = s["unavailable"].as_array().and_then(|u| {
            u.iter()
                .find(|u| u["source"] == "wall-meter")
                .and_then(|u| u["reason"].as_str().map(String::from))
        });
        if wall_item(&s).is_none() && why.is_some() {
            assert!(why.is_some_and(|w| w.contains("did not answer")), "{s}");
            break s;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(after["watts"], 60.0, "{after}");
    assert_eq!(after["scope"], "components", "{after}");
    assert!(after["wall_watts"].is_null(), "{after}");
    assert!(after["sensors_watts"].is_null(), "{after}");
    assert!(!serve.text("/metrics").contains("wattbar_scope_gap_watts{"));

    // The session and the ledger keep the two scopes apart and say when each began: the wall
    // until it went, then the sensors (and the sensors before, where the first sample came
    // before the plug's first answer).
    let totals = serve.get("/v1/totals");
    let session = &totals["session"];
    assert_eq!(session["scope"], "components", "{session}");
    let changes: Vec<(&str, &str)> = session["scope_changes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["from"].as_str().unwrap_or(""),
                        c["to"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(changes.last(), Some(&("wall", "components")), "{session}");
    assert!(
        changes.len() == 1 || changes == [("components", "wall"), ("wall", "components")],
        "{session}"
    );
    let at_wall = |others: &serde_json::Value| {
        others
            .as_array()
            .and_then(|o| o.iter().find(|t| t["scope"] == "wall"))
            .and_then(|t| t["joules"].as_f64())
    };
    // The wall's share of the session, apart: about 100 W over the seconds it was the headline.
    let wall_joules = at_wall(&session["other_scopes"]).unwrap_or_default();
    assert!(wall_joules > 100.0, "{session}");
    let lifetime = &totals["stored"]["lifetime"];
    assert_eq!(lifetime["scope"], "components", "{lifetime}");
    assert!(
        (at_wall(&lifetime["other_scopes"]).unwrap_or_default() - wall_joules).abs() < 1e-6,
        "{lifetime} against the session's {wall_joules} J at the wall"
    );
    // The committed counter holds all of it: the plug went more than a batch ago. (The store
    // and the session add the same steps in another order: equal to the last few bits.)
    let by_scope = &totals["lifetime_joules_by_scope"];
    let committed = by_scope["wall"].as_f64().unwrap_or_default();
    assert!(committed >= wall_joules - 1e-6, "{totals}");
}

#[test]
fn a_plug_set_in_the_preferences_is_read_at_once_and_its_password_never_shown() {
    let plug = Plug::start(80.0, 1e9);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts,domain\n0,50,cpu\n",
        &["--interval", "200ms"],
    );
    let token = crate::common::api_token(dir.path());
    let host = plug.url.trim_start_matches("http://");
    let with_password = serde_json::json!({"url": format!("http://admin:hunter2@{host}")});
    serve
        .client()
        .with_token(&token)
        .put("/v1/preferences/wall_meter", &with_password)
        .unwrap_or_else(|e| panic!("{e}"));
    // The plug heads the chain from the next samples, no restart.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = serve.get("/v1/snapshot");
        if s["scope"] == "wall" {
            assert_eq!(s["watts"], 80.0, "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Neither the API nor the preferences file holds the password; a file of its own does.
    let prefs = serve.text("/v1/preferences");
    assert!(
        !prefs.contains("hunter2") && prefs.contains("\"has_secret\":true"),
        "{prefs}"
    );
    let file = std::fs::read_to_string(dir.path().join("preferences.json")).unwrap_or_default();
    assert!(file.contains(host) && !file.contains("hunter2"), "{file}");
    let secret = dir.path().join("wall-meter.secret.json");
    assert!(std::fs::read_to_string(&secret).is_ok_and(|s| s.contains("hunter2")));

    // Taken out: the sensors are the headline again.
    serve
        .client()
        .with_token(&token)
        .put("/v1/preferences/wall_meter", &serde_json::Value::Null)
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = serve.get("/v1/snapshot");
        if s["scope"] == "components" && wall_item(&s).is_none() {
            assert_eq!(s["watts"], 50.0, "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!secret.exists());
}
