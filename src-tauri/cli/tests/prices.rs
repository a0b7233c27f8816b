//! Price feeds through the CLI: `run --defer cheapest` (the start of the lowest running mean
//! over the job's length, from a test feed in Energy-Charts' shape on loopback, 5-minute slots
//! (the shortest a feed may give) placed so that a cheaper one begins 6 s after now: a dry run's
//! choice checked by hand, a real wait then the run, Ctrl+C while waiting), `serve`'s
//! `/metrics`, and the dashboard's price strip in Chromium.

use crate::common::cli;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// EUR per MWh, one per 5-minute slot; slot 2 begins 6 s after the feed is made, so a job of 4 s
/// within 20 s is cheapest from there (100 against 300 now).
const PRICES: [f64; 10] = [
    300.0, 300.0, 100.0, 50.0, 400.0, 20.0, 500.0, 300.0, 300.0, 300.0,
];
const SLOT: f64 = 300.0;

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// A loopback feed answering every request with `answer`; its address.
pub(crate) fn serve_once(answer: serde_json::Value) -> String {
    serve_text(answer.to_string(), "application/json")
}

/// A loopback feed answering every request with `body` as `content_type`; its address.
pub(crate) fn serve_text(body: String, content_type: &'static str) -> String {
    crate::common::loopback_server(move |mut stream| {
        let mut reader = BufReader::new(&mut stream);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            line.clear();
        }
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
    })
}

/// A feed whose third slot starts 6 s after now; its address and its first slot's start.
fn feed() -> (String, f64) {
    let t0 = now().floor() + 6.0 - 2.0 * SLOT;
    let starts: Vec<f64> = (0..PRICES.len()).map(|i| t0 + i as f64 * SLOT).collect();
    let url = serve_once(
        serde_json::json!({"unix_seconds": starts, "price": PRICES, "unit": "EUR / MWh"}),
    );
    (url, t0)
}

/// The first line of `serve`'s `/metrics` that starts with `prefix`, once there is one.
fn metric_line(serve: &crate::common::Serve, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let metrics = serve.text("/metrics");
        if let Some(l) = metrics.lines().find(|l| l.starts_with(prefix)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {prefix} in /metrics:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `run --defer cheapest --within WITHIN --duration DURATION ARGS` with the price feed at `url`.
fn deferred(data: &Path, url: &str, (within, duration): (&str, &str), args: &[&str]) -> Command {
    let prefs = serde_json::json!({
        "price_feed": {"source": "energy-charts", "bzn": "DE-LU", "url": url}
    });
    std::fs::write(data.join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let trace = data.join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,100\n1,100\n").unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(data);
    c.env("WATTBAR_REPLAY", &trace).args([
        "run",
        "--defer",
        "cheapest",
        "--within",
        within,
        "--duration",
        duration,
        "--idle",
        "0",
    ]);
    c.args(args);
    c
}

/// `run --defer cheapest --dry-run --json -- false`: the choice it printed (`false` is never
/// run: the run exits 0).
fn dry_run(data: &Path, url: &str, within_duration: (&str, &str)) -> serde_json::Value {
    let out = deferred(
        data,
        url,
        within_duration,
        &["--dry-run", "--json", "--", "false"],
    )
    .output()
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn a_dry_run_names_the_window_of_the_lowest_running_mean() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, t0) = feed();
    let c = dry_run(dir.path(), &url, ("20s", "4s"));
    // The first 4 s of slot 2, from t0 + 600 s: 100 EUR/MWh = 0.100 per kWh.
    assert_eq!(c["start"], t0 + 2.0 * SLOT, "{c}");
    assert_eq!(c["end"], t0 + 2.0 * SLOT + 4.0);
    let expected = c["expected_price_per_kwh"].as_f64().unwrap_or_default();
    assert!((expected - 0.100).abs() < 1e-12, "{c}");
    // Starting now, within slot 1 (0.300), perhaps reaching into slot 2 (0.100).
    let now_price = c["now_price_per_kwh"].as_f64().unwrap_or_default();
    assert!(
        (0.1 - 1e-12..=0.3 + 1e-12).contains(&now_price) && now_price > expected,
        "{c}"
    );
    let saving = c["saving_fraction"].as_f64().unwrap_or_default();
    assert!((saving - (1.0 - expected / now_price)).abs() < 1e-12, "{c}");
    assert_eq!(c["currency"], "EUR");
    assert_eq!(c["slots_from"], "feed");
}

#[test]
fn three_hours_ahead_a_half_hour_job_starts_at_the_lowest_mean_not_the_cheapest_quarter() {
    // Quarter-hours from the one in force, for 3 h, EUR/MWh: the cheapest quarter (5, the 7th)
    // sits between 40 and 50: its half-hours mean 22.5 or 27.5. The two quarters at 20 from the
    // 9th mean 20, the lowest of any start (10 beside 40 means 25): the start is 8 × 15 min
    // after the first quarter's, against 40 now, a saving of half.
    let q0 = (now() / 900.0).floor() * 900.0;
    let prices = [
        40.0, 40.0, 40.0, 40.0, 10.0, 40.0, 5.0, 50.0, 20.0, 20.0, 30.0, 30.0,
    ];
    let starts: Vec<f64> = (0..prices.len()).map(|i| q0 + i as f64 * 900.0).collect();
    let url = serve_once(
        serde_json::json!({"unix_seconds": starts, "price": prices, "unit": "EUR / MWh"}),
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let choice = dry_run(dir.path(), &url, ("3h", "30m"));
    assert_eq!(choice["start"], q0 + 8.0 * 900.0, "{choice}");
    assert_eq!(choice["end"], q0 + 10.0 * 900.0);
    let expected = choice["expected_price_per_kwh"]
        .as_f64()
        .unwrap_or_default();
    assert!((expected - 0.020).abs() < 1e-12, "{choice}");
    let now_price = choice["now_price_per_kwh"].as_f64().unwrap_or_default();
    assert!((now_price - 0.04).abs() < 1e-12, "{choice}");
    let saving = choice["saving_fraction"].as_f64().unwrap_or_default();
    assert!((saving - 0.5).abs() < 1e-9, "{choice}");
}

#[test]
fn a_deferred_run_waits_for_its_window_then_runs_and_pays_its_price() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, t0) = feed();
    let out = deferred(
        dir.path(),
        &url,
        ("20s", "4s"),
        &["--json", "--", "sleep", "1"],
    )
    .output()
    .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let run = &s["results"][0]["runs"][0];
    let start = run["start"].as_f64().unwrap_or_default();
    assert!(
        start >= t0 + 2.0 * SLOT && start < t0 + 2.0 * SLOT + 2.0,
        "started at t0 + {}",
        start - t0
    );
    // 1 s at 100 W, all within slot 2 (0.100 per kWh): the cost is that price's.
    let kwh = run["gross_joules"].as_f64().unwrap_or_default() / 3.6e6;
    let cost = run["cost"].as_f64().unwrap_or_default();
    assert!(kwh > 0.0 && (cost / kwh - 0.100).abs() < 1e-9, "{run}");
    assert!(stderr.contains("deferred: paid 0.1000 per kWh"), "{stderr}");
    assert!(stderr.contains("expected 0.1000"), "{stderr}");
}

#[test]
fn ctrl_c_while_waiting_ends_it_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, _) = feed();
    let marker = dir.path().join("ran");
    let mut child = deferred(dir.path(), &url, ("20s", "4s"), &["--", "touch"])
        .arg(&marker)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stderr = BufReader::new(child.stderr.take().unwrap_or_else(|| panic!("no stderr")));
    let mut line = String::new();
    // It has chosen, and waits.
    while !line.contains("cheapest start") {
        line.clear();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("ended before it chose");
        }
    }
    let sent = Instant::now();
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(killed.success());
    let status = child.wait().unwrap_or_else(|e| panic!("{e}"));
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("nothing ran"), "{rest}");
    assert!(sent.elapsed() < Duration::from_secs(3));
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn serve_exports_the_price_in_force_from_the_feed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, t0) = feed();
    let prefs = serde_json::json!({
        "price_feed": {"source": "energy-charts", "bzn": "DE-LU", "url": url, "tax": 0.19}
    });
    std::fs::write(dir.path().join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let started = now();
    let serve = crate::common::Serve::start(dir.path(), "t,watts\n0,100\n1,100\n", &[]);
    let line = metric_line(&serve, "wattbar_price_per_kwh{");
    let read = now();
    assert!(
        line.starts_with(r#"wattbar_price_per_kwh{currency="EUR",source="energy-charts:DE-LU"} "#),
        "{line}"
    );
    let value: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    // The slot in force at a sample between the start and the reading, with 19 % tax: one of
    // the feed's prices, never 0.
    let slot = |t: f64| ((t - t0) / SLOT).floor() as usize;
    let candidates: Vec<f64> = (slot(started)..=slot(read))
        .filter_map(|i| PRICES.get(i))
        .map(|p| p / 1000.0 * 1.19)
        .collect();
    assert!(
        candidates.iter().any(|c| (c - value).abs() < 1e-9),
        "{value} is none of {candidates:?}"
    );
}

/// A test feed of 15-minute slots from 24 h before now to 36 h after, in Energy-Charts' shape:
/// a day's curve, dear in the evening, below zero at midday (made for the test, not a capture).
fn day_feed() -> String {
    let from = (now() / 900.0).floor() * 900.0 - 86_400.0;
    let starts: Vec<f64> = (0..240).map(|i| from + f64::from(i) * 900.0).collect();
    let prices: Vec<f64> = starts
        .iter()
        .map(|t| {
            let hour = (t / 3600.0) % 24.0;
            let evening = 60.0 * ((hour - 19.0) / 24.0 * std::f64::consts::TAU).cos();
            let midday = if (11.0..14.0).contains(&hour) {
                140.0
            } else {
                0.0
            };
            (90.0 + evening - midday).round()
        })
        .collect();
    serve_once(serde_json::json!({"unix_seconds": starts, "price": prices, "unit": "EUR / MWh"}))
}

#[test]
fn the_dashboard_shows_the_price_strip_with_the_slot_in_force_marked() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = day_feed();
    let prefs = serde_json::json!({
        "price_feed": {"source": "energy-charts", "bzn": "DE-LU", "url": url, "charges": 0.12, "tax": 0.19}
    });
    std::fs::write(dir.path().join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let serve = crate::common::Serve::start(dir.path(), "t,watts\n0,100\n1,100\n", &[]);
    let shots = crate::common::screenshots();
    let token = crate::common::api_token(dir.path());
    let r = crate::common::browser_json(
        "prices.mjs",
        dir.path(),
        &[
            ("WATTBAR_URL", &serve.url),
            ("WATTBAR_TOKEN", &token),
            ("SCREENSHOT", &shots.join("browser-price-strip.png")),
            (
                "PREFERENCES_SCREENSHOT",
                &shots.join("browser-price-feed-preferences.png"),
            ),
        ],
    );
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    // Today and tomorrow from local midnight: between 24 h and 36 h of the feed's quarters
    // lie in them (the feed runs 36 h past now), never more than two days' 192.
    let slots = r["slots"].as_u64().unwrap_or_default();
    assert!((96..=192).contains(&slots), "{r}");
    // One slot is marked, the quarter in force when the page drew it.
    let marked = r["now_slots"].as_array().cloned().unwrap_or_default();
    assert_eq!(marked.len(), 1, "{r}");
    let start = marked[0].as_f64().unwrap_or_default();
    let page_now = r["page_now"].as_f64().unwrap_or_default();
    assert!(start <= page_now && page_now < start + 900.0 + 60.0, "{r}");
    let caption = r["caption"].as_str().unwrap_or_default();
    assert!(
        caption.starts_with("energy-charts:DE-LU: now "),
        "{caption}"
    );
    assert!(
        caption.contains("ct/kWh") && caption.contains("lowest 2 h ahead"),
        "{caption}"
    );
    // The preferences tab: the feed set before, then ENTSO-E with its token, which is kept
    // apart (0600) and never in the preferences file; a tax of 19 (not 0.19) is refused.
    assert_eq!(r["form_source_before"], "energy-charts", "{r}");
    assert_eq!(r["form_area_before"], "DE-LU", "{r}");
    assert_eq!(r["token_shown"], true, "{r}");
    assert_eq!(r["token_placeholder"], "kept (type to replace)", "{r}");
    assert!(
        r["tax_refused"]
            .as_str()
            .is_some_and(|m| m.contains("fraction")),
        "{r}"
    );
    let saved = std::fs::read_to_string(dir.path().join("preferences.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!saved.contains("s3cret-entsoe-token"), "{saved}");
    let saved: serde_json::Value = serde_json::from_str(&saved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(saved["price_feed"]["source"], "entsoe", "{saved}");
    assert_eq!(saved["price_feed"]["zone"], "10Y1001A1001A82H");
    // The form's 0.19 from before stands: the refused 19 changed nothing.
    assert_eq!(saved["price_feed"]["tax"], 0.19, "{saved}");
    let secret = dir.path().join("feeds.secret.json");
    let kept = std::fs::read_to_string(&secret).unwrap_or_else(|e| panic!("{e}"));
    assert!(kept.contains("s3cret-entsoe-token"), "{kept}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&secret)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_default();
    assert_eq!(mode, 0o600);
}

#[test]
fn a_carbon_feed_gives_the_intensity_in_force_and_grams_per_1000_tokens_per_model() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Half-hours in the GB Carbon Intensity API's regional shape (made for the test, around
    // now): 200 g in the one in force and the next (a test that runs across the half-hour
    // reads the same), more after.
    let iso = |t: f64| {
        chrono::DateTime::from_timestamp(t as i64, 0)
            .map(|d| d.format("%Y-%m-%dT%H:%MZ").to_string())
            .unwrap_or_default()
    };
    let from = (now() / 1800.0).floor() * 1800.0;
    let periods: Vec<serde_json::Value> = [200, 200, 250, 300]
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let start = from + i as f64 * 1800.0;
            serde_json::json!({"from": iso(start), "to": iso(start + 1800.0),
                               "intensity": {"forecast": g, "index": "moderate"}})
        })
        .collect();
    let url = serve_once(
        serde_json::json!({"data": {"regionid": 12, "shortname": "South West England",
                                                     "postcode": "BS7", "data": periods}}),
    );
    let prefs = serde_json::json!({
        "carbon_feed": {"source": "gb-carbon-intensity", "postcode": "BS7", "url": url}
    });
    std::fs::write(dir.path().join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let serve = crate::common::Serve::start(
        dir.path(),
        "t,watts\n0,100\n1,100\n",
        &["--interval", "100ms"],
    );
    let line = metric_line(&serve, "wattbar_carbon_intensity_grams_per_kwh{");
    assert_eq!(
        line,
        r#"wattbar_carbon_intensity_grams_per_kwh{source="gb-carbon-intensity:BS7"} 200.0"#
    );
    // 100 completion tokens at 20 tokens/s: the last 5 s at 100 W, 500 J, 5 J a token.
    let at = || serve.get("/v1/snapshot")["at"].as_f64().unwrap_or_default();
    let started = at();
    while at() < started + 6.0 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let body = serde_json::json!({"model": "m", "completion_tokens": 100, "tokens_per_second": 20.0,
                                  "end": at() - 0.2});
    serve
        .client()
        .with_token(&crate::common::api_token(dir.path()))
        .post("/v1/inference", Some(&body))
        .unwrap_or_else(|e| panic!("{e}"));
    // The record reaches the models' table with the ledger's next batch.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let models = loop {
        let models = serve.get("/v1/models");
        if models["models"].as_array().is_some_and(|m| !m.is_empty()) {
            break models;
        }
        assert!(std::time::Instant::now() < deadline, "{models}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let carbon = &models["carbon"];
    assert_eq!(carbon["g_per_kwh"], 200.0, "{models}");
    assert_eq!(
        carbon["intensity_from"],
        "carbon_feed:gb-carbon-intensity:BS7"
    );
    let jpt = models["models"][0]["joules_per_token"]
        .as_f64()
        .unwrap_or_else(|| panic!("{models}"));
    assert!((jpt - 5.0).abs() < 0.25, "{models}");
    // 5 J × 1,000 tokens = 5 kJ = 1/720 kWh; × 200 g = 0.28 g.
    let grams = carbon["models"][0]["g_co2_per_1000_tokens"]
        .as_f64()
        .unwrap_or_else(|| panic!("{models}"));
    assert!(
        (grams - jpt * 1000.0 / 3.6e6 * 200.0).abs() < 1e-12,
        "{models}"
    );
    assert!((grams - 0.278).abs() < 0.02, "{grams}");
}

#[test]
fn sources_says_what_each_feed_gave_or_why_it_gave_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, t0) = feed();
    // The carbon feed points where nothing listens.
    let gone = format!("http://127.0.0.1:{}", crate::common::free_port());
    let prefs = serde_json::json!({
        "price_feed": {"source": "energy-charts", "bzn": "DE-LU", "url": url},
        "carbon_feed": {"source": "energy-charts", "country": "de", "url": gone},
    });
    std::fs::write(dir.path().join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,100\n").unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
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
    let feeds = &v["feeds"];
    assert_eq!(feeds[0]["feed"], "energy-charts:DE-LU", "{v}");
    assert_eq!(feeds[0]["slots"], 10);
    assert_eq!(feeds[0]["span"], serde_json::json!([t0, t0 + 10.0 * SLOT]));
    assert_eq!(feeds[1]["feed"], "energy-charts:de");
    assert_eq!(feeds[1]["slots"], 0);
    assert!(
        feeds[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&gone)),
        "{v}"
    );
}
