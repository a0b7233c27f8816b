use super::*;

#[test]
fn a_moment_is_now_a_unix_time_or_a_duration_back() {
    let now = 1_800_000_000.0;
    let at = |t: &str| parse_time(t, now).map_err(|e| e.to_string());
    assert_eq!(at("now"), Ok(now));
    assert_eq!(at("1700000000"), Ok(1_700_000_000.0));
    assert_eq!(at("24h"), Ok(now - 86_400.0));
    assert_eq!(at("7d"), Ok(now - 7.0 * 86_400.0));
    assert_eq!(at("1h 30m"), Ok(now - 5_400.0));
    for bad in ["-5", "yesterday", "NaN"] {
        assert!(at(bad).is_err(), "{bad:?} was taken");
    }
}

#[test]
fn a_negative_span_to_defer_within_is_refused_saying_why() {
    use clap::Parser;
    for (flag, value) in [
        ("--within", "-5h"),
        ("--duration", "-30m"),
        ("--within", "-5"),
    ] {
        let args = [
            "wattbar-cli",
            "run",
            "--defer",
            "cheapest",
            flag,
            value,
            "--",
            "true",
        ];
        let err = Cli::try_parse_from(args).err().map(|e| e.to_string());
        let err = err.unwrap_or_else(|| panic!("{flag} {value} was taken"));
        assert!(err.contains(flag) && err.contains("above zero"), "{err}");
    }
}

#[test]
fn an_interval_is_a_duration_within_the_sampling_bounds() {
    assert_eq!(parse_interval("5"), Ok(Duration::from_secs(5)));
    assert_eq!(parse_interval("100ms"), Ok(Duration::from_millis(100)));
    assert!(parse_interval("50ms").is_err());
    assert!(parse_interval("2m").is_err());
}
