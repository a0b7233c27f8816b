use super::*;

#[test]
fn a_price_field_accepts_dots_commas_and_spaces() {
    assert_eq!(Price::parse_input("0.25").map(Price::per_kwh), Ok(0.25));
    assert_eq!(Price::parse_input(" 0,40 ").map(Price::per_kwh), Ok(0.40));
    assert_eq!(Price::parse_input("0").map(Price::per_kwh), Ok(0.0));
}

#[test]
fn negative_empty_and_non_numeric_prices_are_refused_with_a_message() {
    for bad in ["-0.1", "", "  ", "abc", "NaN", "inf", "1e9"] {
        let err = Price::parse_input(bad).err();
        assert!(
            matches!(err, Some(Error::Invalid { field: "price", .. })),
            "{bad:?} gave {err:?}"
        );
    }
    let msg = Price::parse_input("-1").err().map(|e| e.to_string());
    assert_eq!(msg.as_deref(), Some("price: cannot be negative"));
}

#[test]
fn only_addresses_the_tray_can_use_are_taken_for_the_proxy() {
    let mut p = Preferences::default();
    for ok in [
        "http://127.0.0.1:11434",
        "http://localhost:8080/v1",
        "http://[::1]:9000",
        "http://gpu-box.lan",
    ] {
        assert!(
            p.set_field("llm_upstream", &serde_json::json!(ok)).is_ok(),
            "{ok}"
        );
    }
    for bad in [
        "http://a b",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "http://",
        "http://:8080",
        "https://127.0.0.1:11434",
        "http://user@host:1",
        "http://[::1:80",
    ] {
        let err = p.set_field("llm_upstream", &serde_json::json!(bad)).err();
        assert!(
            matches!(
                err,
                Some(Error::Invalid {
                    field: "llm_upstream",
                    ..
                })
            ),
            "{bad:?} gave {err:?}"
        );
    }
    assert!(p
        .set_field("llm_proxy_listen", &serde_json::json!("[::1]:11435"))
        .is_ok());
    for bad in [
        "0.0.0.0:11435",
        "192.168.1.2:11435",
        "127.0.0.1:0",
        "localhost",
    ] {
        let err = p
            .set_field("llm_proxy_listen", &serde_json::json!(bad))
            .err();
        assert!(
            matches!(
                err,
                Some(Error::Invalid {
                    field: "llm_proxy_listen",
                    ..
                })
            ),
            "{bad:?} gave {err:?}"
        );
    }
}

#[test]
fn inference_records_are_kept_between_a_day_and_ten_years() {
    let mut p = Preferences::default();
    assert_eq!(p.inference_keep_days, 90);
    for bad in [
        serde_json::json!(0),
        serde_json::json!(3651),
        serde_json::json!(-5),
        serde_json::json!(7.5),
        serde_json::json!("30"),
    ] {
        let err = p.set_field("inference_keep_days", &bad).err();
        assert!(
            matches!(
                err,
                Some(Error::Invalid {
                    field: "inference_keep_days",
                    ..
                })
            ),
            "{bad} gave {err:?}"
        );
    }
    assert_eq!(p.inference_keep_days, 90, "a refused value changes nothing");
    p.set_field("inference_keep_days", &serde_json::json!(365))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.inference_keep_days, 365);
    assert!(Preferences::is_key("inference_keep_days"));
}

#[test]
fn stored_preferences_with_a_bad_price_do_not_load() {
    let bad = serde_json::from_str::<Preferences>(r#"{"price_per_kwh": -2}"#);
    assert!(bad.is_err());
    let ok: Preferences =
        serde_json::from_str(r#"{"price_per_kwh": 0.5}"#).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ok.price_per_kwh.per_kwh(), 0.5);
    assert_eq!(ok.currency.as_str(), "EUR");
}

#[test]
fn one_bad_stored_value_costs_only_itself() {
    let stored = serde_json::json!({
        "price_per_kwh": -3.0,
        "low_power_threshold_w": 25,
        "interval_ms": 500,
        "currency": "usd",
        "from_the_future": 1
    });
    let map = stored.as_object().cloned().unwrap_or_default();
    let (prefs, problems) = Preferences::from_entries(map.iter().map(|(k, v)| (k.as_str(), v)));
    assert_eq!(prefs.low_power.threshold_w, Some(25.0));
    assert_eq!(prefs.interval_ms, 500);
    assert_eq!(prefs.price_per_kwh, Price::default());
    assert_eq!(prefs.currency, Currency::default());
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn tariffs_carbon_and_budgets_are_validated_as_they_are_set() {
    let mut p = Preferences::default();
    let overlapping = serde_json::json!([
        {"weekdays": ["mon"], "from": "07:00", "to": "09:00", "price": 0.4},
        {"weekdays": ["mon"], "from": "08:00", "to": "10:00", "price": 0.5}
    ]);
    let err = p
        .set_field("tariffs", &overlapping)
        .err()
        .map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("tariffs: tariff 2 overlaps tariff 1"));
    assert!(p.tariffs.is_empty());
    let ok = serde_json::json!([{"weekdays": ["sat", "sun"], "from": "00:00", "to": "24:00", "price": 0.1}]);
    assert!(p.set_field("tariffs", &ok).is_ok());
    assert_eq!(p.tariffs.len(), 1);
    assert!(p
        .set_field("carbon_g_per_kwh", &serde_json::json!(-5))
        .is_err());
    assert!(p
        .set_field("carbon_g_per_kwh", &serde_json::json!(350))
        .is_ok());
    assert_eq!(p.carbon_g_per_kwh, Some(350.0));
    assert!(p
        .set_field("daily_budget_kwh", &serde_json::json!(0))
        .is_err());
    assert!(p
        .set_field("daily_budget_kwh", &serde_json::json!(2.5))
        .is_ok());
    assert!(p
        .set_field("daily_budget_kwh", &serde_json::Value::Null)
        .is_ok());
    assert_eq!(p.daily_budget_kwh, None);
    assert!(p.validate().is_ok());
}

#[test]
fn low_power_settings_are_set_one_key_at_a_time_and_checked_together() {
    let mut p = Preferences::default();
    assert!(p
        .set_field("low_power_threshold_w", &serde_json::json!(40))
        .is_ok());
    assert!(p
        .set_field("low_power_hysteresis_w", &serde_json::json!(5))
        .is_ok());
    let err = p
        .set_field("low_power_hysteresis_w", &serde_json::json!(45))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("low_power_hysteresis_w: 45 W must be at least 0 and below the threshold (40 W)")
    );
    assert_eq!(
        p.low_power.hysteresis_w, 5.0,
        "the refused value changed nothing"
    );
    let err = p
        .set_field("low_power_auto", &serde_json::json!("yes"))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("low_power_auto: \"yes\" is not true or false")
    );
    assert!(p
        .set_field("low_power_model", &serde_json::json!("llama3.2:1b"))
        .is_ok());
    let json = serde_json::to_value(&p).unwrap_or_default();
    assert_eq!(json["low_power_model"], "llama3.2:1b");
    assert_eq!(json["low_power_threshold_w"], 40.0);
}

#[test]
fn routing_settings_are_checked_as_they_are_set() {
    let mut p = Preferences::default();
    assert_eq!(p.low_power.action, crate::LowPowerAction::Advise);
    let err = |p: &mut Preferences, key: &str, v: serde_json::Value| {
        p.set_field(key, &v).err().map(|e| e.to_string())
    };
    assert_eq!(
        err(&mut p, "low_power_action", serde_json::json!("route")),
        None
    );
    assert_eq!(p.low_power.action, crate::LowPowerAction::Route);
    assert_eq!(
        err(&mut p, "low_power_action", serde_json::json!("fast")).as_deref(),
        Some("low_power_action: \"fast\" is not \"advise\" or \"route\"")
    );
    let routes = serde_json::json!({"llama3.1:70b": "llama3.2:3b", "*": "qwen3:1b"});
    assert_eq!(err(&mut p, "low_power_routes", routes), None);
    assert_eq!(p.low_power.routes.len(), 2);
    assert!(
        err(&mut p, "low_power_routes", serde_json::json!({"big": ""}))
            .is_some_and(|m| m.starts_with("low_power_routes: \"big\" → \"\""))
    );
    assert!(err(&mut p, "low_power_routes", serde_json::json!(["big"])).is_some());
    assert_eq!(
        p.low_power.routes.len(),
        2,
        "a refused value changed nothing"
    );
    assert_eq!(
        err(&mut p, "low_power_max_tokens", serde_json::json!(256)),
        None
    );
    assert_eq!(
        err(&mut p, "low_power_max_tokens", serde_json::json!(0)).as_deref(),
        Some("low_power_max_tokens: 0 is not between 1 and 1000000 tokens")
    );
    assert_eq!(
        err(&mut p, "low_power_max_tokens", serde_json::Value::Null),
        None
    );
    assert_eq!(p.low_power.max_tokens, None);
}

#[test]
fn every_key_is_what_serde_writes_and_set_field_takes_back() {
    let p = Preferences {
        carbon_g_per_kwh: Some(300.0),
        title_above_w: Some(5.0),
        ..Preferences::default()
    };
    let json = serde_json::to_value(&p).unwrap_or_default();
    let written: Vec<&str> = json
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut keys: Vec<&str> = Preferences::keys().collect();
    keys.sort_unstable();
    let mut written_sorted = written.clone();
    written_sorted.sort_unstable();
    assert_eq!(keys, written_sorted);
    let mut round = Preferences::default();
    for key in Preferences::keys() {
        round
            .set_field(key, &json[key])
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    assert_eq!(round, p);
}

#[test]
fn currencies_are_iso_codes() {
    assert!(Currency::parse("USD").is_ok());
    assert!(Currency::parse("usd").is_err());
    assert!(Currency::parse("EURO").is_err());
}

#[test]
fn sampling_interval_stays_between_100_ms_and_60_s() {
    assert!(Preferences::validate_interval(99).is_err());
    assert!(Preferences::validate_interval(100).is_ok());
    assert!(Preferences::validate_interval(60_000).is_ok());
    assert!(Preferences::validate_interval(60_001).is_err());
}

#[test]
fn durations_read_like_a_person_writes_them() {
    assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
    for bad in ["fast", "-1s", "0", "0s", "NaN", "inf", "", "5 parsecs"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} was taken");
    }
}
#[test]
fn the_update_manifest_url_is_off_by_default_and_only_http_or_https() {
    let mut p = Preferences::default();
    assert_eq!(p.update_manifest_url, None);
    for bad in [
        "file:///etc/passwd",
        "ftp://x/m.json",
        "https://",
        "https://a b/m.json",
        "42",
    ] {
        let err = p.set_field("update_manifest_url", &serde_json::json!(bad));
        assert!(err.is_err(), "{bad}");
    }
    assert!(p
        .set_field("update_manifest_url", &serde_json::json!(7))
        .is_err());
    assert_eq!(p.update_manifest_url, None);
    p.set_field(
        "update_manifest_url",
        &serde_json::json!(" https://wattbar.dev/latest.json "),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.update_manifest_url.as_deref(),
        Some("https://wattbar.dev/latest.json")
    );
    p.set_field("update_manifest_url", &serde_json::json!(null))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.update_manifest_url, None);
}

#[test]
fn each_battery_may_have_its_own_price_within_stated_limits() {
    let mut p = Preferences::default();
    let ok = serde_json::json!({
        "BAT0": {"price": 60.5, "rated_cycles": 500},
        "BAT1": {"price": 90.0}
    });
    assert!(p.set_field("battery_prices", &ok).is_ok());
    assert_eq!(p.battery_prices.len(), 2);
    assert_eq!(p.battery_prices["BAT0"].rated_cycles, Some(500));
    assert_eq!(p.battery_prices["BAT1"].rated_cycles, None);
    // The file keeps them as written.
    let stored = serde_json::to_value(&p).unwrap_or_default();
    assert_eq!(stored["battery_prices"], ok);
    let nine: serde_json::Map<String, serde_json::Value> = (0..9)
        .map(|i| (format!("BAT{i}"), serde_json::json!({"price": 1})))
        .collect();
    for (bad, why) in [
        (serde_json::json!(200), "an object of batteries by name"),
        (
            serde_json::json!({"BAT0": {"price": -1}}),
            "must be a positive price",
        ),
        (
            serde_json::json!({"BAT0": {"price": 50, "rated_cycles": 0}}),
            "between 1 and",
        ),
        (serde_json::json!({"BAT0": 50}), "each battery is"),
        (
            serde_json::json!({"../etc": {"price": 5}}),
            "is not a battery's name",
        ),
        (
            serde_json::Value::Object(nine),
            "9 batteries named, at most 8",
        ),
    ] {
        let err = p
            .set_field("battery_prices", &bad)
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains(why)),
            "{bad}: {err:?}"
        );
        // A refused value leaves the last good one.
        assert_eq!(p.battery_prices.len(), 2);
    }
}
