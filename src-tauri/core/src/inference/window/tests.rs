//! Windows of energy and their bounds: on counters read every second, and on a simulated plug
//! that answers once a second while the sampler reads every 100 ms
//! ([`sim`](crate::counter::stepped::sim)).

use super::*;
use crate::counter::stepped::sim::{run, Plug, WH};
use crate::inference::interval::{trace, Answered};
use crate::meter::Method;

#[test]
fn a_window_partly_measured_says_how_much_it_covers_and_how_well() {
    let i = trace(0.0, &[100.0, 200.0]);
    // Wall 1.7e9 + 0.5 → 1.7e9 + 4.0: 0.5 s × 100 + 1 s × 200 = 250 J over 1.5 s of 3.5 s.
    let e = window_energy(&i, 1.7e9 + 0.5, 1.7e9 + 4.0);
    assert!((e.joules.unwrap_or(0.0) - 250.0).abs() < 1e-6);
    assert!((e.mean_watts.unwrap_or(0.0) - 250.0 / 1.5).abs() < 1e-6);
    assert!((e.covered_fraction - 1.5 / 3.5).abs() < 1e-9);
    assert_eq!(e.samples, 2);
    assert_eq!(e.by_domain, vec![("gpu".to_string(), 125.0)]);
    // Half of the first second is cut: its power may have stepped anywhere inside, by as much
    // as the 100 W to its neighbour, so min(0.5, 0.5) × 1 s × 100 W = 50 J; the whole second
    // is a counter's, exact.
    assert_eq!(e.bound_joules, Some(50.0));
    let none = window_energy(&i, 1.7e9 + 10.0, 1.7e9 + 11.0);
    assert_eq!((none.joules, none.covered_fraction), (None, 0.0));
    assert_eq!(none.bound_joules, None);
    // Rebuilt from the store, which keeps no quality per sample: no bound, not a guess.
    let stored: Vec<Interval> = i
        .into_iter()
        .map(|i| Interval { quality: None, ..i })
        .collect();
    assert_eq!(
        window_energy(&stored, 1.7e9, 1.7e9 + 2.0).bound_joules,
        None
    );
}

/// A plug read 100 W for 5 s, was unplugged (the meter measures nothing across the change),
/// and RAPL's package read 30 W for 4 s: the window 0–10 s is the package's 4 × 30 W = 120 J
/// over 0.4 of its length, never 500 J of the wall plus 120 J of the package.
#[test]
fn a_window_across_an_unplugged_plug_counts_only_the_scope_it_ends_in() {
    use crate::reading::Domain;
    use crate::scope::{Coverage, Scope};
    let mut i = trace(
        0.0,
        &[
            100.0, 100.0, 100.0, 100.0, 100.0, 0.0, 30.0, 30.0, 30.0, 30.0,
        ],
    );
    for (k, interval) in i.iter_mut().enumerate() {
        interval.coverage = Some(match k {
            0..=4 => Coverage::of_domain(Domain::Wall, None),
            _ => Coverage::of_domain(Domain::Cpu, None),
        });
    }
    i[5].joules = None;
    let e = window_energy(&i, 1.7e9, 1.7e9 + 10.0);
    assert_eq!(e.joules, Some(120.0));
    assert!((e.covered_fraction - 0.4).abs() < 1e-9);
    assert_eq!(
        e.coverage.as_ref().map(|c| c.scope),
        Some(Scope::Components)
    );
    // A window that ends before the change is the wall's alone: 3 × 100 W.
    let before = window_energy(&i, 1.7e9 + 1.0, 1.7e9 + 4.0);
    assert_eq!(before.joules, Some(300.0));
    assert_eq!(before.coverage.map(|c| c.scope), Some(Scope::Wall));
}

/// The intervals the engine keeps while it samples `plug` every 100 ms for `until` ms: each
/// with the total's advance, and the power the plug's last answer said.
fn plug_intervals(plug: &Plug, until: u64) -> Vec<Interval> {
    let totals = run(plug, until, |_, c| c);
    totals
        .windows(2)
        .map(|pair| {
            let ((a, ta), (b, tb)) = (pair[0], pair[1]);
            let (start, end) = (a as f64 / 1000.0, b as f64 / 1000.0);
            // The answer in force at `b`: received 50 ms into each second.
            let answered_at = (b.saturating_sub(50)) / 1000 * 1000 + 50;
            Interval {
                start,
                end,
                unix_start: 1.7e9 + start,
                unix_end: 1.7e9 + end,
                joules: Some(tb - ta),
                by_domain: Vec::new(),
                quality: Some(Quality::Measured),
                source: Some("wall-meter".into()),
                method: Some(Method::Counter),
                answered: Some(Answered {
                    period_seconds: 1.0,
                    watts: plug.watts(answered_at) * plug.reads,
                }),
                coverage: None,
            }
        })
        .collect()
}

/// Every 5 s window from `from_ms` to `to_ms`, each `every_ms` later than the last:
/// (its start, the energy read, its bound, the truth).
fn windows(
    plug: &Plug,
    intervals: &[Interval],
    from_ms: u64,
    to_ms: u64,
    every_ms: u64,
) -> Vec<(u64, f64, f64, f64)> {
    (from_ms..to_ms)
        .step_by(every_ms as usize)
        .map(|a| {
            let b = a + 5_000;
            let e = window_energy(
                intervals,
                1.7e9 + a as f64 / 1000.0,
                1.7e9 + b as f64 / 1000.0,
            );
            let joules = e.joules.unwrap_or(f64::NAN);
            let bound = e.bound_joules.unwrap_or(f64::NAN);
            (a, joules, bound, plug.truth(b) - plug.truth(a))
        })
        .collect()
}

#[test]
fn a_plug_at_a_steady_100_w_reads_500_j_in_every_5_s_window_and_its_bound_covers_the_truth() {
    // Tasmota's and Kasa's whole Wh, Shelly Gen1's watt-minutes, Gen2's milli-kWh.
    for step in [WH, 60.0, 3.6] {
        let plug = Plug {
            power: vec![(0, 100.0)],
            start_joules: 1_234.0 * WH + 1_400.0,
            step,
            reads: 1.0,
        };
        let intervals = plug_intervals(&plug, 600_000);
        for (a, joules, bound, truth) in windows(&plug, &intervals, 5_000, 590_000, 2_500) {
            assert!(
                (joules - 500.0).abs() <= 25.0,
                "step {step} J at {a} ms: {joules} J"
            );
            assert!(
                (joules - truth).abs() <= bound + 1e-6,
                "step {step} J at {a} ms: {joules} ± {bound} J, truth {truth} J"
            );
            // A steady plug whose counter agrees with its power: nothing to allow for.
            assert!(bound <= 5.0, "step {step} J at {a} ms: ± {bound} J");
        }
    }
}

#[test]
fn around_a_step_from_50_to_150_w_every_window_is_within_its_bound_which_a_counter_would_not_give()
{
    // The step comes half a second after an answer: for the next 0.55 s the plug still says
    // 50 W, so the windows around it read up to 100 W × 0.55 s = 55 J short, and the lump that
    // settles the counter at its next Wh step is read where it lands.
    let plug = Plug {
        power: vec![(0, 50.0), (60_500, 150.0)],
        start_joules: 5.0 * WH + 900.0,
        step: WH,
        reads: 1.0,
    };
    let intervals = plug_intervals(&plug, 150_000);
    let mut worst = 0.0_f64;
    for (a, joules, bound, truth) in windows(&plug, &intervals, 50_000, 140_000, 100) {
        assert!(
            (joules - truth).abs() <= bound + 1e-6,
            "at {a} ms: {joules} ± {bound} J, truth {truth} J"
        );
        // Bounded by what the step could hide: the 100 W difference for 2 s around the
        // answer that showed it, and a lump no larger than what was hidden.
        assert!(bound <= 300.0, "at {a} ms: ± {bound} J");
        worst = worst.max((joules - truth).abs());
    }
    assert!(worst > 10.0, "the step hid nothing: {worst} J");
    // Read as a counter that measures every sample, the same intervals would claim to be exact.
    let as_counter: Vec<Interval> = intervals
        .iter()
        .map(|i| Interval {
            answered: None,
            ..i.clone()
        })
        .collect();
    let missed = windows(&plug, &as_counter, 50_000, 140_000, 100)
        .into_iter()
        .filter(|(_, joules, bound, truth)| (joules - truth).abs() > bound + 1e-6)
        .count();
    assert!(missed > 0, "a counter's bound covered the step too");
}

#[test]
fn a_plug_whose_power_reads_low_is_settled_in_lumps_that_the_bound_covers() {
    // Shelly Gen1 watt-minutes, power read 8 % low: the counter, not the power, is the truth,
    // and it pulls the total up in lumps of about 8 J a second.
    let plug = Plug {
        power: vec![(0, 100.0), (200_000, 250.0), (400_000, 40.0)],
        start_joules: 2_632.0 * 60.0 + 7.0,
        step: 60.0,
        reads: 0.92,
    };
    let intervals = plug_intervals(&plug, 600_000);
    for (a, joules, bound, truth) in windows(&plug, &intervals, 5_000, 590_000, 1_000) {
        assert!(
            (joules - truth).abs() <= bound + 1e-6,
            "at {a} ms: {joules} ± {bound} J, truth {truth} J"
        );
        // Away from a change of power (an answer period and more), no more than a quarter of
        // the window: the lumps, not every interval near one.
        let near_a_change = [200_000, 400_000]
            .iter()
            .any(|c| a < c + 2_000 && a + 5_000 + 2_000 > *c);
        if !near_a_change {
            assert!(bound <= 0.25 * truth, "at {a} ms: ± {bound} J of {truth} J");
        }
    }
}
