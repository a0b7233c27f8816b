use super::*;

fn at(s: u64) -> Stamp {
    Stamp::new(Duration::from_secs(s), 1_700_000_000.0 + s as f64)
}

/// The settings with the threshold set at 15 W.
fn fifteen() -> PolicyConfig {
    PolicyConfig {
        threshold_w: Some(15.0),
        ..PolicyConfig::default()
    }
}

fn policy() -> Policy {
    Policy::new(fifteen(), LowPowerState::off())
}

#[test]
fn with_no_watts_set_a_desktop_at_100_w_engages_at_its_rest_plus_half_not_15_w() {
    let mut p = Policy::new(PolicyConfig::default(), LowPowerState::off());
    // Ten minutes at rest: learning, nothing engaged (15 W would have at 30 s).
    assert!(feed(&mut p, 0, 659, 100.0).is_empty());
    assert_eq!(p.rest_w(), Some(100.0));
    assert_eq!(p.threshold_w(), Some(150.0));
    // 140 W for a minute is below 150 W.
    assert!(feed(&mut p, 660, 720, 140.0).is_empty());
    // 200 W for 30 s engages, and says where the threshold came from.
    let on = feed(&mut p, 721, 760, 200.0);
    assert_eq!(on.len(), 1, "{on:?}");
    assert_eq!(on[0].0, 751);
    assert!(
        on[0]
            .1
            .message
            .contains("above 150 W (the machine's rest of 100 W"),
        "{}",
        on[0].1.message
    );
    // Released below 150 − 3 W for 30 s.
    let off = feed(&mut p, 761, 800, 100.0);
    assert_eq!(off.len(), 1, "{off:?}");
    assert!(
        off[0].1.message.contains("below 147 W"),
        "{}",
        off[0].1.message
    );
}

/// Feeds `watts` once a second from `from` to `to` inclusive; returns the transitions.
fn feed(p: &mut Policy, from: u64, to: u64, watts: f64) -> Vec<(u64, Transition)> {
    (from..=to)
        .filter_map(|s| {
            p.observe(at(s), Some(Watts(watts)), None, None)
                .map(|t| (s, t))
        })
        .collect()
}

#[test]
fn sustained_draw_above_threshold_engages_after_the_duration() {
    let mut p = policy();
    let t = feed(&mut p, 0, 40, 20.0);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, 30, "engages once 30 s have passed above 15 W");
    assert_eq!(t[0].1.state.reason, Some(Reason::AutoThreshold));
    assert_eq!(t[0].1.message, "Low-power mode on: above 15 W for 30 s");
    assert_eq!(p.state().since, Some(1_700_000_030.0));
}

#[test]
fn a_dip_below_threshold_restarts_the_engage_timer() {
    let mut p = policy();
    assert!(feed(&mut p, 0, 20, 20.0).is_empty());
    assert!(feed(&mut p, 21, 21, 14.0).is_empty());
    let t = feed(&mut p, 22, 60, 20.0);
    assert_eq!(t[0].0, 52);
}

#[test]
fn release_needs_the_hysteresis_band_and_the_duration() {
    let mut p = policy();
    feed(&mut p, 0, 30, 20.0);
    assert!(p.state().enabled);
    // 13 W is under the threshold but not under 15 − 3 = 12 W: it stays on.
    assert!(feed(&mut p, 31, 200, 13.0).is_empty());
    let t = feed(&mut p, 201, 300, 10.0);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].0, 231);
    assert!(!t[0].1.state.enabled);
    assert_eq!(t[0].1.message, "Low-power mode off: below 12 W for 30 s");
}

#[test]
fn manual_engage_survives_a_low_trace() {
    let mut p = policy();
    let t = p.set_manual(true, at(0)).map(|t| t.state);
    assert_eq!(
        t,
        Some(LowPowerState {
            enabled: true,
            since: Some(1_700_000_000.0),
            reason: Some(Reason::Manual)
        })
    );
    assert!(feed(&mut p, 1, 600, 2.0).is_empty());
    assert!(p.state().enabled);
}

#[test]
fn manual_on_while_auto_engaged_makes_it_stay() {
    let mut p = policy();
    feed(&mut p, 0, 30, 20.0);
    let t = p.set_manual(true, at(31)).map(|t| t.state);
    assert_eq!(t.as_ref().map(|s| s.since), Some(Some(1_700_000_030.0)));
    assert!(feed(&mut p, 32, 600, 2.0).is_empty());
}

#[test]
fn manual_off_is_not_undone_by_the_same_high_draw() {
    let mut p = policy();
    feed(&mut p, 0, 30, 20.0);
    assert!(p.set_manual(false, at(31)).is_some());
    assert!(feed(&mut p, 32, 600, 20.0).is_empty(), "stays off");
    // Once the draw has been low, a new high period engages again.
    feed(&mut p, 601, 610, 5.0);
    let t = feed(&mut p, 611, 700, 20.0);
    assert_eq!(t[0].0, 641);
}

#[test]
fn missing_watts_is_no_evidence() {
    let mut p = policy();
    feed(&mut p, 0, 20, 20.0);
    assert!(p.observe(at(21), None, None, None).is_none());
    let t = feed(&mut p, 22, 60, 20.0);
    assert_eq!(t[0].0, 52, "the hole restarted the timer");
    assert!(p
        .observe(at(61), Some(Watts(f64::NAN)), None, None)
        .is_none());
}

#[test]
fn auto_off_never_engages() {
    let mut p = Policy::new(
        PolicyConfig {
            auto: false,
            ..fifteen()
        },
        LowPowerState::off(),
    );
    assert!(feed(&mut p, 0, 600, 100.0).is_empty());
}

#[test]
fn battery_rule_engages_at_once_and_releases_on_mains() {
    let mut p = Policy::new(
        PolicyConfig {
            on_battery: true,
            ..fifteen()
        },
        LowPowerState::off(),
    );
    let on_batt = Some(Battery {
        on_battery: true,
        percent: Some(80.0),
    });
    let t = p.observe(at(0), Some(Watts(5.0)), on_batt, None);
    assert_eq!(
        t.map(|t| (t.state.reason, t.message)),
        Some((
            Some(Reason::Battery),
            "Low-power mode on: running on battery".to_string()
        ))
    );
    assert!(p.observe(at(1), Some(Watts(5.0)), on_batt, None).is_none());
    // The low draw does not release a battery engagement.
    assert!(feed(&mut p, 2, 100, 1.0).is_empty());
    let mains = Some(Battery {
        on_battery: false,
        percent: Some(80.0),
    });
    let t = p.observe(at(101), Some(Watts(5.0)), mains, None);
    assert_eq!(t.map(|t| t.state.enabled), Some(false));
}

#[test]
fn a_price_above_the_limit_engages_until_it_falls_back_and_a_manual_choice_stands() {
    // Above 0.35 per kWh: 0.30 leaves it off, 0.42 turns it on, 0.35 turns it off again.
    let mut p = Policy::new(
        PolicyConfig {
            above_price: Some(0.35),
            ..fifteen()
        },
        LowPowerState::off(),
    );
    assert!(p.observe(at(0), None, None, Some(0.30)).is_none());
    let on = p.observe(at(1), None, None, Some(0.42));
    assert_eq!(
        on.as_ref().map(|t| (t.state.enabled, t.state.reason)),
        Some((true, Some(Reason::Price)))
    );
    assert_eq!(
        on.map(|t| t.message).as_deref(),
        Some("Low-power mode on: a kWh costs 0.42, above 0.35")
    );
    assert!(
        p.observe(at(2), None, None, None).is_none(),
        "unknown decides nothing"
    );
    assert!(p.observe(at(3), None, None, Some(0.50)).is_none());
    let off = p.observe(at(4), None, None, Some(0.35));
    assert_eq!(off.map(|t| t.state.enabled), Some(false));
    // Switched on by hand, a cheap slot does not switch it off.
    p.set_manual(true, at(5));
    assert!(p.observe(at(6), None, None, Some(0.10)).is_none());
    assert!(PolicyConfig {
        above_price: Some(f64::NAN),
        ..fifteen()
    }
    .validate()
    .is_err());
}

#[test]
fn battery_below_percent_engages_and_needs_five_points_to_release() {
    let mut p = Policy::new(
        PolicyConfig {
            battery_below_percent: Some(20.0),
            ..fifteen()
        },
        LowPowerState::off(),
    );
    let b = |pct| {
        Some(Battery {
            on_battery: true,
            percent: Some(pct),
        })
    };
    assert!(p.observe(at(0), None, b(25.0), None).is_none());
    let t = p.observe(at(1), None, b(19.0), None);
    assert_eq!(
        t.map(|t| t.message),
        Some("Low-power mode on: battery at 19 %".to_string())
    );
    assert!(
        p.observe(at(2), None, b(22.0), None).is_none(),
        "inside the band"
    );
    assert_eq!(
        p.observe(at(3), None, b(25.0), None)
            .map(|t| t.state.enabled),
        Some(false)
    );
}

#[test]
fn restored_manual_state_is_kept() {
    let restored = LowPowerState {
        enabled: true,
        since: Some(1.0),
        reason: Some(Reason::Manual),
    };
    let mut p = Policy::new(fifteen(), restored.clone());
    assert!(feed(&mut p, 0, 100, 1.0).is_empty());
    assert_eq!(p.state(), &restored);
}

#[test]
fn validation_names_the_field() {
    let bad = |c: PolicyConfig| match c.validate() {
        Err(Error::Invalid { field, .. }) => field,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let d = fifteen;
    assert_eq!(
        bad(PolicyConfig {
            threshold_w: Some(f64::NAN),
            ..d()
        }),
        "low_power_threshold_w"
    );
    assert_eq!(
        bad(PolicyConfig {
            hysteresis_w: 15.0,
            ..d()
        }),
        "low_power_hysteresis_w"
    );
    assert_eq!(
        bad(PolicyConfig {
            engage_after_s: -1.0,
            ..d()
        }),
        "low_power_engage_after_s"
    );
    assert_eq!(
        bad(PolicyConfig {
            battery_below_percent: Some(0.0),
            ..d()
        }),
        "low_power_battery_below_percent"
    );
    assert_eq!(
        bad(PolicyConfig {
            model: " ".into(),
            ..d()
        }),
        "low_power_model"
    );
    assert!(d().validate().is_ok());
}

#[test]
fn auto_advises_the_model_the_profiles_chose_and_says_why_none_when_none() {
    let c = PolicyConfig {
        model: AUTO_MODEL.into(),
        min_accuracy: 0.7,
        ..fifteen()
    };
    assert!(c.validate().is_ok());
    let off = LowPowerState::off();
    let none = advice(&c, &off, &Measured::default());
    assert_eq!(
        none.recommended_model, None,
        "never \"auto\" as a model's name"
    );
    assert!(
        none.recommendation
            .starts_with("No profiled model is good enough yet (accuracy at least 70 %)"),
        "{}",
        none.recommendation
    );
    let chosen = Measured {
        score: Some(3.0),
        good_enough: Some(("smollm2".into(), "gsm8k".into())),
        ..Measured::default()
    };
    let a = advice(&c, &off, &chosen);
    assert_eq!(a.recommended_model.as_deref(), Some("smollm2"));
    assert_eq!(
        a.recommendation,
        "Efficiency 3.0/10: fair; smollm2 would answer for less energy per token. (smollm2 \
             is the cheapest model good enough on gsm8k)"
    );
    // A named model is advised as it is, whatever the profiles chose.
    let named = advice(&fifteen(), &off, &chosen);
    assert_eq!(named.recommended_model.as_deref(), Some(DEFAULT_MODEL));
    assert!(!named.recommendation.contains("cheapest"));
    // Targets out of range are refused with the field.
    for bad in [-0.1, 1.5, f64::NAN] {
        let c = PolicyConfig {
            min_accuracy: bad,
            ..fifteen()
        };
        assert!(c.validate().is_err(), "{bad}");
    }
    let slow = PolicyConfig {
        max_itl_ms: Some(0.0),
        ..fifteen()
    };
    assert!(slow.validate().is_err());
    assert_eq!(c.targets().min_accuracy, 0.7);
}

#[test]
fn advice_follows_the_score_bands() {
    let c = fifteen();
    let off = LowPowerState::off();
    let none = Measured::default();
    let score = |s: f64| Measured {
        score: Some(s),
        ..Measured::default()
    };
    assert_eq!(advice(&c, &off, &none).recommendation, NO_INFERENCE_DATA);
    assert_eq!(
        advice(&c, &off, &none).recommended_model.as_deref(),
        Some("qwen3:1b")
    );
    assert!(advice(&c, &off, &score(9.0))
        .recommendation
        .starts_with("Efficiency 9.0/10: excellent"));
    assert!(advice(&c, &off, &score(1.0))
        .recommendation
        .contains("poor; switch to qwen3:1b"));
    assert!(advice(&c, &off, &score(3.0))
        .recommendation
        .starts_with("Efficiency 3.0/10: fair"));
}
