//! `wattbar-cli serve` as a server admin runs it: a real process on a replayed trace, a real
//! SQLite file, real HTTP, SIGTERM, and the dashboard in a real Chromium (Playwright).

use crate::common::Answer;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{cli, Serve, Upstream};

#[test]
fn serving_beyond_loopback_needs_the_explicit_flag() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a loopback address"), "{err}");
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn serving_beyond_loopback_with_the_flag_warns() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("trace.csv"), "t,watts\n0,10\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut child = cli(dir.path())
        .env("WATTBAR_REPLAY", dir.path().join("trace.csv"))
        .args(["serve", "--listen", "0.0.0.0:0", "--allow-remote"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut warned = false;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if line.contains("WARN") && line.contains("beyond this machine") {
            warned = true;
        }
        if line.contains("serving on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned, "no warning was logged");
}

#[test]
fn token_prints_the_same_private_token_every_time() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let run = || {
        let out = cli(dir.path())
            .arg("token")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let first = run();
    assert_eq!(first.len(), 64);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(run(), first);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("api-token"))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
    }
}

#[test]
fn serve_answers_the_cli_low_power_switch_and_sigterm_keeps_the_energy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 3600 W: one watt-hour a second.
    let serve = Serve::start(dir.path(), "t,watts\n0,3600\n", &["--interval", "100ms"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while serve.get("/v1/snapshot")["source"].is_null() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(serve.get("/v1/snapshot")["source"], "replay");
    let api = serve.url.trim_start_matches("http://").to_string();
    let switch = |state: &str| {
        let out = cli(dir.path())
            .args(["low-power", state, "--api", &api])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
    };
    let on = switch("on");
    assert_eq!(on["enabled"], true);
    assert_eq!(on["reason"], "manual");
    assert_eq!(serve.get("/v1/low-power")["enabled"], true);
    std::thread::sleep(Duration::from_millis(1500));
    let (status, log) = serve.terminate();
    assert!(status.success(), "exit {status:?}: {log:?}");
    assert!(
        log.iter().any(|l| l.contains("the store is written")),
        "{log:?}"
    );
    let out = cli(dir.path())
        .args(["totals", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let totals: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    // At least 1.5 s at 3600 W = 5400 J was written before exit.
    let lifetime_kwh = totals["lifetime"]["kwh"].as_f64().unwrap_or(0.0);
    assert!(lifetime_kwh * 3.6e6 >= 5000.0, "{totals}");
}

#[test]
fn the_dashboard_in_chromium_follows_the_stream_and_switches_low_power_with_the_token() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // 12.5 W, then 31 W from t = 10 s: the page must show the second value without a reload.
    // Ten seconds leave Chromium time to start on a loaded machine before the step.
    let upstream = Upstream::start(5);
    // A key made before the engine starts, with a budget of 50 kJ a day: listed with none spent.
    crate::common::run_cli(
        dir.path(),
        &["key", "add", "family", "--budget", "50kJ/day"],
    );
    let serve = Serve::start(
        dir.path(),
        "t,watts\n0,12.5\n10,31\n",
        &[
            "--interval",
            "250ms",
            "--llm-proxy",
            "127.0.0.1:0",
            "--llm-upstream",
            &upstream.url,
            "--server-metrics",
            &crate::server_metrics::busy_llama_server(),
        ],
    );
    let token = String::from_utf8_lossy(
        &cli(dir.path())
            .arg("token")
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
            .stdout,
    )
    .trim()
    .to_string();
    // The model low-power mode routes to was profiled: 26 of 40 right at 12 J a query.
    serve
        .client()
        .with_token(&token)
        .post(
            "/v1/profiles",
            Some(&serde_json::json!({"eval": "gsm8k", "summary": {
                "model": "qwen3:1b", "queries": 40, "correct": 26, "incorrect": 14,
                "accuracy": 0.65, "avg_per_query_energy_joules": 12.0,
                "joules_per_correct_answer": 12.0 * 40.0 / 26.0, "graders": ["number"],
            }})),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let shots = crate::common::screenshots();
    let report = crate::common::browser_json(
        "dashboard.mjs",
        dir.path(),
        &[
            ("WATTBAR_URL", &serve.url),
            ("WATTBAR_TOKEN", &token),
            ("SCREENSHOT", &shots.join("browser-dashboard.png")),
            (
                "PREFERENCES_SCREENSHOT",
                &shots.join("browser-preferences.png"),
            ),
            ("WIDE_SCREENSHOT", &shots.join("browser-dashboard-1280.png")),
            ("WATTBAR_LLM_PROXY", &serve.proxy()),
        ],
    );
    assert_eq!(report["first_watts"], "12.5");
    assert_eq!(
        report["keys"],
        serde_json::json!([{"key": "family", "spent": "0", "left": "50000"}]),
        "{report}"
    );
    // Read every 100 ms over the page's life, across batches: session ≤ today ≤ month ≤
    // lifetime each time.
    let order = &report["totals_order"];
    // At least 3 s of readings (Chromium slows the timers of a page behind a popup).
    assert!(order["checked"].as_u64() >= Some(30), "{report}");
    assert_eq!(order["broken"], serde_json::json!([]), "{report}");
    // At 1280 px: the cards side by side (two columns at the least), the charts with both
    // axes, and a value beside its label, not across the page.
    let wide = &report["wide"];
    assert!(wide["columns"].as_u64() >= Some(2), "{report}");
    assert_eq!(wide["history_axes"], 2, "{report}");
    assert_eq!(wide["watts_axes"], 2, "{report}");
    assert!(wide["label_to_value_px"].as_i64() <= Some(400), "{report}");
    assert_eq!(report["later_watts"], "31.0");
    // A trace of the whole machine is said to be the whole machine.
    assert_eq!(report["scope"], "The whole machine, measured", "{report}");
    assert_eq!(report["low_power_after_toggle"], true);
    assert_eq!(report["report_is_svg"], true, "{report}");
    assert!(
        report["report_name"]
            .as_str()
            .is_some_and(|n| n.starts_with("wattbar-report-") && n.ends_with(".svg")),
        "{report}"
    );
    assert_eq!(serve.get("/v1/low-power")["enabled"], true);
    assert_eq!(serve.get("/v1/low-power")["reason"], "manual");
    // The preferences tab: -2 refused beside its field, then 0.42 in force and saved.
    assert_eq!(report["preferences_price_before"], "0.3", "{report}");
    assert!(
        report["preferences_refused"]
            .as_str()
            .is_some_and(|m| !m.is_empty() && m != "Saved"),
        "{report}"
    );
    assert_eq!(report["preferences_saved"], "Saved", "{report}");
    assert_eq!(
        report["preference_keys_before"],
        serde_json::json!(["family"])
    );
    assert!(
        report["key_refused"]
            .as_str()
            .is_some_and(|m| m.contains("parsecs")),
        "{report}"
    );
    assert_eq!(
        report["preference_keys_after"],
        serde_json::json!(["family", "aider"])
    );
    let made = serve.get("/v1/keys");
    let aider = &made["keys"][1];
    assert_eq!(
        (&aider["name"], &aider["budget"], &aider["clamp"]),
        (
            &serde_json::json!("aider"),
            &serde_json::json!("200Wh/week"),
            &serde_json::json!(true)
        ),
        "{made}"
    );
    // The secret shown is the key's: the proxy lets it in, and it is kept nowhere in the clear.
    let secret = report["key_secret"].as_str().unwrap_or_default();
    assert!(secret.starts_with("wb_") && secret.len() == 67, "{report}");
    assert!(aider["shown"]
        .as_str()
        .is_some_and(|s| secret.starts_with(s)));
    let kept = std::fs::read_to_string(dir.path().join("keys.secret.json")).unwrap_or_default();
    assert!(!kept.contains(secret), "{kept}");
    assert_eq!(serve.get("/v1/preferences")["price_per_kwh"], 0.42);
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("preferences.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(saved["price_per_kwh"], 0.42);
    // Routing chosen there: JSON that does not parse refused, then routes and a cap saved; the
    // request sent next, in low-power mode, shows where it was routed from.
    assert!(
        report["routes_refused"]
            .as_str()
            .is_some_and(|m| m.contains("map model names to model names")),
        "{report}"
    );
    assert_eq!(saved["low_power_action"], "route");
    assert_eq!(
        saved["low_power_routes"],
        serde_json::json!({"llama3": "qwen3:1b"})
    );
    assert_eq!(saved["low_power_max_tokens"], 64);
    // The table offers the low-power model among the choices for a route's sides.
    assert!(
        report["route_choices"]
            .as_array()
            .is_some_and(|c| c.iter().any(|m| m == "qwen3:1b")),
        "{report}"
    );
    // The wall meter from the form: ftp refused by the schema's message, then a plug saved
    // with its password out of the preferences and out of the form.
    assert!(
        report["wall_meter_refused"]
            .as_str()
            .is_some_and(|m| m.contains("http://")),
        "{report}"
    );
    assert_eq!(saved["wall_meter"]["url"], "http://127.0.0.1:9", "{saved}");
    assert!(!saved.to_string().contains("hunter2"), "{saved}");
    assert_eq!(report["wall_meter_password_field"], "", "{report}");
    assert_eq!(
        report["wall_meter_password_placeholder"], "kept (type to replace)",
        "{report}"
    );
    // MQTT from the form: refused with the schema's message, then saved with its password kept
    // apart and out of the form.
    assert!(
        report["mqtt_refused"]
            .as_str()
            .is_some_and(|m| m.contains("mqtt://")),
        "{report}"
    );
    assert_eq!(saved["mqtt"]["url"], "mqtt://ha@127.0.0.1:9", "{saved}");
    assert_eq!(saved["mqtt"]["has_secret"], true, "{saved}");
    assert!(!saved.to_string().contains("hunter3"), "{saved}");
    assert_eq!(report["mqtt_password_field"], "", "{report}");
    assert_eq!(
        report["mqtt_password_placeholder"], "kept (type to replace)",
        "{report}"
    );
    assert_eq!(report["last_request_routed_from"], "llama3", "{report}");
    let profiled = &report["profiled"];
    assert_eq!(
        (&profiled["accuracy"], &profiled["eval"]),
        (&"65\u{a0}%".into(), &"gsm8k".into()),
        "{report}"
    );
    let per_correct: f64 = profiled["joules_per_correct"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    assert!((per_correct - 480.0 / 26.0).abs() < 1e-9, "{report}");
    // 18.5 J a correct answer on GSM8K, its scope not recorded (classed as the whole
    // machine's): A is up to 100 J.
    assert_eq!(profiled["class"], "A", "{report}");
    assert_eq!(profiled["class_text"], "class A", "{report}");
    assert_eq!(
        profiled["class_title"],
        "18.5 J a correct answer on gsm8k, scope unrecorded (A is up to 100 J)",
        "{report}"
    );
    assert!(
        report["routing"]
            .as_str()
            .is_some_and(|t| t.contains("1 request routed")),
        "{report}"
    );
    assert_eq!(
        report["resident"],
        "gemma3:latest (loaded): what keeping it loaded costs is not known yet: the idle draw \
         must be measured both with gemma3:latest loaded and with no model loaded.",
        "{report}"
    );
    // The stand-in llama-server, followed by its /metrics: 50 tokens a window, its row in the
    // Models table says where its figures come from.
    let served = &report["server_model"];
    assert_eq!(
        (&served["model"], &served["source"]),
        (&"(unnamed)".into(), &"server metrics".into()),
        "{report}"
    );
    // Each row names the scope of its energy: the replayed draw is the whole machine's.
    assert_eq!(served["scope"], "system", "{report}");
    assert!(
        report["model_scopes_after_request"]
            .as_array()
            .is_some_and(|s| !s.is_empty() && s.iter().all(|s| s == "system")),
        "{report}"
    );
    let jpt: f64 = served["joules_per_token"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    assert!(jpt > 0.0, "{report}");
    // The replayed trace has no CPU domain: no program gets a share, and the page says why
    // rather than showing programs at 0 W.
    assert_eq!(report["programs"], serde_json::json!([]), "{report}");
    // (The window may hold the step from 12.5 W to 31 W.)
    let caption = report["programs_caption"].as_str().unwrap_or_default();
    assert!(
        caption.starts_with(
            "No program has a share: the CPU's draw is not measured apart here, so all "
        ) && caption.ends_with(" W is unattributed."),
        "{report}"
    );
    let (status, _) = serve.terminate();
    assert!(status.success());
}

#[test]
fn one_engine_per_data_folder_a_second_serve_is_refused_and_watch_follows_the_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let serve = Serve::start(dir.path(), "t,watts\n0,100\n", &["--interval", "100ms"]);
    let addr = serve.url.trim_start_matches("http://").to_string();

    // Many Rust users keep RUST_BACKTRACE=1: a refusal is still a message, not a crash.
    let second = cli(dir.path())
        .env("WATTBAR_REPLAY", dir.path().join("trace.csv"))
        .env("RUST_BACKTRACE", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!(
            "another Wattbar engine (pid {})",
            serve.child.id()
        )),
        "{err}"
    );
    assert!(err.contains(&addr), "{err}");
    assert!(
        err.starts_with("Error: ") && !err.contains("backtrace") && !err.contains("<unknown>"),
        "{err}"
    );

    // `watch` on the same folder prints the running engine's samples instead of sampling again.
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", dir.path().join("trace.csv"))
        .args(["watch", "--json", "--count", "3"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("following it"));
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 3);
    let joules: Vec<f64> = lines
        .iter()
        .map(|l| l["session_joules"].as_f64().unwrap_or(-1.0))
        .collect();
    assert!(joules.windows(2).all(|w| w[1] >= w[0]), "{joules:?}");
    assert_eq!(lines[2]["watts"], 100.0);

    // One machine's energy: the follower measured nothing itself.
    let (status, _) = serve.terminate();
    assert!(status.success());
    let elapsed = started.elapsed().as_secs_f64();
    let out = cli(dir.path())
        .args(["totals", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let lifetime_j = v["lifetime"]["kwh"].as_f64().unwrap_or(-1.0) * 3.6e6;
    assert!(
        lifetime_j > 0.0 && lifetime_j <= 100.0 * elapsed * 1.05,
        "{lifetime_j} J in {elapsed} s"
    );
}

#[test]
fn reset_session_goes_through_the_running_engine_and_the_session_reads_zero() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), "t,watts\n0,100\n", &["--interval", "100ms"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while serve.get("/v1/snapshot")["session_joules"]
        .as_f64()
        .unwrap_or(0.0)
        < 100.0
    {
        assert!(Instant::now() < deadline, "no energy");
        std::thread::sleep(Duration::from_millis(100));
    }
    let totals = |d: &Path| -> serde_json::Value {
        let out = cli(d)
            .args(["totals", "--json"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    std::thread::sleep(Duration::from_millis(700));
    let before = totals(dir.path());
    // Over 20 J: without a reset the session would exceed the bound below.
    assert!(
        before["session"]["kwh"].as_f64().unwrap_or(0.0) * 3.6e6 > 20.0,
        "{before}"
    );
    let reset_at = Instant::now();
    let out = cli(dir.path())
        .arg("reset-session")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = totals(dir.path());
    // Only what was drawn since the reset: at most 100 W × the time since, plus a sample.
    let since = reset_at.elapsed().as_secs_f64();
    let session_j = after["session"]["kwh"].as_f64().unwrap_or(-1.0) * 3.6e6;
    assert!(
        session_j >= 0.0 && session_j <= 100.0 * (since + 0.2),
        "{session_j} J {since} s after the reset: {after}"
    );

    let lifetime = |v: &serde_json::Value| v["lifetime"]["kwh"].as_f64().unwrap_or(0.0);
    assert!(lifetime(&after) >= lifetime(&before), "{before} → {after}");
    let live = serve.get("/v1/snapshot")["session_joules"]
        .as_f64()
        .unwrap_or(1e9);
    let since = reset_at.elapsed().as_secs_f64();
    assert!(
        live <= 100.0 * (since + 0.2),
        "{live} J {since} s after the reset"
    );
}

#[test]
fn history_and_the_report_have_each_domain_and_history_filters_by_domain() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts,domain\n0,100,system\n0,40,cpu\n",
        &["--interval", "100ms"],
    );
    let now = wattbar_engine::unix_now();
    let from = now - 3600.0;
    let history = |filter: &str| -> serde_json::Value {
        serve.get(&format!(
            "/v1/history?from={from}&to={}{filter}",
            now + 3600.0
        ))
    };
    let cpu = (0..50)
        .find_map(|_| {
            let h = history("&domain=cpu");
            let found = h["domains"].as_array().is_some_and(|d| !d.is_empty());
            if !found {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            found.then_some(h)
        })
        .unwrap_or_else(|| panic!("no cpu history after 10 s"));
    assert_eq!(
        cpu["points"],
        serde_json::json!([]),
        "system was not asked for"
    );
    for p in cpu["domains"].as_array().into_iter().flatten() {
        assert_eq!(p["domain"], "cpu");
        let w = p["mean_watts"].as_f64().unwrap_or_default();
        assert!((w - 40.0).abs() < 1e-6, "{p}");
    }
    let all = history("&domain=*");
    assert!(all["points"].as_array().is_some_and(|p| !p.is_empty()));
    assert!(
        history("")["domains"].is_null(),
        "no filter, no domains: the dashboard's payload"
    );
    assert!(
        cpu["kwh"].is_null(),
        "no headline asked for, no headline kWh: {cpu}"
    );
    let bad = serve.client().get("/v1/history?domain=cpu;x");
    assert_eq!(bad.err().and_then(|e| e.status()), Some(400));
    match serve.client().get("/v1/history?domain=cpus") {
        Err(wattbar_client::Error::Refused {
            status: 400,
            message,
            ..
        }) => {
            assert!(
                message.contains("cpus")
                    && message.contains("is not a domain")
                    && message.contains("gpu"),
                "{message}"
            );
        }
        other => panic!("a name that is no domain was answered: {other:?}"),
    }
    // A domain with nothing stored answers empty, not an error.
    assert_eq!(history("&domain=ane")["domains"], serde_json::Value::Null);
    let svg = crate::common::http()
        .get(&format!("{}/v1/report.svg?from={from}", serve.url))
        .call()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(svg.header_str("Content-Type"), Some("image/svg+xml"));
    let svg = svg.text();
    let texts: Vec<&str> = svg
        .split("</text>")
        .filter_map(|t| t.rsplit('>').next().map(str::trim))
        .collect();
    assert!(
        texts.contains(&"cpu") && texts.contains(&"total (whole machine)"),
        "the report lacks its lines: {texts:?}"
    );
}

#[test]
fn a_closed_stderr_loses_log_lines_not_the_engine() {
    // A daemon started from a terminal that has gone: its stderr is a pipe nobody reads. The next
    // line it logs (a low-power change, here) must not stop the sampling.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,60\n").unwrap_or_else(|e| panic!("{e}"));
    let mut child = crate::common::cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "100ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let url = loop {
        let line = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("serve printed no address"));
        if let Some(rest) = line.split("serving on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_string();
        }
    };
    drop(lines);
    let client = wattbar_client::Client::at(&url).with_dir(dir.path());
    let on = client
        .put("/v1/low-power", &serde_json::json!({"enabled": true}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(on["enabled"], true);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let summary = client.get("/v1/summary").unwrap_or_else(|e| panic!("{e}"));
    let age = summary["age_seconds"].as_f64().unwrap_or(f64::NAN);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        age < 1.0,
        "the engine stopped sampling: its last sample is {age} s old"
    );
}

/// The soft and hard limits on open files of process `pid`, from `/proc`.
fn open_files_limits(pid: u32) -> (String, String) {
    let limits =
        std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_else(|e| panic!("{e}"));
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("{limits}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_string(), fields[4].to_string())
}

#[test]
fn serve_started_with_a_soft_limit_of_256_files_raises_it_to_the_hard_limit() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,50\n").unwrap_or_else(|e| panic!("{e}"));
    let base = cli(dir.path());
    let mut c = Command::new("sh");
    c.args(["-c", "ulimit -Sn 256 && exec \"$0\" \"$@\""])
        .arg(base.get_program())
        .args(["serve", "--listen", "127.0.0.1:0"]);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.env("WATTBAR_REPLAY", &trace);
    let serve = Serve::spawn(c);
    let (soft, hard) = open_files_limits(serve.child.id());
    assert_ne!(hard, "256", "the hard limit here leaves nothing to raise");
    assert_eq!(soft, hard);
}
