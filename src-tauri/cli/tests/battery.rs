//! A laptop's battery through `serve`, on a genuine power_supply capture: its health now, the
//! day kept in the ledger, `/metrics` and the dashboard's panel in Chromium.

use crate::common::{browser_json, cli, screenshots, Serve};
use std::time::{Duration, Instant};

fn capture(case: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux/power_supply")
        .join(case)
}

#[test]
fn serve_shows_a_thinkpads_battery_at_68_percent_and_keeps_the_day() {
    // LGC 45N1153: energy_full 67.49 Wh ÷ energy_full_design 99.46 Wh = 67.86 %; cycle_count 0
    // is not reported.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(dir.path());
    c.env(
        "WATTBAR_SYSFS_ROOT",
        capture("thinkpad-lgc-45n1153-discharging-power"),
    )
    .args(["serve", "--listen", "127.0.0.1:0", "--batch", "500ms"]);
    let serve = Serve::spawn(c);
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let b = serve.get("/v1/battery");
        if b["history"].as_array().is_some_and(|h| !h.is_empty()) {
            break b;
        }
        assert!(Instant::now() < deadline, "no day kept: {b}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let now = &body["now"][0];
    assert_eq!(now["battery"], "BAT0");
    let percent = now["health_percent"].as_f64().unwrap_or_default();
    assert!((percent - 6749.0 / 99.46).abs() < 1e-6, "{body}");
    assert_eq!(now["cycles"]["state"], "not_reported");
    assert_eq!(now["chemistry"], "Li-ion");
    // One day kept, two where the test runs across local midnight: each the capture's figures.
    let days = body["history"].as_array().cloned().unwrap_or_default();
    assert!((1..=2).contains(&days.len()), "{body}");
    for day in &days {
        assert!((day["ratio"].as_f64().unwrap_or_default() - 67.49 / 99.46).abs() < 1e-9);
        assert_eq!(day["cycles"], serde_json::Value::Null);
    }
    assert_eq!(body["trends"]["BAT0"]["state"], "not_enough_history");
    assert_eq!(body["trends"]["BAT0"]["days"], days.len());

    let metrics = serve.text("/metrics");
    assert!(
        metrics.contains("wattbar_battery_health_ratio{battery=\"BAT0\"} 0.678564"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("wattbar_battery_cycles{"),
        "0 cycles is not a count"
    );

    let shots = screenshots();
    let r = browser_json(
        "battery.mjs",
        dir.path(),
        &[
            ("WATTBAR_URL", &serve.url),
            ("WATTBAR_TOKEN", &crate::common::api_token(dir.path())),
            ("SCREENSHOT", &shots.join("browser-battery.png")),
        ],
    );
    assert_eq!(r["errors"], serde_json::json!([]), "{r}");
    assert_eq!(
        r["now"][0],
        "BAT0 · 68 % health · cycles not reported · holds 67.5 of 99.5 Wh (the gauge's energy)",
        "{r}"
    );
    let kept = r["days"][0].as_u64().unwrap_or_default();
    assert!((1..=2).contains(&kept), "{r}");
    assert_eq!(
        r["trend"][0],
        format!("Not enough history for a trend: {kept} of 30 days."),
        "{r}"
    );
    // BAT0's own price, typed in the Preferences window: a wrong one is refused by its
    // message; 120 EUR for 500 cycles of 99.46 Wh then wears 120 ÷ (500 × 0.09946 kWh)
    // = 2.4131 EUR a kWh.
    assert_eq!(r["prices_before"], "", "{r}");
    assert!(
        r["prices_refused"]
            .as_str()
            .is_some_and(|m| m.contains("BAT0: -5 must be a positive price")),
        "{r}"
    );
    assert_eq!(r["prices_saved"], "Saved", "{r}");
    let prefs = serve.get("/v1/preferences");
    assert_eq!(
        prefs["battery_prices"],
        serde_json::json!({"BAT0": {"price": 120.0, "rated_cycles": 500}})
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rate = serve.get("/v1/snapshot")["battery_drawn"]["per_kwh"].as_f64();
        if rate.is_some_and(|r| (r - 120.0 / (500.0 * 0.09946)).abs() < 1e-9) {
            break;
        }
        assert!(Instant::now() < deadline, "wear rate {rate:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
