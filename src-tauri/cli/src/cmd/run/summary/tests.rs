use super::*;
use wattbar_core::tariff::Tariffs;

#[test]
fn stats_are_hyperfines_with_a_sample_standard_deviation() {
    // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, 32/7 → sd 2.138.
    let s = Stats::of(&[9.0, 2.0, 4.0, 4.0, 5.0, 4.0, 5.0, 7.0]).unwrap_or_else(|| panic!());
    assert_eq!((s.mean, s.median, s.min, s.max), (5.0, 4.5, 2.0, 9.0));
    let sd = s.stddev.unwrap_or_else(|| panic!());
    assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{sd}");
    assert_eq!(Stats::of(&[3.0]).and_then(|s| s.stddev), None);
    assert_eq!(Stats::of(&[]), None);
}

fn window(from: f64, to: f64, joules: Option<f64>, covered: f64) -> WindowEnergy {
    WindowEnergy {
        from,
        to,
        joules,
        bound_joules: None,
        by_domain: joules
            .map(|j| vec![("cpu".into(), j / 2.0)])
            .unwrap_or_default(),
        mean_watts: joules.map(|j| j / ((to - from) * covered)),
        samples: 10,
        covered_fraction: covered,
        quality: Some(Quality::Measured),
        sources: vec!["rapl".into()],
        coverage: None,
    }
}

fn pricing() -> Pricing {
    Pricing {
        prices: wattbar_core::Pricing::fixed(
            Tariffs::flat(wattbar_core::Price::new(0.36).unwrap_or_else(|e| panic!("{e}"))),
            Some(400.0),
        ),
        currency: "EUR".into(),
    }
}

fn cx<'a>(
    baseline: Option<&'a Baseline>,
    pricing: &'a Pricing,
    interval_ms: u64,
) -> RunContext<'a> {
    RunContext {
        run: 1,
        command: "sleep 2".into(),
        exit_code: 0,
        outcome: "exited with 0".into(),
        interval: Duration::from_millis(interval_ms),
        baseline,
        pricing,
        cpu_busy_percent: None,
        attributed: Default::default(),
        gpus: (Vec::new(), Some("no NVML".into())),
        unavailable: "rapl: no permission".into(),
    }
}

#[test]
fn net_energy_takes_the_idle_draw_over_the_runs_own_length() {
    // Idle 40 W (cpu 15 W) for 5 s; the run: 300 W for 600 s = 180 kJ = 0.05 kWh,
    // net 180 kJ − 40 W × 600 s = 156 kJ; cpu 90 kJ − 15 W × 600 s = 81 kJ.
    let base = Baseline::of(
        &WindowEnergy {
            by_domain: vec![("cpu".into(), 75.0)],
            ..window(0.0, 5.0, Some(200.0), 1.0)
        },
        "5 s before the first run".into(),
    );
    assert_eq!(base.mean_watts, Some(40.0));
    let p = pricing();
    let r = run_figures(
        cx(Some(&base), &p, 100),
        &window(100.0, 700.0, Some(180_000.0), 1.0),
        &[],
        vec![],
    );
    assert_eq!(r.net_joules, Some(156_000.0));
    assert_eq!(r.by_domain[0].net_joules, Some(81_000.0));
    assert_eq!(r.mean_watts, Some(300.0));
    // 0.05 kWh at 0.36 EUR/kWh = 0.018 EUR; at 400 g/kWh = 20 g.
    assert!((r.cost.unwrap_or_default() - 0.018).abs() < 1e-12);
    assert!((r.carbon_g.unwrap_or_default() - 20.0).abs() < 1e-9);
    assert!(!r.coarse && r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn nothing_measured_is_null_with_the_reason_not_zero() {
    let p = pricing();
    let r = run_figures(cx(None, &p, 100), &window(0.0, 5.0, None, 0.0), &[], vec![]);
    assert_eq!((r.gross_joules, r.cost, r.mean_watts), (None, None, None));
    assert!(
        r.warnings.iter().any(|w| w.contains("rapl: no permission")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_run_shorter_than_ten_periods_is_coarse() {
    let p = pricing();
    // 2 s at a 1 s interval: two periods.
    let r = run_figures(
        cx(None, &p, 1000),
        &window(0.0, 2.0, Some(200.0), 1.0),
        &[],
        vec![],
    );
    assert!(r.coarse);
    // 2 s at 100 ms: twenty periods.
    let r = run_figures(
        cx(None, &p, 100),
        &window(0.0, 2.0, Some(200.0), 1.0),
        &[],
        vec![],
    );
    assert!(!r.coarse);
}

/// A state at `at` after `session` joules, `battery` of them from the battery, which wore
/// `wear` EUR.
fn state_on(at: f64, session: f64, battery: f64, wear: f64, on_battery: bool) -> State {
    State {
        at: Some(at),
        watts: Some(20.0),
        quality: Some(Quality::Measured),
        source: Some("replay".into()),
        domain: Some("system".into()),
        breakdown: Vec::new(),
        unavailable: Vec::new(),
        session_joules: session,
        battery: Some(wattbar_serve::view::BatteryDrawn {
            on_battery,
            joules: battery,
            unpriced_joules: 0.0,
            wear,
            currency: "EUR".into(),
            per_kwh: None,
            unpriced_because: None,
        }),
        interval_ms: 1000,
        period_ms: Some(1000),
    }
}

/// A run of `joules` from `from` to `to` over `states`, at the test's tariff, and its battery
/// figure.
fn on_battery(states: &[State], from: f64, to: f64, joules: f64) -> (RunFigures, BatteryFigure) {
    let p = pricing();
    let r = run_figures(
        cx(None, &p, 1000),
        &window(from, to, Some(joules), 1.0),
        states,
        vec![],
    );
    let b = r
        .battery
        .clone()
        .unwrap_or_else(|| panic!("no battery figure"));
    (r, b)
}

#[test]
fn a_run_on_battery_wears_it_and_costs_the_grid_nothing() {
    // 20 W × 1,800 s = 36,000 J = 0.010 kWh from a 70 Wh battery at 200 EUR for 1,000
    // cycles: 0.010 × 200 ÷ 70 = 0.02857 EUR of wear, and 0 EUR of grid.
    let wear = 0.010 * 200.0 / 70.0;
    let states = [
        state_on(100.0, 500.0, 500.0, 500.0 / 36_000.0 * wear, true),
        state_on(1900.0, 36_500.0, 36_500.0, 36_500.0 / 36_000.0 * wear, true),
    ];
    let (r, b) = on_battery(&states, 100.0, 1900.0, 36_000.0);
    assert!((b.joules - 36_000.0).abs() < 1e-9, "{b:?}");
    assert_eq!(b.share_percent, 100.0);
    assert!((b.wear.unwrap_or_default() - wear).abs() < 1e-12, "{b:?}");
    assert_eq!(r.cost, Some(0.0));
    let text = text::run_text(&r, None);
    assert!(
        text.contains("  on battery   36.0 kJ (10.000 Wh) (100 %), wear 0.028571 EUR\n"),
        "{text}"
    );
}

#[test]
fn a_run_plugged_in_halfway_splits_its_energy_by_what_the_battery_gave() {
    // Over the run's states the session drew 2,000 J, 500 of them from the battery (25 %),
    // which wore 0.001 EUR. The window's 1,800 J: 450 J from the battery, wearing 0.0009 EUR;
    // the grid's 1,350 J = 0.000375 kWh at 0.36 EUR/kWh = 0.000135 EUR.
    let states = [
        state_on(0.0, 1_000.0, 200.0, 0.0004, true),
        state_on(90.0, 3_000.0, 700.0, 0.0014, false),
    ];
    let (r, b) = on_battery(&states, 0.0, 90.0, 1_800.0);
    assert!((b.joules - 450.0).abs() < 1e-9, "{b:?}");
    assert!((b.share_percent - 25.0).abs() < 1e-9);
    assert!((b.wear.unwrap_or_default() - 0.0009).abs() < 1e-12, "{b:?}");
    assert!(
        (r.cost.unwrap_or_default() - 0.000135).abs() < 1e-12,
        "{:?}",
        r.cost
    );
    // A machine without a battery gives no figure at all.
    let mains: Vec<State> = states
        .iter()
        .cloned()
        .map(|s| State { battery: None, ..s })
        .collect();
    let p = pricing();
    let r = run_figures(
        cx(None, &p, 1000),
        &window(0.0, 90.0, Some(1_800.0), 1.0),
        &mains,
        vec![],
    );
    assert_eq!(r.battery, None);
}
