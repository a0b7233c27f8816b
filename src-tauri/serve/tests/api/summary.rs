//! `/v1/summary` and the series a fleet view reads from Prometheus: one machine at a glance,
//! with the same figures either way.

use super::*;

/// A source that can never read, as RAPL without permission.
struct Denied;

impl Source for Denied {
    fn id(&self) -> &str {
        "rapl"
    }
    fn quality(&self) -> wattbar_core::Quality {
        wattbar_core::Quality::Measured
    }
    fn read(
        &mut self,
        _at: wattbar_core::Stamp,
    ) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        Err(wattbar_core::Error::Unavailable(
            "permission denied".to_string(),
        ))
    }
}

/// The value of the one line of `metrics` that starts with `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_and_the_metrics_give_one_machine_as_its_menu_does() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let server = Server::start("t,watts\n0,720\n", Some(&db)).await;
    // A batch every 200 ms: wait until today's stored energy passes 360 J (half a second).
    let deadline = Instant::now() + Duration::from_secs(30);
    while server
        .engine
        .current()
        .kept
        .totals
        .as_ref()
        .is_none_or(|t| t.today.joules < 360.0)
    {
        assert!(Instant::now() < deadline, "no stored energy in 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let s = server.get("/v1/summary").await.json();
    assert_eq!(s["watts"], 720.0, "{s}");
    assert_eq!(s["scope"], "system", "{s}");
    assert_eq!(s["quality"], "measured", "{s}");
    assert_eq!(s["source"], "replay", "{s}");
    assert_eq!(s["low_power"], false, "{s}");
    assert!(s["unavailable"].is_null(), "{s}");
    assert!(
        s["age_seconds"]
            .as_f64()
            .is_some_and(|a| (0.0..5.0).contains(&a)),
        "{s}"
    );
    assert_eq!(s["period_seconds"], 0.1, "{s}");
    // Today's energy is the store's: at 720 W, kWh = J / 3.6e6 of at least 360 J.
    let kwh = s["today"]["kwh"].as_f64().unwrap_or(f64::NAN);
    assert!(kwh >= 360.0 / 3.6e6, "{s}");
    let currency = Preferences::default().currency.to_string();
    assert_eq!(s["today"]["currency"], currency.as_str(), "{s}");

    // The same state through /metrics: one headline series, today's energy in joules.
    let low = server
        .write("PUT", "/v1/low-power", r#"{"enabled":true}"#)
        .await;
    assert_eq!(low.status, 200, "{low:?}");
    let p = server.engine.current();
    let text = wattbar_serve::metrics::to_prometheus_text(&wattbar_serve::metrics::render(
        &p,
        wattbar_engine::unix_now(),
        None,
    ));
    let summary = wattbar_serve::summary::Summary::new(&p, None, wattbar_engine::unix_now());
    assert!(summary.low_power);
    let head = r#"wattbar_headline_power_watts{source="replay",quality="measured",scope="system"}"#;
    assert_eq!(sample(&text, head), Some(720.0), "{text}");
    let today = summary.today.unwrap_or_else(|| panic!("no today"));
    let joules = sample(&text, r#"wattbar_today_energy_joules{scope="system"}"#);
    assert!(
        joules.is_some_and(|j| (j - today.kwh * 3.6e6).abs() <= 1e-6 * j),
        "{joules:?} J against {} kWh",
        today.kwh
    );
    let cost = sample(
        &text,
        &format!(r#"wattbar_today_cost{{currency="{currency}",scope="system"}}"#),
    );
    assert_eq!(cost, Some(today.cost), "{text}");
    assert_eq!(sample(&text, "wattbar_low_power_mode"), Some(1.0));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_that_cannot_read_says_why_and_no_watts_not_zero() {
    let server =
        Server::start_sources(vec![Box::new(Denied)], None, "127.0.0.1:0", |_, _| {}).await;
    wait_until_sampled(&server).await;
    let s = server.get("/v1/summary").await.json();
    assert!(s["watts"].is_null(), "{s}");
    assert!(s["scope"].is_null(), "{s}");
    let why = s["unavailable"].as_str().unwrap_or_default();
    assert!(
        why.contains("rapl") && why.contains("permission denied"),
        "{s}"
    );
    let metrics = server.get("/metrics").await.body;
    assert!(
        !metrics.contains("wattbar_headline_power_watts{"),
        "{metrics}"
    );
    server.stop().await;
}
