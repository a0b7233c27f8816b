//! Preferences: one field at a time from the engine's own, saved to the one file, published
//! before the answer; refusals say why and change nothing.

use super::*;

/// An engine that saves its preferences to `preferences.json` in `dir`, which may already hold
/// `written` (what the user wrote by hand).
fn saving_to(dir: &std::path::Path, written: Option<&str>) -> (EngineHandle, PathBuf) {
    let file = dir.join("preferences.json");
    if let Some(text) = written {
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut config = config(Preferences::default());
    config.preferences_file = Some(file.clone());
    (start(replay("t,watts\n0,10\n"), config), file)
}

#[tokio::test(start_paused = true)]
async fn a_preference_is_saved_and_published_before_the_answer() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let written = r#"{"currency": "EUR", "written_by_hand": true}"#;
    let (engine, file) = saving_to(dir.path(), Some(written));
    let reader = engine.reader();
    let prefs = reader
        .set_preference("price_per_kwh", serde_json::json!(0.31))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prefs.price_per_kwh.per_kwh(), 0.31);
    // Whoever was answered reads the new state at once, with no waiting.
    assert_eq!(reader.current().prefs.price_per_kwh.per_kwh(), 0.31);
    assert_eq!(reader.current().energy.price_per_kwh, 0.31);
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap_or_default())
            .unwrap_or_default();
    assert_eq!(
        stored,
        serde_json::json!({"currency": "EUR", "written_by_hand": true, "price_per_kwh": 0.31})
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn quick_changes_each_start_from_the_last_so_none_undoes_another() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (engine, file) = saving_to(dir.path(), None);
    let reader = engine.reader();
    // Sent together, not one after another's answer: the engine takes them in order.
    let (a, b) = tokio::join!(
        reader.set_preference("price_per_kwh", serde_json::json!(0.2)),
        reader.set_preference("carbon_g_per_kwh", serde_json::json!(120)),
    );
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
    let (loaded, problems) = crate::home::prefs_file::load(&file).unwrap_or_else(|e| panic!("{e}"));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(loaded.price_per_kwh.per_kwh(), 0.2);
    assert_eq!(loaded.carbon_g_per_kwh, Some(120.0));
    assert_eq!(loaded, *reader.current().prefs);
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_refused_field_names_itself_and_nothing_is_saved() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (engine, file) = saving_to(dir.path(), None);
    let reader = engine.reader();
    match reader
        .set_preference("interval_ms", serde_json::json!(5))
        .await
    {
        Err(Error::Invalid(wattbar_core::Error::Invalid { field, .. })) => {
            assert_eq!(field, "interval")
        }
        other => panic!("{other:?}"),
    }
    match reader
        .set_preference("no_such_thing", serde_json::json!(1))
        .await
    {
        Err(Error::Refused(why)) => assert!(why.contains("no_such_thing"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!file.exists(), "a refused change wrote the file");
    assert_eq!(*reader.current().prefs, Preferences::default());
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_refused_preference_tells_whoever_asked_why() {
    let engine = start(replay("t,watts\n0,10\n"), config(Preferences::default()));
    let bad = Preferences {
        interval_ms: 5,
        ..Preferences::default()
    };
    match engine.reader().set_preferences(bad).await {
        Err(Error::Refused(why)) => assert!(why.contains("interval"), "{why}"),
        other => panic!("{other:?}"),
    }
    let good = Preferences {
        currency: Currency::default(),
        price_per_kwh: Price::new(0.3).unwrap_or_default(),
        ..Preferences::default()
    };
    assert!(engine.reader().set_preferences(good).await.is_ok());
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_new_currency_starts_a_new_session_so_no_session_mixes_two() {
    let engine = start(replay("t,watts\n0,3600\n"), config(Preferences::default()));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.energy.session.kwh >= 0.01).await;
    let usd = Currency::parse("USD").unwrap_or_else(|e| panic!("{e}"));
    let prefs = engine
        .reader()
        .set_preference("currency", serde_json::json!("USD"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prefs.currency, usd);
    let after = wait_for(&mut rx, |p| p.prefs.currency == usd).await;
    assert_eq!(after.energy.session.currency, usd);
    assert!(
        after.energy.session.kwh < 0.01,
        "{:?}",
        after.energy.session
    );
    engine.stop();
}

/// MQTT and OTLP follow the preferences in every program; they wake for a change of them, not
/// for each of the 60 samples of a minute.
#[tokio::test(start_paused = true)]
async fn the_preferences_wake_their_followers_when_they_change_and_only_then() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (engine, _) = saving_to(dir.path(), None);
    let reader = engine.reader();
    let mut prefs = reader.preferences();
    prefs.borrow_and_update();
    let mut rx = engine.subscribe();
    let start = wait_for(&mut rx, |p| p.snapshot.is_some()).await.seq;
    wait_for(&mut rx, |p| p.seq >= start + 60).await;
    assert!(
        !prefs.has_changed().unwrap_or(true),
        "woken by samples, not by a change"
    );
    reader
        .set_preference("price_per_kwh", serde_json::json!(0.31))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(prefs.has_changed().unwrap_or(false));
    assert_eq!(prefs.borrow_and_update().price_per_kwh.per_kwh(), 0.31);
    engine.stop();
}
