use super::*;

/// xorshift64: noise that is the same on every run.
struct Noise(u64);

impl Noise {
    fn new(seed: u64) -> Noise {
        Noise(seed.max(1))
    }
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
}

/// The machine the synthetic traces come from: the wall draws 1.6 W per components watt (a
/// supply and the parts no sensor sees) over a 25 W floor.
fn truth(components: f64) -> f64 {
    1.6 * components + 25.0
}

/// Components watts at each second of `seconds`: levels across 10–90 W, each held 60–120 s.
fn sweep(seconds: usize, noise: &mut Noise) -> Vec<f64> {
    let levels = [10.0, 50.0, 30.0, 90.0, 20.0, 70.0, 40.0, 80.0, 60.0];
    let mut out = Vec::with_capacity(seconds);
    for level in levels.iter().cycle() {
        let hold = noise.between(60.0, 121.0) as usize;
        for _ in 0..hold {
            if out.len() == seconds {
                return out;
            }
            out.push(*level);
        }
    }
    out
}

fn pair(t: f64, reference: f64, components: f64) -> Pair {
    Pair {
        t,
        reference: Watts(reference),
        components: Watts(components),
    }
}

/// `seconds` of 1 s pairs from t = 0: the sweep, the reference the truth ±2 % uniform noise.
fn synthetic(seconds: usize, seed: u64) -> Vec<Pair> {
    let mut noise = Noise::new(seed);
    sweep(seconds + 1, &mut noise)
        .into_iter()
        .enumerate()
        .map(|(t, c)| pair(t as f64, truth(c) * noise.between(0.98, 1.02), c))
        .collect()
}

/// A ramp at 1 s from `from` to `to` seconds: components = t W, reference = 2t + 10 W.
fn ramp(from: u32, to: u32) -> impl Iterator<Item = Pair> {
    (from..=to).map(|t| pair(t as f64, 2.0 * t as f64 + 10.0, t as f64))
}

fn starts(windows: &[Window]) -> Vec<f64> {
    windows.iter().map(|w| w.start).collect()
}

fn fitted(windows: &[Window]) -> Fit {
    match fit(windows) {
        Ok(f) => f,
        Err(refusal) => panic!("refused: {refusal}"),
    }
}

fn window(components_watts: f64, reference_watts: f64) -> Window {
    Window {
        start: 0.0,
        seconds: MIN_WINDOW_SECONDS,
        reference_watts,
        components_watts,
    }
}

fn close(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= tolerance
}

#[test]
fn a_100_s_ramp_at_1_s_gives_three_30_s_windows_and_drops_the_last_10_s() {
    // On a ramp the trapezoid mean is the mean of the ends: components (0 + 30) / 2 = 15 W,
    // reference 2 × 15 + 10 = 40 W; then 45 and 100 W, 75 and 160 W. 90–100 s is short.
    let pairs: Vec<Pair> = ramp(0, 100).collect();
    let got = windows(&pairs);
    let want = [(0.0, 15.0, 40.0), (30.0, 45.0, 100.0), (60.0, 75.0, 160.0)];
    assert_eq!(got.len(), 3, "{got:?}");
    for (w, (start, c, r)) in got.iter().zip(want) {
        assert_eq!(w.start, start);
        assert_eq!(w.seconds, 30.0);
        assert!(close(w.components_watts, c, 1e-9), "{w:?}");
        assert!(close(w.reference_watts, r, 1e-9), "{w:?}");
    }
}

#[test]
fn a_gap_over_10_s_splits_windows_and_one_of_10_s_does_not() {
    // 0–40, then nothing until 61: 0–30 is a window, 30–40 is dropped, 61–91 is the next.
    let pairs: Vec<Pair> = ramp(0, 40).chain(ramp(61, 100)).collect();
    assert_eq!(starts(&windows(&pairs)), [0.0, 61.0]);
    // 0–20, then 30 onwards: the 10 s step from 20 to 30 lies inside the first window, whose
    // components are still the ramp's mean, 15 W.
    let pairs: Vec<Pair> = ramp(0, 20).chain(ramp(30, 60)).collect();
    let got = windows(&pairs);
    assert_eq!(starts(&got), [0.0, 30.0]);
    assert!(close(got[0].components_watts, 15.0, 1e-9), "{got:?}");
}

#[test]
fn time_going_backwards_starts_a_new_window() {
    // 0–40, then back to 35: 30–40 is dropped, and 35–65 is a window of its own.
    let pairs: Vec<Pair> = ramp(0, 40).chain(ramp(35, 80)).collect();
    assert_eq!(starts(&windows(&pairs)), [0.0, 35.0]);
}

#[test]
fn a_nan_or_negative_pair_breaks_the_window_and_is_skipped() {
    // The bad pair at 45 s ends 30–44 (dropped); the next window starts at 46, ends at 76.
    for bad in [pair(45.0, f64::NAN, 45.0), pair(45.0, 100.0, -1.0)] {
        let pairs: Vec<Pair> = ramp(0, 100)
            .map(|p| if p.t == 45.0 { bad } else { p })
            .collect();
        assert_eq!(starts(&windows(&pairs)), [0.0, 46.0], "{bad:?}");
    }
}

#[test]
fn a_repeated_time_is_skipped_without_breaking_the_window() {
    // A second pair at 10 s with other figures adds no interval: 0–30 still means 15 and 40 W.
    let pairs: Vec<Pair> = ramp(0, 10)
        .chain([pair(10.0, 500.0, 500.0)])
        .chain(ramp(11, 30))
        .collect();
    let got = windows(&pairs);
    assert_eq!(starts(&got), [0.0]);
    assert!(close(got[0].components_watts, 15.0, 1e-9), "{got:?}");
    assert!(close(got[0].reference_watts, 40.0, 1e-9), "{got:?}");
}

#[test]
fn a_line_of_1_6_times_the_components_plus_25_w_is_recovered_within_2_percent() {
    // 30 minutes at 1 s: 60 windows, 15 of them held out.
    let ws = windows(&synthetic(1800, 7));
    assert_eq!(ws.len(), 60);
    let f = fitted(&ws);
    assert_eq!(f.windows, 60);
    assert!(close(f.offset_watts, 25.0, 0.02 * 25.0), "{f:?}");
    assert!(close(f.slope, 1.6, 0.02 * 1.6), "{f:?}");
    assert!(f.r2 > 0.99, "{f:?}");
    assert!(f.heldout_mape <= 0.03, "{f:?}");
    assert!(f.heldout_max_ape >= f.heldout_mape, "{f:?}");
    assert!(f.components_min_watts >= 10.0 && f.components_max_watts <= 90.0);
    // At 50 W the machine draws 1.6 × 50 + 25 = 105 W.
    assert!(
        close(f.predict(Watts(50.0)).0, 105.0, 0.02 * 105.0),
        "{f:?}"
    );
    for w in ws.iter().skip(HOLDOUT_EVERY - 1).step_by(HOLDOUT_EVERY) {
        let c = Watts(w.components_watts);
        let off = (f.predict(c).0 - truth(c.0)).abs();
        assert!(
            off <= f.bound(c).0,
            "{w:?}: off by {off} W, bound {:?}",
            f.bound(c)
        );
    }
}

#[test]
fn held_out_windows_do_not_move_the_line_and_set_the_bound() {
    // Components 10, 20, … 120 W, reference 2c + 10 W, except window 3 (40 W, held out), which
    // reads 100 W where the line gives 90: the line is still 10 + 2c, its APE is 10 / 100 = 0.1
    // and the other two held out (7 and 11) are exact: MAPE 0.1 / 3, max 0.1.
    let ws: Vec<Window> = (0..12)
        .map(|i| {
            let c = 10.0 * (i + 1) as f64;
            window(c, if i == 3 { 100.0 } else { 2.0 * c + 10.0 })
        })
        .collect();
    let f = fitted(&ws);
    assert!(close(f.offset_watts, 10.0, 1e-9), "{f:?}");
    assert!(close(f.slope, 2.0, 1e-12), "{f:?}");
    assert!(close(f.r2, 1.0, 1e-12), "{f:?}");
    assert!(close(f.heldout_mape, 0.1 / 3.0, 1e-12), "{f:?}");
    assert!(close(f.heldout_max_ape, 0.1, 1e-12), "{f:?}");
    assert_eq!(
        (f.components_min_watts, f.components_max_watts),
        (10.0, 120.0)
    );
    // At 40 W: 90 W, give or take 9.
    assert!(close(f.predict(Watts(40.0)).0, 90.0, 1e-9));
    assert!(close(f.bound(Watts(40.0)).0, 9.0, 1e-9));
}

#[test]
fn eleven_windows_are_too_few_and_the_refusal_names_both_numbers() {
    // 335 s: eleven windows up to 330 s, and 5 s dropped.
    let ws = windows(&synthetic(335, 11));
    assert_eq!(ws.len(), 11);
    let refusal = fit(&ws);
    assert_eq!(refusal, Err(Refusal::TooFewWindows { have: 11, need: 12 }));
    assert_eq!(
        refusal.map_err(|r| r.to_string()),
        Err("12 windows of at least 30 s are needed; 11 so far".to_string())
    );
}

#[test]
fn a_flat_load_is_too_narrow_a_range() {
    // 40 W ± 2 % for 20 minutes: the window means stay within a watt of 40, and a quarter of
    // 40 W, 10 W, is needed.
    let mut noise = Noise::new(3);
    let pairs: Vec<Pair> = (0..=1200)
        .map(|t| {
            let c = 40.0 * noise.between(0.98, 1.02);
            pair(t as f64, truth(c), c)
        })
        .collect();
    let refusal = fit(&windows(&pairs));
    let Err(Refusal::TooNarrowRange {
        span_watts,
        need_watts,
    }) = refusal
    else {
        panic!("{refusal:?}");
    };
    assert!(span_watts < 1.0, "{span_watts}");
    assert!(close(need_watts, 10.0, 0.1), "{need_watts}");
    let said = refusal.map_err(|r| r.to_string()).err().unwrap_or_default();
    assert!(said.contains("at least 10.0 W is needed"), "{said}");
}

#[test]
fn a_reference_unrelated_to_the_components_is_a_poor_fit() {
    let mut noise = Noise::new(5);
    let pairs: Vec<Pair> = synthetic(1200, 5)
        .into_iter()
        .map(|p| pair(p.t, noise.between(50.0, 150.0), p.components.0))
        .collect();
    let refusal = fit(&windows(&pairs));
    let Err(Refusal::PoorFit { r2, need }) = refusal else {
        panic!("{refusal:?}");
    };
    assert!(r2 < MIN_R2, "{r2}");
    assert_eq!(need, 0.9);
    let said = refusal.map_err(|r| r.to_string()).err().unwrap_or_default();
    assert!(said.contains("at least 0.90 is needed"), "{said}");
}

#[test]
fn components_that_never_change_in_the_training_windows_are_degenerate() {
    // The held-out windows (3, 7, 11) at 80 W give the range its span; the nine that fit the
    // line all sit at 40 W, through which any slope passes.
    let ws: Vec<Window> = (0..12)
        .map(|i| {
            let c = if i % 4 == 3 { 80.0 } else { 40.0 };
            window(c, truth(c))
        })
        .collect();
    assert_eq!(fit(&ws), Err(Refusal::Degenerate));
    // All at 0 W: no range is needed of nothing, and nothing is fitted either.
    assert_eq!(fit(&[window(0.0, 25.0); 12]), Err(Refusal::Degenerate));
}

#[test]
fn a_held_out_reference_of_0_w_has_no_percentage_error_and_is_refused() {
    let ws: Vec<Window> = (0..12)
        .map(|i| {
            let c = 10.0 * (i + 1) as f64;
            window(c, if i == 3 { 0.0 } else { truth(c) })
        })
        .collect();
    assert_eq!(fit(&ws), Err(Refusal::NonFinite));
}

#[test]
fn a_fit_and_a_refusal_serialize_with_named_fields() {
    let f = fitted(&windows(&synthetic(1800, 7)));
    let json = serde_json::to_value(f).unwrap_or_default();
    for field in [
        "offset_watts",
        "slope",
        "r2",
        "heldout_mape",
        "heldout_max_ape",
    ] {
        assert!(
            json.get(field).is_some_and(|v| v.is_f64()),
            "{field}: {json}"
        );
    }
    assert_eq!(json.get("windows"), Some(&serde_json::json!(60)));
    let refusal = Refusal::TooFewWindows { have: 7, need: 12 };
    assert_eq!(
        serde_json::to_value(refusal).unwrap_or_default(),
        serde_json::json!({"reason": "too_few_windows", "have": 7, "need": 12})
    );
}

#[test]
fn the_learner_cuts_the_same_windows_as_windows_and_fits_them() {
    // Steps of 0.5–1.5 s, a 20 s gap every 400 samples and a NaN every 333: every way a
    // window ends.
    let mut noise = Noise::new(13);
    let mut t = 0.0;
    let pairs: Vec<Pair> = synthetic(2000, 13)
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            t += if i % 400 == 399 {
                20.0
            } else {
                noise.between(0.5, 1.5)
            };
            let reference = if i % 333 == 332 {
                f64::NAN
            } else {
                p.reference.0
            };
            pair(t, reference, p.components.0)
        })
        .collect();
    let mut learner = Learner::new();
    for p in &pairs {
        learner.observe(p.t, Some(p.reference), Some(p.components));
    }
    let want = windows(&pairs);
    assert!(want.len() > MIN_WINDOWS, "{}", want.len());
    assert_eq!(learner.windows(), want.as_slice());
    assert_eq!(learner.fit(), fit(&want));
    assert!(learner.fit().is_ok(), "{:?}", learner.fit());
}

#[test]
fn a_missing_side_closes_the_learners_window() {
    // Reference gone at 45 s: 30–44 dropped, 46–76 a window. Components gone at 100 s: 76–99
    // dropped, 101–131 a window.
    let mut learner = Learner::new();
    for p in ramp(0, 131) {
        let reference = (p.t != 45.0).then_some(p.reference);
        let components = (p.t != 100.0).then_some(p.components);
        learner.observe(p.t, reference, components);
    }
    assert_eq!(starts(learner.windows()), [0.0, 46.0, 101.0]);
}

#[test]
fn the_learner_keeps_the_last_240_windows() {
    // 7500 s is 250 windows: the first ten (0–300 s) are forgotten.
    let mut learner = Learner::new();
    for p in ramp(0, 7500) {
        learner.observe(p.t, Some(p.reference), Some(p.components));
    }
    let kept = learner.windows();
    assert_eq!(kept.len(), KEEP_WINDOWS);
    assert_eq!(kept.first().map(|w| w.start), Some(300.0));
    assert_eq!(kept.last().map(|w| w.start), Some(7470.0));
}

#[test]
fn reset_forgets_the_windows_and_the_window_in_progress() {
    // Without the reset 30–60 would close at 60 s; after it the next window starts at 41 s and
    // has not closed by 70.
    let mut learner = Learner::new();
    for p in ramp(0, 40) {
        learner.observe(p.t, Some(p.reference), Some(p.components));
    }
    assert_eq!(learner.windows().len(), 1);
    learner.reset();
    for p in ramp(41, 70) {
        learner.observe(p.t, Some(p.reference), Some(p.components));
    }
    assert!(learner.windows().is_empty(), "{:?}", learner.windows());
}

fn learned_at_the_wall() -> Learned {
    Learned {
        fit: Fit {
            offset_watts: 25.0,
            slope: 1.6,
            r2: 0.99,
            heldout_mape: 0.01,
            heldout_max_ape: 0.02,
            windows: 12,
            components_min_watts: 10.0,
            components_max_watts: 90.0,
        },
        reference: Scope::Wall,
        covers: vec!["cpu-package".into()],
        fitted_unix: 1_700_000_000.0,
    }
}

fn snapshot(readings: Vec<Reading>) -> Snapshot {
    Snapshot::of(crate::reading::Stamp::default(), readings)
}

fn cpu(watts: f64) -> Reading {
    Reading::power(
        Domain::Cpu,
        Watts(watts),
        "rapl",
        Quality::Measured,
        crate::reading::Stamp::default(),
    )
}

#[test]
fn with_the_plug_gone_the_parts_stand_in_for_the_wall_calibrated_with_a_bound() {
    // 40 W of CPU package: 25 + 1.6 × 40 = 89 W at the wall, ± 2 % = 1.78 W.
    let learned = learned_at_the_wall();
    let s = learned.stand_in(snapshot(vec![cpu(40.0)]));
    let head = s.headline.clone().unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.quality, Quality::Calibrated);
    assert_eq!(head.source, CALIBRATED_SOURCE);
    assert!((head.watts.unwrap_or_default().0 - 89.0).abs() < 1e-9);
    assert_eq!(s.coverage().map(|c| c.scope), Some(Scope::Wall));
    let bound = learned.bound(&s).unwrap_or_default().0;
    assert!((bound - 1.78).abs() < 1e-9, "{bound}");
    // Not a reading of the plug: nothing at the wall to compare the sensors with.
    assert_eq!(s.wall_watts(), None);
}

#[test]
fn a_live_plug_or_other_parts_leave_the_headline_as_measured() {
    let learned = learned_at_the_wall();
    let wall = Reading::power(
        Domain::Wall,
        Watts(95.0),
        "wall-meter",
        Quality::Measured,
        crate::reading::Stamp::default(),
    );
    let live = learned.stand_in(snapshot(vec![cpu(40.0), wall]));
    assert_eq!(live.headline_watts(), Some(Watts(95.0)));
    assert_eq!(live.headline.map(|h| h.quality), Some(Quality::Measured));
    // A GPU joined the sum: the line was not learned on these parts.
    let gpu = Reading::power(
        Domain::Gpu,
        Watts(100.0),
        "nvml",
        Quality::Measured,
        crate::reading::Stamp::default(),
    )
    .with_device("0");
    let other = learned.stand_in(snapshot(vec![cpu(40.0), gpu]));
    assert_eq!(other.headline_watts(), Some(Watts(140.0)));
    assert_eq!(learned.bound(&other), None);
}
