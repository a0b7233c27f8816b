//! Suspend, wall-clock steps and a source that stalls.

use super::*;
use wattbar_core::inference::WindowEnergy;

fn gpu_engine(clock: &ManualClock, db: PathBuf) -> EngineHandle {
    let config = EngineConfig::new(Preferences::default())
        .with_clock(Arc::new(clock.clone()))
        .with_store(db);
    start(Chain::new(vec![Box::new(Gpu(clock.clone()))]), config)
}

fn gpu_lifetime(p: &PublishedState) -> f64 {
    p.kept
        .committed
        .by_domain
        .iter()
        .find(|(d, _)| d == "gpu")
        .map(|(_, j)| *j)
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn a_suspend_adds_nothing_not_even_from_a_counter_that_kept_counting() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = gpu_engine(&clock, dir.path().join("wattbar.db"));
    let mut rx = engine.subscribe();
    let before = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 1_000.0).await;
    assert_eq!(before.energy.method, Some(Method::Counter));
    let asleep_at = before.energy.session.joules.0;
    // An hour asleep: the counter says 360 kJ more.
    clock.sleep(Duration::from_secs(3600));
    let after = wait_for(&mut rx, |p| {
        p.energy.session.joules.0 >= asleep_at + 1_000.0
    })
    .await;
    assert_eq!(after.energy.session.gaps, 1);
    // 10 s after waking at 100 W, give or take the interval the gap swallowed.
    assert!(
        after.energy.session.joules.0 <= asleep_at + 1_100.0,
        "{}",
        after.energy.session.joules.0
    );
    assert!(
        gpu_lifetime(&after) <= after.energy.session.joules.0 + 1e-6,
        "{after:?}"
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(start_paused = true)]
async fn wall_clock_steps_either_way_move_no_energy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = gpu_engine(&clock, dir.path().join("wattbar.db"));
    let mut rx = engine.subscribe();
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 1_000.0).await;
    clock.step_wall(3600.0);
    wait_for(&mut rx, |p| p.energy.session.joules.0 >= 2_000.0).await;
    clock.step_wall(-7200.0);
    let done = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 4_000.0).await;
    // 40 s at 100 W, by counter, with no gap and nothing lost or added at either step.
    assert_eq!(done.energy.session.gaps, 0);
    assert_eq!(done.energy.session.joules.0, 4_000.0);
    // The committed lifetime trails by at most one batch (10 s at 100 W), and gained nothing.
    let committed = gpu_lifetime(&done);
    assert!(
        (3_000.0 - 1e-6..=4_000.0 + 1e-6).contains(&committed),
        "{committed}"
    );
    // The sparkline follows the wall clock back instead of keeping points from the future.
    let recent: Vec<Point> = engine.recent();
    assert!(recent.windows(2).all(|w| w[0].t <= w[1].t));
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}

/// A source that takes a long time to answer, like an Ollama that does not reply.
struct Stalling;

impl Source for Stalling {
    fn id(&self) -> &str {
        "ollama"
    }
    fn quality(&self) -> Quality {
        Quality::Heuristic
    }
    fn read(&mut self, _at: Stamp) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        std::thread::sleep(Duration::from_millis(1500));
        Ok(Vec::new())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalling_source_never_holds_the_async_thread_that_serves_readers() {
    // One async thread, as a small daemon has. While the source stalls for 1.5 s, another
    // task on that thread must keep running: the sampling work is on the engine thread.
    let engine = start(
        Chain::new(vec![Box::new(Stalling)]),
        EngineConfig::new(Preferences::default()),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut ticks = 0u32;
    let until = std::time::Instant::now() + Duration::from_millis(1000);
    while std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
        ticks += 1;
    }
    // Blocked, it runs about once; free, about 100 times (20 leaves room for a loaded machine).
    assert!(
        ticks >= 20,
        "the async thread ran only {ticks} times in 1 s"
    );
    engine.stop();
}

#[tokio::test(start_paused = true)]
async fn a_window_reads_the_same_from_memory_and_once_it_left_memory_from_the_store() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let clock = ManualClock::new(1_800_000_000.0);
    let engine = gpu_engine(&clock, dir.path().join("wattbar.db"));
    let mut rx = engine.subscribe();
    let before = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 1_000.0).await;
    let from = before.snapshot.as_ref().map_or(0.0, |s| s.at.unix_seconds) - 4.5;
    // 30 s asleep: not measured, in memory or in the store.
    clock.sleep(Duration::from_secs(30));
    let after = wait_for(&mut rx, |p| p.energy.session.joules.0 >= 2_000.0).await;
    let to = after.snapshot.as_ref().map_or(0.0, |s| s.at.unix_seconds) - 2.5;
    let reader = engine.reader();
    let in_memory = reader
        .energy(from, to)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // 100 W over the measured part; the 30 s asleep are not covered.
    let measured = in_memory.covered_fraction * (to - from);
    assert!(
        (to - from - measured - 30.0).abs() < 1.5,
        "{in_memory:?} over {} s",
        to - from
    );
    // Some fifteen minutes on, the window has left memory and is read from the store.
    wait_for(&mut rx, |p| {
        p.inference
            .intervals
            .iter()
            .next()
            .is_some_and(|i| i.unix_start > to)
    })
    .await;
    let stored = reader
        .energy(from, to)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (
        in_memory.joules.unwrap_or(f64::NAN),
        stored.joules.unwrap_or(f64::NAN),
    );
    assert!((a - b).abs() <= 1e-3 * a, "{in_memory:?} then {stored:?}");
    assert!(
        (in_memory.covered_fraction - stored.covered_fraction).abs() <= 1e-3,
        "{in_memory:?} then {stored:?}"
    );
    // The GPU's part, how it was measured and how far it may be off, as in memory.
    let gpu = |e: &WindowEnergy| {
        e.by_domain
            .iter()
            .find(|(d, _)| d == "gpu")
            .map_or(f64::NAN, |(_, j)| *j)
    };
    assert!(
        (gpu(&in_memory) - gpu(&stored)).abs() <= 1e-3 * a,
        "{in_memory:?} then {stored:?}"
    );
    assert_eq!(stored.quality, Some(Quality::Measured));
    assert!(
        stored.bound_joules.is_some()
            && (in_memory.bound_joules.unwrap_or(f64::NAN) - stored.bound_joules.unwrap_or(0.0))
                .abs()
                <= 1e-3 * a,
        "{in_memory:?} then {stored:?}"
    );
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}
