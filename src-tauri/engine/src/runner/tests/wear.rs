//! A laptop on its battery: the energy is the battery's, priced as wear and not by the grid,
//! and both survive a restart.

use super::*;
use wattbar_core::battery::{Cycles, Health, Raw};
use wattbar_core::{Battery, Domain, Reading};

/// A battery discharging at 20 W: 70 Wh designed, 63 Wh full, 194 cycles.
struct Laptop {
    health: Arc<[Health]>,
}

impl Laptop {
    fn new() -> Self {
        let h = Health::from_raw(
            "BAT0",
            Raw::Energy {
                design_wh: Some(70.0),
                full_wh: Some(63.0),
            },
            Cycles::Counted(194),
        );
        Laptop {
            health: Arc::from(vec![h]),
        }
    }
}

impl Source for Laptop {
    fn id(&self) -> &str {
        "power-supply"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        Ok(vec![Reading::power(
            Domain::System,
            Watts(20.0),
            "power-supply",
            Quality::Measured,
            at,
        )])
    }
    fn battery(&self) -> Option<Battery> {
        Some(Battery {
            on_battery: true,
            percent: Some(80.0),
        })
    }
    fn battery_health(&self) -> Option<Arc<[Health]>> {
        Some(Arc::clone(&self.health))
    }
}

fn laptop() -> Chain {
    Chain::new(vec![Box::new(Laptop::new()) as Box<dyn Source>])
}

fn prefs() -> Preferences {
    Preferences {
        price_per_kwh: Price::new(0.30).unwrap_or_default(),
        battery_price: Some(200.0),
        battery_rated_cycles: 1000,
        ..Preferences::default()
    }
}

#[tokio::test(start_paused = true)]
async fn thirty_minutes_at_20_w_on_battery_wear_0_0286_and_cost_the_grid_nothing() {
    // 20 W × 1,800 s = 36,000 J = 0.010 kWh; at 200 ÷ (1,000 × 0.070 kWh) = 2.857 a kWh that
    // wears 0.02857. The grid's cost of the stretch: 0.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let engine = start(laptop(), config(prefs()).with_store(db.clone()));
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| p.wear.session.joules >= 36_000.0 - 1e-6).await;
    let worn = &p.wear.session;
    assert!((worn.joules - 36_000.0).abs() < 1e-6, "{worn:?}");
    assert!((worn.wear - 0.010 * 200.0 / 70.0).abs() < 1e-9, "{worn:?}");
    assert_eq!(worn.unpriced_joules, 0.0);
    assert!((p.energy.session.joules.0 - 36_000.0).abs() < 1e-6);
    assert_eq!(p.energy.session.cost, 0.0);
    assert_eq!(p.wear.per_kwh.map(|r| (r * 1e6).round()), Some(2_857_143.0));
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));

    // After a restart the ledger still holds both: today's wear and the lifetime counter, and
    // a grid cost of 0 for the day.
    let engine = start(laptop(), config(prefs()).with_store(db));
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| !p.kept.committed.wear.is_empty()).await;
    let lifetime = &p.kept.committed.wear[0];
    assert_eq!(lifetime.currency, "EUR");
    assert!(lifetime.wear >= 0.010 * 200.0 / 70.0 - 1e-9, "{lifetime:?}");
    assert!(lifetime.joules >= 36_000.0 - 1e-6);
    let today = &p.kept.committed.wear_today[0];
    assert!(today.wear >= 0.010 * 200.0 / 70.0 - 1e-9, "{today:?}");
    assert_eq!(p.kept.totals.as_ref().map(|t| t.today.cost), Some(0.0));
    // The report beside the grid's cost of 0: the battery's 0.010 kWh and its 0.03 EUR of wear
    // (the second run's few samples add less than a rounding of either).
    // The engine's clock starts at 1,800,000,000 (`config`); the first run's half hour after it.
    let report = engine
        .reader()
        .report(1_800_000_000.0 - 60.0, 1_800_000_000.0 + 7200.0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report
            .subtitle
            .contains("· 0.00 EUR over the days shown; on battery 0.010 kWh, wear 0.03 EUR"),
        "{}",
        report.subtitle
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn without_a_battery_price_the_energy_is_counted_and_its_wear_not_priced() {
    let engine = start(
        laptop(),
        config(Preferences {
            battery_price: None,
            ..prefs()
        }),
    );
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| p.wear.session.joules >= 200.0).await;
    assert_eq!(p.wear.session.wear, 0.0);
    assert_eq!(p.wear.session.unpriced_joules, p.wear.session.joules);
    assert_eq!(p.wear.per_kwh, None);
    assert_eq!(
        p.wear.unpriced_because.as_deref(),
        Some("no battery_price is set")
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_battery_priced_on_its_own_wears_at_its_own_rate() {
    // BAT0 at 100 EUR for 500 cycles and no machine price: 100 ÷ (500 × 0.070 kWh) = 2.857 a
    // kWh, the same as 200 EUR for 1,000; 20 W for 30 min wears 0.0286.
    let mut own = std::collections::BTreeMap::new();
    own.insert(
        "BAT0".to_string(),
        wattbar_core::battery::BatteryPricing {
            price: 100.0,
            rated_cycles: Some(500),
        },
    );
    let engine = start(
        laptop(),
        config(Preferences {
            battery_price: None,
            battery_prices: own,
            ..prefs()
        }),
    );
    let mut rx = engine.subscribe();
    let p = wait_for(&mut rx, |p| p.wear.session.joules >= 36_000.0 - 1e-6).await;
    assert!((p.wear.session.wear - 0.010 * 100.0 / (500.0 * 0.070)).abs() < 1e-9);
    assert_eq!(p.wear.unpriced_because, None);
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_daily_cost_budget_counts_the_wear_only_when_asked() {
    // 0.01 EUR a day: the grid costs 0 on battery, the wear 2.857 a kWh reaches it after
    // 0.0035 kWh = 12,600 J, 630 s at 20 W; without budgets_count_wear 30 minutes give nothing.
    for counts in [true, false] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = start(
            laptop(),
            config(Preferences {
                daily_budget_cost: Some(0.01),
                budgets_count_wear: counts,
                ..prefs()
            })
            .with_store(dir.path().join("wattbar.db")),
        );
        let mut rx = engine.subscribe();
        let p = wait_for(&mut rx, |p| {
            !p.kept.alerts.is_empty() || p.wear.session.joules >= 36_000.0
        })
        .await;
        let kinds: Vec<&str> = p.kept.alerts.iter().map(|a| a.kind).collect();
        if counts {
            assert_eq!(kinds, ["daily-cost"], "{:?}", p.kept.alerts);
            let used = p.kept.alerts[0].used;
            assert!((0.01..0.012).contains(&used), "{used}");
            assert!(p.wear.session.joules >= 12_600.0 - 1e-6);
        } else {
            assert!(kinds.is_empty(), "{kinds:?}");
        }
        engine.stop();
    }
}
