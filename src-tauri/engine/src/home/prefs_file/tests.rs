use super::*;
use crate::home::kept_apart::{secrets_path, server_tokens_path};

#[test]
fn a_feed_token_written_by_hand_is_kept_and_moved_apart_never_dropped() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(
        &path,
        r#"{"price_feed": {"source": "entsoe", "zone": "10YBE----------2", "token": "s3cret"}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // A reader (the CLI's `run --defer`) takes it as written.
    let (p, _) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.price_feed.and_then(|f| f.token).as_deref(),
        Some("s3cret")
    );
    // The engine, starting, moves it out of the preferences file and into the secrets'.
    let (p, _, _) = load_or_set_aside(&path, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.price_feed.and_then(|f| f.token).as_deref(),
        Some("s3cret")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(!text.contains("s3cret") && text.contains("10YBE"), "{text}");
    let kept = crate::home::kept_apart::feed_tokens_path(&path);
    assert!(std::fs::read_to_string(kept).is_ok_and(|t| t.contains("s3cret")));
    let (p, _) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        p.price_feed.and_then(|f| f.token).as_deref(),
        Some("s3cret")
    );
}

#[test]
fn a_kept_secret_is_not_filled_in_for_an_address_edited_by_hand() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    let mut p = Preferences::default();
    p.set_field(
        "wall_meter",
        &serde_json::json!({"url": "http://ha.local:8123/api/states/sensor.desk", "token": "tok"}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    p.set_field(
        "price_feed",
        &serde_json::json!({"source": "tibber", "token": "tib"}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    p.set_field(
        "mqtt",
        &serde_json::json!({"url": "mqtt://broker.lan:1883", "password": "mq"}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "wall_meter").unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "price_feed").unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "mqtt").unwrap_or_else(|e| panic!("{e}"));
    let (read, _) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        read.wall_meter.and_then(|m| m.token).as_deref(),
        Some("tok")
    );
    assert_eq!(
        read.price_feed.and_then(|f| f.token).as_deref(),
        Some("tib")
    );
    assert_eq!(read.mqtt.and_then(|m| m.password).as_deref(), Some("mq"));
    // Only the port, then only the host, changed by hand; the feed pointed at a mirror;
    // the broker moved.
    for url in [
        "http://ha.local:8124/api/states/sensor.desk",
        "http://evil.example:8123/api/states/sensor.desk",
    ] {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let edited = text
            .replace("http://ha.local:8123/api/states/sensor.desk", url)
            .replace(
                "\"source\": \"tibber\"",
                "\"source\": \"tibber\", \"url\": \"http://127.0.0.1:9\"",
            )
            .replace("mqtt://broker.lan:1883", "mqtt://evil.example:1883");
        let elsewhere = dir.path().join("edited").join("preferences.json");
        std::fs::create_dir_all(dir.path().join("edited")).unwrap_or_else(|e| panic!("{e}"));
        for f in [
            "wall-meter.secret.json",
            "feeds.secret.json",
            "mqtt-password",
            "mqtt-password.origin",
        ] {
            std::fs::copy(dir.path().join(f), dir.path().join("edited").join(f))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(&elsewhere, edited).unwrap_or_else(|e| panic!("{e}"));
        let (read, _) = load(&elsewhere).unwrap_or_else(|e| panic!("{e}"));
        let meter = read.wall_meter.unwrap_or_else(|| panic!("no meter"));
        assert_eq!((meter.token, meter.has_secret), (None, false), "{url}");
        let feed = read.price_feed.unwrap_or_else(|| panic!("no feed"));
        assert_eq!((feed.token, feed.has_secret), (None, false));
        let mqtt = read.mqtt.unwrap_or_else(|| panic!("no broker"));
        assert_eq!((mqtt.password, mqtt.has_secret), (None, false));
    }
}

#[test]
fn a_missing_file_gives_defaults() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (p, problems) = load(&dir.path().join("nope.json")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p, Preferences::default());
    assert!(problems.is_empty());
}

#[test]
fn the_app_store_file_is_read_with_the_shared_schema() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(
        &path,
        r#"{"price_per_kwh":0.42,"low_power_threshold_w":20,"currency":"USD"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (p, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.price_per_kwh.per_kwh(), 0.42);
    assert_eq!(p.low_power.threshold_w, Some(20.0));
    assert_eq!(p.currency.as_str(), "USD");
    assert!(problems.is_empty());
}

#[test]
fn a_corrupt_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(&path, "{not json").unwrap_or_else(|e| panic!("{e}"));
    let err = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("preferences.json"), "{err}");
    std::fs::write(&path, "[1,2]").unwrap_or_else(|e| panic!("{e}"));
    assert!(load(&path).is_err());
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(&path, "\u{feff}{\"currency\": \"USD\"}").unwrap_or_else(|e| panic!("{e}"));
    let (p, _) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.currency.as_str(), "USD");
}

#[test]
fn an_unreadable_file_is_set_aside_and_the_engine_starts_on_defaults() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    for (i, bad) in ["{\"currency\": \"USD\",}", "", "[1]", "\u{feff}"]
        .iter()
        .enumerate()
    {
        std::fs::write(&path, bad).unwrap_or_else(|e| panic!("{e}"));
        let now = 1_800_000_000 + i as u64;
        let (p, _, notice) = load_or_set_aside(&path, now).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p, Preferences::default(), "{bad:?}");
        let aside = dir.path().join(format!("preferences.json.bad-{now}"));
        assert!(notice.is_some_and(|n| n.contains(&aside.display().to_string())));
        assert_eq!(std::fs::read_to_string(&aside).ok().as_deref(), Some(*bad));
        assert!(!path.exists());
    }
    std::fs::write(&path, r#"{"currency": "USD"}"#).unwrap_or_else(|e| panic!("{e}"));
    let (p, _, notice) = load_or_set_aside(&path, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.currency.as_str(), notice), ("USD", None));
}

#[test]
fn a_file_over_a_mebibyte_is_set_aside_unread() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    // Valid JSON, 1 MiB and 9 bytes: `{"currency": "USD"}` after a mebibyte of spaces.
    let big = format!("{}{{\"currency\": \"USD\"}}", " ".repeat(1024 * 1024 - 10));
    std::fs::write(&path, &big).unwrap_or_else(|e| panic!("{e}"));
    let (p, _, notice) = load_or_set_aside(&path, 7).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p, Preferences::default());
    assert!(
        notice.is_some_and(|n| n.contains("more than the 1048576 bytes it may hold")),
        "the notice says why"
    );
    assert!(dir.path().join("preferences.json.bad-7").exists());
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()));
    let err = load(&path).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("not a regular file"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_save_through_a_symlink_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let real = dir.path().join("dotfiles-prefs.json");
    let link = dir.path().join("preferences.json");
    std::fs::write(&real, "{}").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&real, &link).unwrap_or_else(|e| panic!("{e}"));
    let mut p = Preferences::default();
    p.set_field("currency", &serde_json::json!("USD"))
        .unwrap_or_else(|e| panic!("{e}"));
    save_field(&link, &p, "currency").unwrap_or_else(|e| panic!("{e}"));
    let still_link = std::fs::symlink_metadata(&link).map(|m| m.file_type().is_symlink());
    assert_eq!(still_link.ok(), Some(true));
    let text = std::fs::read_to_string(&real).unwrap_or_default();
    assert!(text.contains("USD"), "{text}");
}

#[test]
fn an_invalid_value_is_reported_and_its_default_kept() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(&path, r#"{"interval_ms": 5, "price_per_kwh": 0.2}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let (p, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.interval_ms, 1000);
    assert_eq!(p.price_per_kwh.per_kwh(), 0.2);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].to_string().contains("interval"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap_or_default(),
        r#"{"interval_ms": 5, "price_per_kwh": 0.2}"#
    );
}

#[test]
fn saving_a_field_changes_that_key_alone_and_keeps_what_the_user_wrote() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    // A refused value and a key from a newer Wattbar: both must survive a save.
    std::fs::write(
        &path,
        r#"{"interval_ms": 5, "price_per_kwh": 0.2, "later": [1]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (mut p, _) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    p.set_field("price_per_kwh", &serde_json::json!(0.4))
        .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "price_per_kwh").unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(
        stored,
        serde_json::json!({"interval_ms": 5, "price_per_kwh": 0.4, "later": [1]})
    );
    let (again, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.price_per_kwh.per_kwh(), 0.4);
    assert_eq!(problems.len(), 1, "the refused interval is still reported");
}

#[test]
fn a_file_that_is_not_an_object_is_not_overwritten_by_a_save() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    std::fs::write(&path, "[1,2]").unwrap_or_else(|e| panic!("{e}"));
    let err = save_field(&path, &Preferences::default(), "price_per_kwh")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("not a JSON object"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), "[1,2]");
}

#[test]
fn a_first_save_makes_the_file_with_that_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("data/preferences.json");
    let mut p = Preferences::default();
    p.set_field("currency", &serde_json::json!("USD"))
        .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "currency").unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let stored: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(stored, serde_json::json!({"currency": "USD"}));
}

#[test]
fn the_wall_meters_password_is_kept_apart_for_its_user_alone_and_comes_back() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    let mut p = Preferences::default();
    p.set_field(
        "wall_meter",
        &serde_json::json!({"url": "http://admin:hunter2@plug.lan", "channels": ["switch:0"]}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "wall_meter").unwrap_or_else(|e| panic!("{e}"));
    let prefs_text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(!prefs_text.contains("hunter2"), "{prefs_text}");
    let secret = secrets_path(&path);
    let mode = std::fs::metadata(&secret)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600);
    let (loaded, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(problems.is_empty(), "{problems:?}");
    let meter = loaded.wall_meter.unwrap_or_else(|| panic!("no wall meter"));
    assert_eq!(meter.url, "http://admin@plug.lan");
    assert_eq!(meter.password.as_deref(), Some("hunter2"));
    assert_eq!(meter.channels, ["switch:0"]);
    // No wall meter: no secret left behind.
    p.set_field("wall_meter", &serde_json::Value::Null)
        .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "wall_meter").unwrap_or_else(|e| panic!("{e}"));
    assert!(!secret.exists());
}

#[test]
fn a_model_servers_token_is_kept_apart_for_its_user_alone_and_comes_back() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("preferences.json");
    let mut p = Preferences::default();
    p.set_field(
        "server_metrics",
        &serde_json::json!([
            {"url": "http://127.0.0.1:8000", "kind": "vllm", "token": "sk-local-vllm"},
            "http://127.0.0.1:8080"
        ]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "server_metrics").unwrap_or_else(|e| panic!("{e}"));
    let prefs_text = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(!prefs_text.contains("sk-local-vllm"), "{prefs_text}");
    let secret = server_tokens_path(&path);
    let mode = std::fs::metadata(&secret)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600);
    let (loaded, problems) = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(problems.is_empty(), "{problems:?}");
    let tokens: Vec<_> = loaded
        .server_metrics
        .iter()
        .map(|s| (s.url.as_str(), s.kind.as_deref(), s.token.as_deref()))
        .collect();
    assert_eq!(
        tokens,
        [
            ("http://127.0.0.1:8000", Some("vllm"), Some("sk-local-vllm")),
            ("http://127.0.0.1:8080", None, None)
        ]
    );
    // No server with a token: no file left behind.
    p.set_field("server_metrics", &serde_json::json!([]))
        .unwrap_or_else(|e| panic!("{e}"));
    save_field(&path, &p, "server_metrics").unwrap_or_else(|e| panic!("{e}"));
    assert!(!secret.exists());
}
