//! The stepped counter on a simulated plug ([`sim`](super::sim)).

use super::sim::*;
use super::*;

#[test]
fn a_plug_at_100_w_gives_500_j_in_every_5_s_window_not_lumps_of_its_step() {
    // Tasmota's kWh to three decimals and Kasa's Wh (1 Wh steps, here 1.4 Wh into a band), Shelly
    // Gen1's watt-minutes (60 J: 1.67 steps a second), Gen2's Wh to three decimals (3.6 J).
    for (step, start) in [
        (WH, 1_234.0 * WH + 1_400.0),
        (60.0, 2_632.0 * 60.0),
        (3.6, 7_258_589.0 * 3.6),
    ] {
        let plug = Plug {
            power: vec![(0, 100.0)],
            start_joules: start,
            step,
            reads: 1.0,
        };
        let totals = run(&plug, 600_000, |_, c| c);
        // 100 W × 5 s = 500 J in every window after the first answer; within 5 %.
        for from in (5_000..595_000).step_by(5_000) {
            let joules = total_at(&totals, from + 5_000) - total_at(&totals, from);
            assert!(
                (joules - 500.0).abs() <= 25.0,
                "step {step} J, {from} ms: {joules} J in 5 s"
            );
        }
    }
}

#[test]
fn over_ten_minutes_the_total_adds_up_to_the_counters_advance_within_one_step() {
    for (step, start) in [(WH, 17.0 * WH + 3_000.0), (60.0, 2632.0 * 60.0 + 7.0)] {
        // A plug whose power reading runs 8 % low: the counter still sets the total.
        let plug = Plug {
            power: vec![(0, 100.0), (200_000, 250.0), (400_000, 40.0)],
            start_joules: start,
            step,
            reads: 0.92,
        };
        let totals = run(&plug, 600_000, |_, c| c);
        let (first, last) = (totals[0], totals[totals.len() - 1]);
        let advance = plug.counter(600_050) - plug.counter(50);
        let total = last.1 - first.1;
        assert!(
            (total - advance).abs() <= step,
            "step {step}: total {total} J, counter {advance} J"
        );
        let truth = plug.truth(last.0) - plug.truth(first.0);
        assert!((total - truth).abs() <= step, "{total} J of {truth} J");
    }
}

#[test]
fn a_step_from_50_to_150_w_shows_in_the_windows_around_it() {
    let plug = Plug {
        power: vec![(0, 50.0), (60_000, 150.0)],
        start_joules: 5.0 * WH,
        step: WH,
        reads: 1.0,
    };
    let totals = run(&plug, 120_000, |_, c| c);
    // Power answers are a second apart: the window before the step reads 50 W × 5 s = 250 J,
    // the one after 150 W × 5 s = 750 J, each within one answer's second of the other power.
    let before = total_at(&totals, 60_000) - total_at(&totals, 55_000);
    let after = total_at(&totals, 70_000) - total_at(&totals, 65_000);
    assert!((before - 250.0).abs() <= 100.0, "{before}");
    assert!((after - 750.0).abs() <= 100.0, "{after}");
    let truth = plug.truth(120_000) - plug.truth(100);
    let total = total_at(&totals, 120_000) - total_at(&totals, 100);
    assert!((total - truth).abs() <= WH, "{total} J of {truth} J");
}

#[test]
fn a_counter_jittering_by_one_wh_stays_within_one_step_of_the_truth() {
    // A Shelly whose counter reads 1 Wh high on every other answer: at 150 W, 20 s draw 3 kJ.
    let plug = Plug {
        power: vec![(0, 150.0)],
        start_joules: 7_258.0 * WH + 100.0,
        step: WH,
        reads: 1.0,
    };
    let jitter = |at: u64, c: f64| if (at / 1000) % 2 == 1 { c + WH } else { c };
    let totals = run(&plug, 20_000, jitter);
    let total = total_at(&totals, 20_000) - total_at(&totals, 100);
    let truth = plug.truth(20_000) - plug.truth(100);
    assert!((total - truth).abs() <= WH, "{total} J of {truth} J");
    // Each step back was jitter, not a reset to zero: nothing was counted again.
    let mut c = SteppedCounter::new(4_000.0);
    for (k, counter) in [10.0 * WH, 11.0 * WH, 10.0 * WH, 11.0 * WH, 10.0 * WH]
        .into_iter()
        .enumerate()
    {
        c.answer(Answer {
            at: Duration::from_secs(k as u64),
            counter: Some(counter),
            watts: Some(150.0),
            resolution: Some(WH),
            within: Duration::ZERO,
        });
    }
    assert_eq!(c.resets(), 0);
}

#[test]
fn a_reset_to_zero_adds_what_the_device_counted_since_and_nothing_more() {
    // 300 W, whole-Wh counter at 20 Wh; the plug loses power and counts from 0 again.
    let mut c = SteppedCounter::new(4_000.0);
    let answer = |c: &mut SteppedCounter, s: u64, counter: f64| {
        c.answer(Answer {
            at: Duration::from_secs(s),
            counter: Some(counter),
            watts: Some(300.0),
            resolution: Some(WH),
            within: Duration::ZERO,
        });
    };
    answer(&mut c, 0, 20.0 * WH);
    answer(&mut c, 12, 21.0 * WH);
    let before = c
        .total_at(Duration::from_secs(12))
        .map_or(f64::NAN, |j| j.0);
    answer(&mut c, 24, 1.0 * WH);
    assert_eq!(c.resets(), 1);
    let after = c
        .total_at(Duration::from_secs(24))
        .map_or(f64::NAN, |j| j.0);
    // 12 s at 300 W = 3.6 kJ, and the 1 Wh counted since the reset is that energy.
    assert!((after - before - WH).abs() < 1e-9, "{before} → {after}");
}

#[test]
fn a_rise_no_socket_gives_is_ignored_and_the_baseline_stays() {
    let mut c = SteppedCounter::new(4_000.0);
    let answer = |c: &mut SteppedCounter, s: u64, counter: f64| {
        c.answer(Answer {
            at: Duration::from_secs(s),
            counter: Some(counter),
            watts: None,
            resolution: Some(WH),
            within: Duration::ZERO,
        });
    };
    answer(&mut c, 0, 100.0 * WH);
    answer(&mut c, 1, 101.0 * WH);
    // 1 Wh more in 0 s after the last answer is allowed (one step)...
    answer(&mut c, 1, 102.0 * WH);
    assert_eq!(c.rejected(), 0);
    // ...1 kWh in a second is not; the next sane answer counts from the last good one.
    answer(&mut c, 2, 1_102.0 * WH);
    assert_eq!(c.rejected(), 1);
    answer(&mut c, 3, 103.0 * WH);
    let total = c.total_at(Duration::from_secs(3)).map_or(f64::NAN, |j| j.0);
    // Anchored at 101 Wh (the first step), with no power known taken to stand half a step
    // above it, at total 0; 103 Wh is two steps on, so the floor is 1.5 Wh above the start.
    assert!((total - 1.5 * WH).abs() < 1e-9, "{total}");
}

#[test]
fn no_answer_yet_is_no_total_and_absurd_values_change_nothing() {
    let mut c = SteppedCounter::new(4_000.0);
    assert_eq!(c.total_at(ms(500)), None);
    c.answer(Answer {
        at: ms(1_000),
        counter: Some(f64::NAN),
        watts: Some(f64::INFINITY),
        resolution: Some(-1.0),
        within: Duration::ZERO,
    });
    assert_eq!(c.total_at(ms(2_000)), None);
}

#[test]
fn answers_slowed_by_up_to_300_ms_move_no_lump_into_any_3_s_window() {
    // A Shelly Gen1 (60 J watt-minutes) at 100 W whose answers come in 0–300 ms late, the delay
    // drawn anew for each: over ten minutes every 3 s window reads 300 J within 5 %, the first
    // ones too, and the total stays within a step of the truth (it does not ratchet up the band
    // each time a late answer is taken for a later moment than it was made).
    let plug = Plug {
        power: vec![(0, 100.0)],
        start_joules: 2_632.0 * 60.0 + 7.0,
        step: 60.0,
        reads: 1.0,
    };
    let late = |at: u64| {
        let mixed = at
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (mixed >> 33) % 301
    };
    let totals = run_timed(&plug, 600_000, |_, c| c, late);
    for from in (2_000..597_000).step_by(1_000) {
        let joules = total_at(&totals, from + 3_000) - total_at(&totals, from);
        assert!(
            (joules - 300.0).abs() <= 15.0,
            "{from} ms: {joules} J in 3 s"
        );
    }
    let (first, last) = (totals[0], totals[totals.len() - 1]);
    let drawn = plug.truth(last.0) - plug.truth(first.0);
    assert!(
        ((last.1 - first.1) - drawn).abs() <= 60.0,
        "{} J of {drawn} J",
        last.1 - first.1
    );
}
