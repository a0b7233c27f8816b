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
