use super::*;

fn slot(start: f64, end: f64, value: f64) -> Slot {
    Slot { start, end, value }
}

#[test]
fn the_value_in_force_is_its_slots_and_a_gap_is_unknown_never_zero() {
    let s = Series::new(
        Quantity::PricePerKwh,
        Some("EUR".into()),
        vec![slot(3600.0, 7200.0, -0.01), slot(0.0, 900.0, 0.08)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.slots[0].start, 0.0, "sorted");
    assert_eq!(s.at(0.0), Some(0.08));
    assert_eq!(s.at(899.9), Some(0.08));
    assert_eq!(s.at(900.0), None, "a gap: 15 min to the hour");
    assert_eq!(s.at(5000.0), Some(-0.01), "a negative price is kept");
    assert_eq!(s.at(7200.0), None);
    assert_eq!(s.span(), Some((0.0, 7200.0)));
}

fn hourly(prices: &[f64]) -> Series {
    let slots = prices
        .iter()
        .enumerate()
        .map(|(i, p)| slot(i as f64 * 3600.0, (i + 1) as f64 * 3600.0, *p))
        .collect();
    Series::new(Quantity::PricePerKwh, Some("EUR".into()), slots).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn at_unix_times_equally_cheap_windows_go_to_the_earliest() {
    // 5-minute slots from 2026-12-05 at 300, then 100 EUR/MWh: a 4 s job within 20 s of a
    // moment 6 s before the change starts at the change, wherever that moment's fraction
    // of a second lies (every window inside the second slot means exactly 0.1).
    let t0 = 1_796_473_438.0;
    let s = Series::new(
        Quantity::PricePerKwh,
        Some("EUR".into()),
        vec![slot(t0, t0 + 300.0, 0.3), slot(t0 + 300.0, t0 + 600.0, 0.1)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for k in 0..1000 {
        let now = t0 + 294.0 + f64::from(k) * 0.000_97;
        let w = s
            .lowest_window(now, now + 20.0, 4.0)
            .unwrap_or_else(|| panic!("no window"));
        assert_eq!(w.start, t0 + 300.0, "from {now}");
        assert!((w.mean - 0.1).abs() < 1e-12, "from {now}: {}", w.mean);
        let now_mean = w.now_mean.unwrap_or_default();
        assert!((now_mean - 0.3).abs() < 1e-12, "from {now}: {now_mean}");
    }
}

#[test]
fn a_two_hour_job_waits_for_the_lowest_running_mean_not_the_cheapest_hour() {
    // 30, 10, 20, 5, 40 ct: two hours from 0 h cost a mean of 20 ct, from 1 h 15, from 2 h
    // 12.5, from 3 h 22.5. The cheapest hour (5 ct at 3 h) is not where to start.
    let s = hourly(&[0.30, 0.10, 0.20, 0.05, 0.40]);
    let w = s
        .lowest_window(0.0, 5.0 * 3600.0, 2.0 * 3600.0)
        .unwrap_or_else(|| panic!("no window"));
    assert_eq!((w.start, w.end), (7200.0, 14_400.0));
    assert!((w.mean - 0.125).abs() < 1e-12);
    assert!((w.now_mean.unwrap_or_default() - 0.20).abs() < 1e-12);
    assert!((w.saving_fraction.unwrap_or_default() - 0.375).abs() < 1e-12);
    // Half an hour in, a 90-minute job: now, 0.5 h to 2 h, costs (30×0.5 + 10)/1.5 =
    // 16.7 ct; the best ends where the 40 ct hour begins: 2.5 h to 4 h, (20×0.5 + 5)/1.5 =
    // 10 ct, a start at no slot's edge.
    let w = s
        .lowest_window(1800.0, 5.0 * 3600.0, 5400.0)
        .unwrap_or_else(|| panic!("no window"));
    assert_eq!(w.start, 9000.0);
    assert!((w.mean - 0.10).abs() < 1e-12, "{w:?}");
    assert!(
        (w.now_mean.unwrap_or_default() - 0.25 / 1.5).abs() < 1e-12,
        "{w:?}"
    );
    // A window past the prices known is none, and so is one that does not fit.
    assert_eq!(s.lowest_window(0.0, 6.0 * 3600.0, 6.0 * 3600.0), None);
    assert_eq!(s.lowest_window(0.0, 3600.0, 7200.0), None);
}

#[test]
fn retail_adds_charges_then_tax_and_a_negative_spot_can_stay_negative() {
    let spot = hourly(&[-0.08, 0.10]);
    let r = spot.retail(Retail {
        charges_per_kwh: 0.05,
        tax: 0.19,
    });
    // (−0.08 + 0.05) × 1.19 = −0.0357; (0.10 + 0.05) × 1.19 = 0.1785.
    assert!((r.slots[0].value + 0.0357).abs() < 1e-12);
    assert!((r.slots[1].value - 0.1785).abs() < 1e-12);
    // A window over a gap has no mean.
    let gappy = Series::new(
        Quantity::PricePerKwh,
        None,
        vec![slot(0.0, 900.0, 0.1), slot(1800.0, 2700.0, 0.1)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gappy.mean_over(0.0, 2700.0), None);
    assert_eq!(gappy.mean_over(0.0, 900.0), Some(0.1));
}

#[test]
fn a_newer_answer_replaces_what_it_overlaps_and_keeps_the_rest() {
    let old = hourly(&[0.30, 0.10, 0.20]);
    let newer = Series::new(
        Quantity::PricePerKwh,
        Some("EUR".into()),
        vec![slot(3600.0, 4500.0, 0.01), slot(4500.0, 5400.0, 0.02)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let m = old.merged(&newer);
    // The hour at 0.10 is replaced whole by the two quarters given; 5,400–7,200 s is a
    // gap now (the newer answer is the feed's word), the other hours stay.
    assert_eq!(m.at(100.0), Some(0.30));
    assert_eq!(m.at(4000.0), Some(0.01));
    assert_eq!(m.at(6000.0), None);
    assert_eq!(m.at(8000.0), Some(0.20));
    assert_eq!(m.since(7200.0).slots.len(), 1);
    assert_eq!(m.within(100.0, 4000.0).slots.len(), 2);
}

#[test]
fn a_price_no_grid_has_is_left_out_and_counted() {
    // 80 per kWh is dear but possible; 80,000 is a figure per MWh read as per kWh.
    let s = hourly(&[0.08, 80_000.0, -0.5, 80.0]);
    let (kept, refused) = s.plausible();
    assert_eq!(refused, 1);
    assert_eq!(kept.at(3600.0 + 1.0), None, "a gap, never a price");
    assert_eq!(kept.slots.len(), 3);
    let carbon = Series::new(
        Quantity::GramsPerKwh,
        None,
        vec![slot(0.0, 1.0, -3.0), slot(1.0, 2.0, 250.0)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(carbon.plausible().1, 1);
}

#[test]
fn slots_that_overlap_run_backwards_or_are_not_numbers_are_refused() {
    let bad = |slots| Series::new(Quantity::GramsPerKwh, None, slots).map(|_| ());
    assert!(bad(vec![slot(0.0, 3600.0, 1.0), slot(1800.0, 5400.0, 2.0)]).is_err());
    assert!(bad(vec![slot(10.0, 10.0, 1.0)]).is_err());
    assert!(bad(vec![slot(0.0, 10.0, f64::NAN)]).is_err());
}

#[test]
fn a_gap_right_after_now_still_leaves_the_windows_after_it() {
    // Now is 0; nothing is known for the first hour, then 20, 10, 30 ct. A one-hour job is
    // best from 2 h (10 ct); starting now has no price, so there is no saving to state.
    let s = Series::new(
        Quantity::PricePerKwh,
        Some("EUR".into()),
        vec![
            slot(3600.0, 7200.0, 0.20),
            slot(7200.0, 10_800.0, 0.10),
            slot(10_800.0, 14_400.0, 0.30),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let w = s
        .lowest_window(0.0, 14_400.0, 3600.0)
        .unwrap_or_else(|| panic!("a window after the gap"));
    assert_eq!((w.start, w.end, w.now_mean), (7200.0, 10_800.0, None));
    assert_eq!(w.saving_fraction, None);
    assert!((w.mean - 0.10).abs() < 1e-12);
}

#[test]
fn the_running_sums_agree_with_the_slot_by_slot_mean() {
    // 0.5 h to 2.75 h over 30, 10, (gap 2–3 h): the gap lies within, so no mean;
    // 0.5 h to 1.75 h: (30 × 0.5 + 10 × 0.75) / 1.25 = 18 ct.
    let s = Series::new(
        Quantity::PricePerKwh,
        None,
        vec![
            slot(0.0, 3600.0, 0.30),
            slot(3600.0, 7200.0, 0.10),
            slot(10_800.0, 14_400.0, 0.5),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let i = Integral::new(&s.slots);
    for (a, b) in [
        (1800.0, 6300.0),
        (1800.0, 9900.0),
        (0.0, 7200.0),
        (11_000.0, 14_000.0),
        (-5.0, 10.0),
    ] {
        let (fast, slow) = (i.mean(a, b), s.mean_over(a, b));
        assert_eq!(fast.is_some(), slow.is_some(), "{a}–{b}");
        assert!((fast.unwrap_or_default() - slow.unwrap_or_default()).abs() < 1e-12);
    }
    assert!((i.mean(1800.0, 6300.0).unwrap_or_default() - 0.18).abs() < 1e-12);
}

#[test]
fn a_merge_of_a_week_of_quarter_hours_is_one_pass() {
    // 672 old quarter-hours, and a newer answer over the second half in hours: 336 kept,
    // 84 hours added, in order, with no overlap.
    let quarters: Vec<Slot> = (0..672)
        .map(|i| slot(i as f64 * 900.0, (i + 1) as f64 * 900.0, 0.1))
        .collect();
    let hours: Vec<Slot> = (0..84)
        .map(|i| {
            slot(
                302_400.0 + i as f64 * 3600.0,
                302_400.0 + (i + 1) as f64 * 3600.0,
                0.2,
            )
        })
        .collect();
    let old = Series::new(Quantity::PricePerKwh, None, quarters).unwrap_or_else(|e| panic!("{e}"));
    let newer = Series::new(Quantity::PricePerKwh, None, hours).unwrap_or_else(|e| panic!("{e}"));
    let m = old.merged(&newer);
    assert_eq!(m.slots.len(), 336 + 84);
    assert!(m.slots.windows(2).all(|w| w[0].end <= w[1].start));
    assert_eq!(m.at(302_399.0), Some(0.1));
    assert_eq!(m.at(302_400.0), Some(0.2));
}

#[test]
fn an_answer_past_a_feeds_limits_is_refused_saying_which() {
    let answer = |slots| Series::from_answer(Quantity::PricePerKwh, Some("EUR".into()), slots);
    let why = |r: Result<Series, BadSlot>| r.err().map(|e| e.0).unwrap_or_default();
    // 400,000 one-second slots: refused by their count, before anything is built.
    assert!(answer_room(400_000).is_err());
    assert!(answer_room(MAX_ANSWER_SLOTS).is_ok());
    assert!(why(answer(vec![slot(0.0, 1.0, 0.1)])).contains("shorter"));
    // A slot of 1e308 per MWh (1e305 per kWh), either sign.
    assert!(why(answer(vec![slot(0.0, 900.0, 1e305)])).contains("no grid's"));
    assert!(why(answer(vec![slot(0.0, 900.0, -1e305)])).contains("no grid's"));
    // Two slots ten days apart.
    let far = answer(vec![slot(0.0, 900.0, 0.1), slot(864_000.0, 864_900.0, 0.1)]);
    assert!(why(far).contains("days"));
    // A genuine day of hours, a negative price among them, is taken.
    let day = hourly(&[0.08, -0.05, 0.12]).slots;
    assert_eq!(answer(day).map(|s| s.slots.len()), Ok(3));
}
