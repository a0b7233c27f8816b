//! Graded profiles: kept in the ledger through the engine, restored at start, and the cheapest
//! good-enough model advised where `low_power_model` is `auto`.

use super::*;
use wattbar_core::eval::best::KeptProfile;
use wattbar_core::eval::compare::Run;
use wattbar_core::policy::AUTO_MODEL;
use wattbar_ledger::store::profiles::StoredProfile;

/// `model` profiled on GSM8K's first 40: `correct` of 40 right at `joules` a query.
fn profile(model: &str, at: f64, correct: u64, joules: f64) -> StoredProfile {
    StoredProfile {
        profile: KeptProfile {
            at,
            eval: "gsm8k-test-first40".into(),
            queries: 40,
            run: Run {
                label: model.into(),
                model: model.into(),
                machine: Some("desk".into()),
                sources: vec!["rapl".into()],
                graders: vec!["number".into()],
                scope: None,
                correct,
                incorrect: 40 - correct,
                accuracy: Some(correct as f64 / 40.0),
                avg_per_query_energy_joules: Some(joules),
                joules_per_correct_answer: (correct > 0).then(|| joules * 40.0 / correct as f64),
                intelligence_per_joule: Some(correct as f64 / 40.0 / joules),
                itl_seconds_median: Some(0.02),
            },
        },
        summary: "{}".into(),
    }
}

fn auto(min_accuracy: f64) -> Preferences {
    let mut prefs = Preferences::default();
    prefs.low_power.model = AUTO_MODEL.into();
    prefs.low_power.min_accuracy = min_accuracy;
    prefs
}

#[tokio::test(start_paused = true)]
async fn auto_advises_the_cheapest_profiled_model_good_enough_and_remembers_after_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let engine = start(
        replay("t,watts\n0,40\n"),
        config(auto(0.5)).with_store(db.clone()),
    );
    let reader = engine.reader();
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    assert_eq!(first.low_power.advice.recommended_model, None);
    // big: 36 of 40 at 40 J a query (Wilson lower bound 76.9 %); small: 30 of 40 at 12 J
    // (59.8 %); tiny: 4 of 40 at 5 J (4.0 %). The auto model acts by itself: it is chosen by
    // the lower bound.
    for p in [
        profile("big", 1.0, 36, 40.0),
        profile("small", 2.0, 30, 12.0),
        profile("tiny", 3.0, 4, 5.0),
    ] {
        reader
            .record_profile(p)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // Answered once published: the state read now has all three and the choice.
    let now = engine.current();
    assert_eq!(now.inference.profiles.len(), 3);
    assert_eq!(
        now.low_power.advice.recommended_model.as_deref(),
        Some("small")
    );
    // A profile that cannot be one is refused, and changes nothing.
    let mut bad = profile("odd", 4.0, 24, 12.0);
    bad.profile.run.accuracy = Some(1.5);
    assert!(matches!(
        reader.record_profile(bad).await,
        Err(crate::Error::Refused(_))
    ));
    // Nor one whose accuracy is not its counts': "100 %" of nothing graded.
    let mut empty = profile("empty", 4.0, 0, 12.0);
    (empty.profile.run.incorrect, empty.profile.run.accuracy) = (0, Some(1.0));
    let refused = reader.record_profile(empty).await;
    assert!(
        matches!(&refused, Err(crate::Error::Refused(why)) if why.contains("0 correct of 0 graded")),
        "{refused:?}"
    );
    assert_eq!(engine.current().inference.profiles.len(), 3);
    // A stricter target: only big is good enough.
    reader
        .set_preferences(auto(0.7))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        engine
            .current()
            .low_power
            .advice
            .recommended_model
            .as_deref(),
        Some("big")
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));

    // Restarted: the profiles are the ledger's, and so is the choice.
    let engine = start(replay("t,watts\n0,40\n"), config(auto(0.5)).with_store(db));
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    let models: Vec<&str> = first
        .inference
        .profiles
        .iter()
        .map(|p| p.run.model.as_str())
        .collect();
    assert_eq!(models, ["big", "small", "tiny"]);
    assert_eq!(
        first.low_power.advice.recommended_model.as_deref(),
        Some("small")
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}
