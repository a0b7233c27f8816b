use super::*;

#[test]
fn energy_gauges_give_the_ratio_and_joules() {
    // 67.49 Wh of 99.46 Wh: 67.86 %; 99.46 Wh = 358,056 J.
    let h = Health::from_raw(
        "BAT0",
        Raw::Energy {
            design_wh: Some(99.46),
            full_wh: Some(67.49),
        },
        Cycles::from_count(Some(0)),
    );
    assert!((h.ratio.unwrap_or(0.0) - 0.678_564).abs() < 1e-6);
    assert!((h.design.map(|j| j.0).unwrap_or(0.0) - 358_056.0).abs() < 1e-6);
    assert_eq!(h.cycles, Cycles::NotReported);
}

#[test]
fn a_charge_gauge_without_voltage_knows_the_ratio_and_not_the_energy() {
    let h = Health::from_raw(
        "BAT0",
        Raw::Charge {
            design_ah: Some(3.6),
            full_ah: Some(3.424),
            from: EnergyFrom::ChargeAtDesignVoltage { volts: 0.0 },
        },
        Cycles::Counted(12),
    );
    assert!((h.ratio.unwrap_or(0.0) - 0.951_111).abs() < 1e-6);
    assert_eq!(h.design, None);
    assert_eq!(h.energy_from, EnergyFrom::ChargeOnly);
}

#[test]
fn a_design_of_zero_is_not_reported_and_neither_is_the_ratio() {
    let h = Health::from_raw(
        "BAT0",
        Raw::Energy {
            design_wh: Some(0.0),
            full_wh: Some(40.0),
        },
        Cycles::from_count(None),
    );
    assert_eq!((h.design, h.ratio), (None, None));
    assert!(h.full.is_some());
}

/// A made-up history (not a capture): 90 days from day 20,000 (2024-10-04), health falling
/// from 0.95 by 0.0002 a day: 0.95 − 0.0002·d. It reaches 0.8 at d = 0.15 / 0.0002 = 750,
/// day 20,750 (2026-10-24); −0.073 a year.
#[test]
fn a_90_day_history_reaches_80_percent_on_the_day_worked_by_hand() {
    let history: Vec<(i64, f64)> = (0..90)
        .map(|d| (20_000 + d, 0.95 - 0.0002 * d as f64))
        .collect();
    match trend(&history) {
        Trend::Falling {
            per_year,
            worn_on_day,
            days,
        } => {
            assert_eq!(worn_on_day, 20_750);
            assert!((per_year + 0.073).abs() < 1e-9, "{per_year}");
            assert_eq!(days, 90);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn noise_around_the_line_moves_the_date_little_and_29_days_give_none() {
    // ±0.005 alternating around the same line (+ on even days). The wiggle adds
    // Σ(d − 44.5)·w = 45 pairs × −0.005 = −0.225 to Sxy; Sxx = 90·(90² − 1)/12 = 60,742.5;
    // slope −0.0002 − 0.225/60,742.5 = −0.00020370; the mean 0.9411 at day 44.5, so 0.8 at
    // 44.5 + 0.1411/0.00020370 = 737.2: day 20,737, two weeks before the clean line's.
    let noisy: Vec<(i64, f64)> = (0..90)
        .map(|d| {
            let wiggle = if d % 2 == 0 { 0.005 } else { -0.005 };
            (20_000 + d, 0.95 - 0.0002 * d as f64 + wiggle)
        })
        .collect();
    match trend(&noisy) {
        Trend::Falling { worn_on_day, .. } => assert_eq!(worn_on_day, 20_737),
        other => panic!("{other:?}"),
    }
    let short: Vec<(i64, f64)> = (0..29).map(|d| (20_000 + d, 0.9)).collect();
    assert_eq!(trend(&short), Trend::NotEnoughHistory { days: 29 });
    let flat: Vec<(i64, f64)> = (0..40).map(|d| (20_000 + d, 0.9)).collect();
    assert!(matches!(trend(&flat), Trend::NotFalling { .. }));
}

#[test]
fn a_200_eur_70_wh_battery_wears_2_86_a_kwh_and_unknown_design_is_said() {
    let b = Health::from_raw(
        "BAT0",
        Raw::Energy {
            design_wh: Some(70.0),
            full_wh: Some(60.0),
        },
        Cycles::NotReported,
    );
    let none = BTreeMap::new();
    let rate = wear_per_kwh(Some(200.0), 1000, &none, std::slice::from_ref(&b)).unwrap_or(f64::NAN);
    assert!((rate - 200.0 / 70.0).abs() < 1e-12, "{rate}");
    // 20 W for 30 min = 0.010 kWh: 0.0286.
    assert!((0.010 * rate - 0.028_571).abs() < 1e-6);
    let charge_only = Health::from_raw(
        "BAT1",
        Raw::Charge {
            design_ah: Some(5.0),
            full_ah: Some(4.0),
            from: EnergyFrom::ChargeOnly,
        },
        Cycles::NotReported,
    );
    let why = wear_per_kwh(Some(200.0), 1000, &none, &[b.clone(), charge_only])
        .err()
        .unwrap_or_default();
    assert!(why.contains("BAT1 does not report its design"), "{why}");
    assert!(wear_per_kwh(Some(200.0), 1000, &none, &[]).is_err());
    assert_eq!(
        wear_per_kwh(None, 1000, &none, &[b]),
        Err("no battery_price is set".to_string())
    );
}

#[test]
fn two_batteries_each_with_its_price_wear_by_their_share_of_the_draw() {
    // A ThinkPad's 23.2 Wh internal BAT0 at 60 EUR for 500 cycles and its 72 Wh BAT1 at
    // 90 EUR for the machine's 1,000: (60 ÷ 500 + 90 ÷ 1,000) ÷ (0.0232 + 0.072) kWh
    // = 0.21 ÷ 0.0952 = 2.2059 EUR a kWh.
    let bat = |name: &str, wh: f64| {
        Health::from_raw(
            name,
            Raw::Energy {
                design_wh: Some(wh),
                full_wh: Some(wh),
            },
            Cycles::NotReported,
        )
    };
    let both = [bat("BAT0", 23.2), bat("BAT1", 72.0)];
    let mut own = BTreeMap::new();
    own.insert(
        "BAT0".to_string(),
        BatteryPricing {
            price: 60.0,
            rated_cycles: Some(500),
        },
    );
    own.insert(
        "BAT1".to_string(),
        BatteryPricing {
            price: 90.0,
            rated_cycles: None,
        },
    );
    let rate = wear_per_kwh(None, 1000, &own, &both).unwrap_or(f64::NAN);
    assert!((rate - 0.21 / 0.0952).abs() < 1e-12, "{rate}");
    // BAT0 named alone: BAT1 is the machine's 150 EUR at 1,000 cycles:
    // (0.12 + 0.15) ÷ 0.0952 = 2.8361.
    own.remove("BAT1");
    let rate = wear_per_kwh(Some(150.0), 1000, &own, &both).unwrap_or(f64::NAN);
    assert!((rate - 0.27 / 0.0952).abs() < 1e-12, "{rate}");
    assert_eq!(
        wear_per_kwh(None, 1000, &own, &both),
        Err(
            "BAT1 has no price: battery_prices does not name it and no battery_price is set"
                .to_string()
        )
    );
}

#[test]
fn day_numbers_count_from_1970() {
    assert_eq!(day_number("1970-01-02"), Some(1));
    assert_eq!(day_number("2024-10-04"), Some(20_000));
    assert_eq!(day_text(20_750).as_deref(), Some("2026-10-24"));
    assert_eq!(day_number("2024-13-01"), None);
    assert_eq!(day_text(i64::MAX), None);
}

#[test]
fn cycles_of_zero_or_below_are_not_reported() {
    assert_eq!(Cycles::from_count(Some(0)), Cycles::NotReported);
    assert_eq!(Cycles::from_count(Some(-1)), Cycles::NotReported);
    assert_eq!(Cycles::from_count(Some(194)).count(), Some(194));
}
