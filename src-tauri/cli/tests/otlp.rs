//! OTLP as a collector meets it: `tests/otlp/receiver.py` decodes each push with
//! OpenTelemetry's official protobuf definitions (in the venv `scripts/llm-server` makes) and
//! prints it as JSON. The receiver going away for a minute is in [`crate::mqtt`]'s test, beside
//! the broker's.

use crate::common::model_server::python;
use crate::common::{repo_root, Serve};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The receiver on a loopback port, killed when dropped.
pub struct Receiver {
    child: Child,
    pub port: u16,
    pushes: mpsc::Receiver<serde_json::Value>,
}

impl Receiver {
    /// On `port` (0: any).
    pub fn start(port: u16) -> Receiver {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/otlp/receiver.py"))
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        let first = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("the receiver did not start"));
        let v: serde_json::Value =
            serde_json::from_str(&first).unwrap_or_else(|e| panic!("{first}: {e}"));
        let port = v["port"].as_u64().unwrap_or_else(|| panic!("{first}")) as u16;
        let (tx, pushes) = mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let v = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Receiver {
            child,
            port,
            pushes,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The newest push received so far, if any, without waiting.
    pub fn latest(&self) -> Option<Push> {
        let mut last = None;
        while let Ok(v) = self.pushes.try_recv() {
            assert!(v["error"].is_null(), "a push did not decode: {v}");
            last = Some(Push(v));
        }
        last
    }

    /// Every push received so far, oldest first, without waiting.
    pub fn drain(&self) -> Vec<Push> {
        let mut all = Vec::new();
        while let Ok(v) = self.pushes.try_recv() {
            assert!(v["error"].is_null(), "a push did not decode: {v}");
            all.push(Push(v));
        }
        all
    }

    /// The next push that `want` accepts, within `within`. A push the receiver could not
    /// decode fails the test.
    pub fn next(&self, within: Duration, want: impl Fn(&Push) -> bool) -> Push {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .pushes
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no push within {within:?}: {e}"));
            assert!(v["error"].is_null(), "a push did not decode: {v}");
            let push = Push(v);
            if want(&push) {
                return push;
            }
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One decoded push.
pub struct Push(pub serde_json::Value);

impl Push {
    pub fn metric(&self, name: &str) -> Option<&serde_json::Value> {
        self.0["metrics"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == name))
    }

    /// The one point of `name` whose attributes include `attrs`: (time, value).
    pub fn point(&self, name: &str, attrs: &[(&str, &str)]) -> Option<(f64, f64)> {
        let points = self.metric(name)?["points"].as_array()?;
        let p = points
            .iter()
            .find(|p| attrs.iter().all(|(k, v)| p["attributes"][*k] == *v))?;
        Some((p["time_unix"].as_f64()?, p["value"].as_f64()?))
    }

    /// The start time of `name`'s first point, Unix seconds.
    pub fn start(&self, name: &str) -> Option<f64> {
        self.metric(name)?["points"].as_array()?.first()?["start_unix"].as_f64()
    }

    /// `hw.host.energy`: (time, joules).
    pub fn energy(&self) -> Option<(f64, f64)> {
        self.point("hw.host.energy", &[])
    }

    /// Every point of every monotonic cumulative sum, found by its kind, not its name: (the
    /// metric's name and the point's attributes, start time, value).
    pub fn cumulative_sums(&self) -> Vec<(String, f64, f64)> {
        let sums = self.0["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| {
                m["kind"] == "sum"
                    && m["monotonic"] == true
                    && m["temporality"] == "AGGREGATION_TEMPORALITY_CUMULATIVE"
            });
        sums.flat_map(|m| {
            m["points"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |p| {
                    let series = format!("{}{}", m["name"], p["attributes"]);
                    Some((series, p["start_unix"].as_f64()?, p["value"].as_f64()?))
                })
        })
        .collect()
    }
}

/// A serve pushing to `receiver` every second, on a replayed 100 W machine whose CPU draws 30 W
/// and GPU 20 W of it.
pub fn serve(data: &std::path::Path, receiver: &Receiver) -> Serve {
    Serve::start(
        data,
        "t,watts,domain\n0,100,system\n0,30,cpu\n0,20,gpu\n",
        &[
            "--interval",
            "100ms",
            "--otlp-endpoint",
            &receiver.url(),
            "--otlp-interval",
            "1s",
        ],
    )
}

/// Names, units, temporality and attributes of a push, as the conventions have them.
pub fn assert_conventions(push: &Push) {
    let resource = &push.0["resource"];
    assert_eq!(resource["service.name"], "wattbar", "{resource}");
    assert!(
        resource["host.name"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{resource}"
    );
    assert_eq!(push.0["content_type"], "application/x-protobuf");
    let energy = push
        .metric("hw.host.energy")
        .unwrap_or_else(|| panic!("{}", push.0));
    assert_eq!(energy["unit"], "J");
    assert_eq!(energy["kind"], "sum");
    assert_eq!(energy["monotonic"], true);
    assert_eq!(energy["temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
    let power = push
        .metric("hw.host.power")
        .unwrap_or_else(|| panic!("{}", push.0));
    assert_eq!(power["unit"], "W");
    assert_eq!(power["kind"], "gauge");
    assert_eq!(
        push.point("hw.host.power", &[("wattbar.scope", "system")])
            .map(|p| p.1),
        Some(100.0)
    );
    for (kind, watts) in [("cpu", 30.0), ("gpu", 20.0)] {
        let p = push.point("hw.power", &[("hw.type", kind), ("hw.id", kind)]);
        assert_eq!(p.map(|p| p.1), Some(watts), "{kind}: {}", push.0);
        let e = push.point("hw.energy", &[("hw.type", kind)]);
        assert!(e.is_some_and(|e| e.1 > 0.0), "{kind}: {}", push.0);
    }
    let parts = push
        .metric("hw.energy")
        .unwrap_or_else(|| panic!("{}", push.0));
    assert_eq!(parts["temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
}

#[test]
fn inference_counters_are_pushed_per_model() {
    let receiver = Receiver::start(0);
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve(data.path(), &receiver);
    let first = receiver.next(Duration::from_secs(20), |p| p.energy().is_some());
    assert_conventions(&first);
    let token = crate::common::api_token(data.path());
    let now = serve.get("/v1/snapshot")["at"].as_f64().unwrap_or(0.0);
    let record = serve
        .client()
        .with_token(&token)
        .post(
            "/v1/inference",
            Some(&serde_json::json!({
                "model": "otlp-model", "completion_tokens": 40, "prompt_tokens": 8,
                "tokens_per_second": 20.0, "end": now - 0.2
            })),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let push = receiver.next(Duration::from_secs(10), |p| {
        p.point("wattbar.inference.tokens", &[("model", "otlp-model")])
            .is_some()
    });
    let tokens = |kind| {
        push.point(
            "wattbar.inference.tokens",
            &[("model", "otlp-model"), ("kind", kind), ("source", "proxy")],
        )
    };
    assert_eq!(tokens("completion").map(|p| p.1), Some(40.0), "{}", push.0);
    assert_eq!(tokens("prompt").map(|p| p.1), Some(8.0), "{}", push.0);
    let joules = push.point("wattbar.inference.energy", &[("model", "otlp-model")]);
    let want = record["energy_joules"].as_f64().unwrap_or(f64::NAN);
    assert!(
        joules.is_some_and(|j| (j.1 - want).abs() <= 1e-9 * want.max(1.0)),
        "{joules:?} against the record's {want} J"
    );
    let requests = push
        .metric("wattbar.inference.requests")
        .unwrap_or_else(|| panic!("{}", push.0));
    assert_eq!(requests["monotonic"], true);
}

#[test]
fn otlp_headers_go_to_the_endpoint_they_were_given_for_and_nowhere_else() {
    const TRACE: &str = "t,watts,domain\n0,100,system\n";
    // From the environment, as every OpenTelemetry exporter reads them.
    let a = Receiver::start(0);
    let first = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(first.path().join("trace.csv"), TRACE).unwrap_or_else(|e| panic!("{e}"));
    let mut c = crate::common::cli(first.path());
    c.env("WATTBAR_REPLAY", first.path().join("trace.csv"))
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "Authorization=Bearer%20from-env",
        )
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "100ms"])
        .args(["--otlp-endpoint", &a.url(), "--otlp-interval", "1s"]);
    let serve = Serve::spawn(c);
    let push = a.next(Duration::from_secs(30), |_| true);
    assert_eq!(push.0["authorization"], "Bearer from-env");
    let (status, _) = serve.terminate();
    assert!(status.success());

    // Through the preferences: kept apart from them, bound to the collector's origin.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), TRACE, &["--interval", "100ms"]);
    let token = crate::common::api_token(dir.path());
    let set = |value: serde_json::Value| {
        serve
            .client()
            .with_token(&token)
            .put("/v1/preferences/otlp", &value)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let kept = set(serde_json::json!({
        "endpoint": a.url(), "interval_ms": 1000, "headers": "Authorization=Bearer%20kept"
    }));
    assert_eq!(kept["otlp"]["has_secret"], true, "{kept}");
    a.next(Duration::from_secs(30), |p| {
        p.0["authorization"] == "Bearer kept"
    });
    let prefs = std::fs::read_to_string(dir.path().join("preferences.json")).unwrap_or_default();
    assert!(!prefs.contains("kept"), "{prefs}");
    // Moved to another collector (another port, so another origin): the headers stay behind,
    // and the preference says it needs them.
    let b = Receiver::start(0);
    let moved = set(serde_json::json!({"endpoint": b.url(), "interval_ms": 1000}));
    assert_eq!(moved["otlp"]["has_secret"], false, "{moved}");
    let push = b.next(Duration::from_secs(30), |_| true);
    assert!(
        push.0["authorization"].is_null(),
        "{}",
        push.0["authorization"]
    );
    assert!(!dir.path().join("otlp-headers.secret.json").exists());
}
