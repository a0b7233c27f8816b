use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_update_period_is_the_shortest_time_between_changes_after_warm_up() {
    // Polled every 5 ms; the value changes every 100 ms from t = 100 ms on. The first ten
    // samples (0–45 ms) hold a jump at 20 ms that must be ignored as warm-up.
    let samples: Vec<(Duration, u64)> = (0..100u64)
        .map(|k| {
            let t = k * 5;
            let v = if t < 20 { 1 } else { 2 + t / 100 };
            (ms(t), v)
        })
        .collect();
    assert_eq!(infer_counter_update_period(&samples), Some(ms(100)));
}

#[test]
fn a_counter_that_changes_less_than_twice_has_no_inferred_period() {
    let flat: Vec<(Duration, u64)> = (0..50u64).map(|k| (ms(k), 7)).collect();
    assert_eq!(infer_counter_update_period(&flat), None);
    let once: Vec<(Duration, u64)> = (0..50u64).map(|k| (ms(k), k / 30)).collect();
    assert_eq!(infer_counter_update_period(&once), None);
    assert_eq!(infer_counter_update_period(&flat[..5]), None);
}

#[test]
fn uneven_updates_give_the_fastest_one() {
    let mut samples: Vec<(Duration, u64)> = (0..10u64).map(|k| (ms(k), 0)).collect();
    samples.extend([
        (ms(10), 0),
        (ms(30), 5),
        (ms(80), 9),
        (ms(100), 12),
        (ms(150), 12),
    ]);
    assert_eq!(infer_counter_update_period(&samples), Some(ms(20)));
}

#[test]
fn a_counter_reset_is_a_new_baseline_not_a_negative_interval() {
    let mut c = EnergyCounter::default();
    let min = ms(50);
    assert_eq!(c.update(ms(0), 1_000_000, min), None);
    // 700 J in 2 s = 350 W.
    assert_eq!(c.update(ms(2_000), 1_700_000, min), Some(Watts(350.0)));
    // Driver reload: the counter restarts near 0.
    assert_eq!(c.update(ms(3_000), 4_000, min), None);
    assert_eq!(c.total(), Joules(700.0));
    // 100 J in 1 s from the new baseline.
    assert_eq!(c.update(ms(4_000), 104_000, min), Some(Watts(100.0)));
    assert_eq!(c.total(), Joules(800.0));
}

#[test]
fn an_interval_shorter_than_the_minimum_keeps_the_baseline() {
    let mut c = EnergyCounter::default();
    let min = ms(50);
    assert_eq!(c.update(ms(1_000), 0, min), None);
    assert_eq!(c.update(ms(1_010), 0, min), None);
    assert_eq!(c.update(ms(1_000), 0, min), None);
    // From the 1 000 ms baseline: 60 J over 0.2 s = 300 W.
    assert_eq!(c.update(ms(1_200), 60_000, min), Some(Watts(300.0)));
}

#[test]
fn a_kilowatt_jump_beyond_any_gpu_is_dropped() {
    let mut c = EnergyCounter::default();
    assert_eq!(c.update(ms(0), 0, ms(50)), None);
    assert_eq!(c.update(ms(1_000), 10_000_000, ms(50)), None);
    assert_eq!(c.total(), Joules(0.0));
    assert_eq!(c.update(ms(2_000), 10_500_000, ms(50)), Some(Watts(500.0)));
}

#[test]
fn only_nvidia_display_controllers_count() {
    assert!(is_nvidia_display("0x10de\n", "0x030000\n"));
    assert!(is_nvidia_display("0x10de", "0x030200"));
    assert!(!is_nvidia_display("0x10de", "0x040300"));
    assert!(!is_nvidia_display("0x8086", "0x030000"));
}

#[test]
fn header_units_are_split_off_the_column_name() {
    assert_eq!(split_unit("power.draw [W]"), ("power.draw", Some("W")));
    assert_eq!(split_unit(" name"), ("name", None));
}

#[test]
fn a_row_with_a_wrong_number_of_values_names_its_line() {
    let err = parse_query_gpu_csv("name, power.draw [W]\nA, 1 W, 2\n")
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("nvidia-smi CSV line 2: 3 values where there are 2 columns")
    );
    assert!(parse_query_gpu_csv("").is_err());
}
