//! The pace at rest: 5 s while nobody looks and a counter keeps the energy exact, the configured
//! 1 s again within one interval of someone looking.

use super::*;
use wattbar_core::inference::Route;

/// The engine's clock at a published sample.
fn at(p: &PublishedState) -> Duration {
    p.snapshot
        .as_ref()
        .map_or(Duration::ZERO, |s| s.at.monotonic)
}

/// The next two samples after `p`: the gap between them.
async fn next_gap(rx: &mut watch::Receiver<Arc<PublishedState>>, p: &PublishedState) -> Duration {
    let t0 = at(p);
    let a = wait_for(rx, |q| at(q) > t0).await;
    let t1 = at(&a);
    let b = wait_for(rx, |q| at(q) > t1).await;
    at(&b) - t1
}

fn resting_engine(clock: &ManualClock, source: Box<dyn Source>) -> EngineHandle {
    let config = EngineConfig::new(Preferences::default())
        .with_clock(Arc::new(clock.clone()))
        .resting_when_unwatched();
    start(Chain::new(vec![source]), config)
}

#[tokio::test(start_paused = true)]
async fn on_a_counter_nobody_looking_it_samples_every_5_s_and_one_request_brings_back_1_s() {
    use crate::time::clock::Clock;
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = resting_engine(&clock, Box::new(Gpu(clock.clone())));
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    let started = at(&first);
    assert_eq!(first.pace.period_ms, 1000);
    // Nobody asked for 30 s: at rest.
    let resting = wait_for(&mut rx, |p| p.pace.period_ms == 5000).await;
    assert!(at(&resting) - started >= Duration::from_secs(30));
    assert_eq!(next_gap(&mut rx, &resting).await, Duration::from_secs(5));
    // The counter keeps every joule: 100 W over every second since the first sample.
    let later = wait_for(&mut rx, |p| at(p) >= at(&resting) + Duration::from_secs(20)).await;
    let seconds = (at(&later) - started).as_secs_f64();
    let joules = later.energy.session.joules.0;
    assert!(
        (joules - 100.0 * seconds).abs() < 1e-6,
        "{joules} J in {seconds} s"
    );

    // An API request: once the engine has it, the next sample comes within one configured
    // interval, and the one after 1 s later. (Its thread takes the request while the test's
    // paused clock may run on: the interval is counted from when the engine said it was awake.)
    engine.reader().asked();
    let awake = wait_for(&mut rx, |p| p.pace.period_ms == 1000).await;
    let told = clock.elapsed();
    let next = wait_for(&mut rx, |p| at(p) > at(&awake)).await;
    assert!(
        at(&next) <= told + Duration::from_secs(1),
        "{:?}",
        at(&next) - told
    );
    assert_eq!(next_gap(&mut rx, &next).await, Duration::from_secs(1));
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_proxy_request_or_an_open_stream_keeps_it_at_its_pace() {
    use crate::time::clock::Clock;
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = resting_engine(&clock, Box::new(Gpu(clock.clone())));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.pace.period_ms == 5000).await;
    // A proxy request starts: sampled at the fast pace from when the engine has it.
    let request = engine
        .reader()
        .reporter()
        .begin(Route::OllamaChat, Some("llama3".into()));
    let began = wait_for(&mut rx, |p| p.inference.inflight == 1).await;
    let told = clock.elapsed();
    let fast = wait_for(&mut rx, |p| at(p) > at(&began)).await;
    assert!(
        at(&fast) <= told + INFERENCE_INTERVAL,
        "{:?}",
        at(&fast) - told
    );
    assert_eq!(next_gap(&mut rx, &fast).await, INFERENCE_INTERVAL);
    request.abandon();
    // An open stream: awake however long nobody asks anything else.
    let stream = engine.reader().watching();
    let awake = wait_for(&mut rx, |p| p.pace.period_ms == 1000).await;
    let held = wait_for(&mut rx, |p| at(p) >= at(&awake) + Duration::from_secs(120)).await;
    assert_eq!(held.pace.period_ms, 1000);
    assert_eq!(next_gap(&mut rx, &held).await, Duration::from_secs(1));
    // Closed, nobody having asked for far longer than 30 s: at rest from the next sample.
    drop(stream);
    let closed = clock.elapsed();
    let resting = wait_for(&mut rx, |p| p.pace.period_ms == 5000).await;
    assert!(
        at(&resting) <= closed + Duration::from_secs(1),
        "{:?}",
        at(&resting) - closed
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn an_integrated_headline_keeps_its_pace_since_its_error_grows_with_the_interval() {
    let clock = ManualClock::new(1_800_000_000.0);
    let trace = parse_trace("t,watts\n0,100\n").unwrap_or_else(|e| panic!("{e}"));
    let engine = resting_engine(&clock, Box::new(ReplaySource::new(trace)));
    let mut rx = engine.subscribe();
    let later = wait_for(&mut rx, |p| at(p) >= Duration::from_secs(120)).await;
    assert_eq!(later.pace.period_ms, 1000);
    assert_eq!(next_gap(&mut rx, &later).await, Duration::from_secs(1));
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_proxy_request_that_starts_at_rest_is_measured_whole_by_the_counter() {
    use wattbar_core::inference::{ServerFigures, Status};
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = resting_engine(&clock, Box::new(Gpu(clock.clone())));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.pace.period_ms == 5000).await;
    // Up to 5 s after the last sample at rest, a 2 s answer of 100 tokens: at 100 W counted,
    // every second of it is 100 J, whatever the pace was when it began.
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let request = engine
        .reader()
        .reporter()
        .begin(Route::OllamaChat, Some("llama3".into()));
    let id = request.record_id();
    tokio::time::sleep(Duration::from_secs(2)).await;
    request.finish(
        Status::Ok,
        ServerFigures {
            model: Some("llama3".into()),
            completion_tokens: Some(100),
            ..ServerFigures::default()
        },
    );
    let settled = wait_for(&mut rx, |p| p.inference.records.iter().any(|r| r.id == id)).await;
    let r = settled
        .inference
        .records
        .iter()
        .find(|r| r.id == id)
        .cloned()
        .unwrap_or_else(|| panic!("record {id}"));
    let seconds = r.end - r.start;
    let joules = r.energy_joules.unwrap_or(f64::NAN);
    assert!(seconds >= 2.0, "{seconds}");
    assert!(
        (joules - 100.0 * seconds).abs() < 1e-6,
        "{joules} J over {seconds} s"
    );
    assert_eq!(r.covered, Some(1.0));
    engine.stop();
}
