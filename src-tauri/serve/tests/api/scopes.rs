//! A day whose scope changed: the sensors (`system`) head until a plug (`wall`) starts reading.
//! Every output that needs one figure follows the one rule ([`AcrossScopes`]): each interval in
//! the scope it was measured in, summed, labelled with the scopes it holds.
//!
//! [`AcrossScopes`]: wattbar_ledger::store::AcrossScopes

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wattbar_core::{Domain, Quality, Reading, Scope, Watts};
use wattbar_engine::PublishedState;

/// A plug that reads 3600 W from the moment it is switched on, and says why not before.
struct Plug(Arc<AtomicBool>);

impl Source for Plug {
    fn id(&self) -> &str {
        "wall-meter"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::Wall])
    }
    fn read(&mut self, at: wattbar_core::Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        if !self.0.load(Ordering::SeqCst) {
            return Err(wattbar_core::Error::Transient("not plugged in yet".into()));
        }
        Ok(vec![Reading::power(
            Domain::Wall,
            Watts(3600.0),
            "wall-meter",
            Quality::Measured,
            at,
        )])
    }
}

async fn wait_until(
    rx: &mut tokio::sync::watch::Receiver<Arc<PublishedState>>,
    what: &str,
    f: impl FnMut(&Arc<PublishedState>) -> bool,
) -> Arc<PublishedState> {
    match tokio::time::timeout(Duration::from_secs(30), rx.wait_for(f)).await {
        Ok(Ok(p)) => p.clone(),
        _ => panic!("timed out waiting for {what}"),
    }
}

fn today_in(p: &PublishedState, scope: Scope) -> f64 {
    p.kept
        .totals
        .as_ref()
        .map_or(0.0, |t| t.today.joules_in(Some(scope)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_split_between_sensors_and_plug_counts_once_across_scopes_in_every_one_figure() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plugged = Arc::new(AtomicBool::new(false));
    let trace = parse_trace("t,watts\n0,3600\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(Plug(Arc::clone(&plugged))),
        Box::new(ReplaySource::new(trace)),
    ];
    // A daily budget of 6 kJ: about 4 kJ of sensors and 4 kJ at the wall reach it together,
    // neither alone.
    let budget_kwh = 6_000.0 / 3.6e6;
    let prefs = Preferences {
        interval_ms: 100,
        daily_budget_kwh: Some(budget_kwh),
        ..Preferences::default()
    };
    let mut config = EngineConfig::new(prefs).with_store(dir.path().join("wattbar.db"));
    config.batch_interval = Duration::from_millis(200);
    let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
    let mut rx = engine.subscribe();
    let sensors = wait_until(&mut rx, "the sensors' part", |p| {
        today_in(p, Scope::System) >= 3_000.0
    })
    .await;
    assert!(sensors.kept.alerts.is_empty(), "{:?}", sensors.kept.alerts);
    plugged.store(true, Ordering::SeqCst);
    // The budget is crossed by the day's sum, while the wall's part alone is below it.
    let crossed = wait_until(&mut rx, "the budget", |p| !p.kept.alerts.is_empty()).await;
    let wall = today_in(&crossed, Scope::Wall);
    let system = today_in(&crossed, Scope::System);
    assert!(
        wall > 0.0 && wall < 6_000.0 && system < 6_000.0,
        "{wall} J at the wall, {system} J of sensors"
    );
    assert_eq!(crossed.kept.alerts[0].kind, "daily-kwh");
    let today = crossed
        .kept
        .totals
        .as_ref()
        .map(|t| t.today.across_scopes())
        .unwrap_or_default();
    assert!((today.joules - (wall + system)).abs() < 1e-6, "{today:?}");
    assert_eq!(today.scopes, vec![Some(Scope::Wall), Some(Scope::System)]);
    assert!((crossed.kept.alerts[0].used - today.kwh).abs() < 1e-12);

    // The fleet's summary: today across scopes, labelled with both.
    let summary = wattbar_serve::summary::Summary::new(&crossed, None, wattbar_engine::unix_now());
    let s_today = summary.today.unwrap_or_else(|| panic!("no today"));
    assert!((s_today.kwh - today.kwh).abs() < 1e-12);
    assert_eq!(s_today.scopes, today.scopes);
    assert_eq!(s_today.scope, Some(Scope::Wall));
    // /metrics: one today series per scope, whose sum is the same figure.
    let text = wattbar_serve::metrics::to_prometheus_text(&wattbar_serve::metrics::render(
        &crossed,
        wattbar_engine::unix_now(),
        None,
    ));
    let series: f64 = ["wall", "system"]
        .iter()
        .map(|s| {
            text.lines()
                .find(|l| l.starts_with(&format!("wattbar_today_energy_joules{{scope=\"{s}\"}}")))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no today series of {s} in\n{text}"))
        })
        .sum();
    assert!((series - today.joules).abs() < 1e-6, "{series} J");

    // The lifetime counters others read: Home Assistant's energy and OTLP's hw.host.energy are
    // both scopes' committed energy, summed; neither goes back when the scope changed.
    let lifetime: f64 = crossed
        .kept
        .committed
        .by_scope
        .iter()
        .map(|(_, j)| *j)
        .sum();
    let committed_wall = crossed
        .kept
        .committed
        .by_scope
        .iter()
        .find(|(s, _)| *s == Some(Scope::Wall))
        .map_or(0.0, |(_, j)| *j);
    assert!(committed_wall > 0.0 && lifetime > committed_wall);
    let mqtt = wattbar_serve::mqtt::discovery::state(&crossed);
    let kwh = mqtt["energy_kwh"].as_f64().unwrap_or(f64::NAN);
    assert!((kwh - lifetime / 3.6e6).abs() < 1e-12, "{mqtt}");
    let otlp = wattbar_serve::otlp::request(&crossed, "box", 0, 1);
    let host_energy = otlp.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .find(|m| m.name == "hw.host.energy")
        .and_then(|m| match &m.data {
            Some(opentelemetry_proto::tonic::metrics::v1::metric::Data::Sum(s)) => {
                s.data_points.first().and_then(|p| match p.value {
                    Some(
                        opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(
                            v,
                        ),
                    ) => Some(v),
                    _ => None,
                })
            }
            _ => None,
        });
    assert_eq!(host_energy, Some(lifetime));
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}
