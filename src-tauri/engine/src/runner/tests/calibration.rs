//! Calibration in the running engine: learned while a plug reads beside the parts, standing in
//! for the plug once it is gone, and kept across a restart.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use wattbar_core::calibration::CALIBRATED_SOURCE;
use wattbar_core::{Domain, Error as SourceError, Reading, Scope, Stamp};

/// The parts' watts at `t` seconds: 10–90 W, 60 s at each level.
fn parts_at(t: f64) -> f64 {
    const LEVELS: [f64; 9] = [10.0, 50.0, 30.0, 90.0, 20.0, 70.0, 40.0, 80.0, 60.0];
    LEVELS[(t / 60.0) as usize % LEVELS.len()]
}

/// What the wall draws: 1.6 W per watt of the parts over a 25 W floor.
fn truth(parts: f64) -> f64 {
    1.6 * parts + 25.0
}

/// A machine whose sensors read its CPU package, on a plug that reads the wall (±1 %, the same
/// on every run) while `plugged`.
struct Rig {
    plugged: Arc<AtomicBool>,
    n: u64,
}

impl Source for Rig {
    fn id(&self) -> &str {
        "rig"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, SourceError> {
        let t = at.monotonic.as_secs_f64();
        let parts = parts_at(t);
        let cpu = Reading::power(Domain::Cpu, Watts(parts), "rig", Quality::Measured, at);
        if !self.plugged.load(Ordering::SeqCst) {
            return Ok(vec![cpu]);
        }
        self.n += 1;
        let wobble = 0.01 * (((self.n * 7919) % 21) as f64 - 10.0) / 10.0;
        let wall = truth(parts) * (1.0 + wobble);
        Ok(vec![
            cpu,
            Reading::power(Domain::Wall, Watts(wall), "rig", Quality::Measured, at),
        ])
    }
}

fn rig(plugged: bool) -> (Chain, Arc<AtomicBool>) {
    let flag = Arc::new(AtomicBool::new(plugged));
    let source: Box<dyn Source> = Box::new(Rig {
        plugged: Arc::clone(&flag),
        n: 0,
    });
    (Chain::new(vec![source]), flag)
}

fn headline(p: &PublishedState) -> Option<Reading> {
    p.snapshot.as_ref().and_then(|s| s.headline.clone())
}

#[tokio::test(start_paused = true)]
async fn a_fit_learned_beside_a_plug_stands_in_for_it_when_unplugged_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let (chain, plugged) = rig(true);
    let engine = start(chain, config(Preferences::default()).with_store(db.clone()));
    let mut rx = engine.subscribe();
    // Twelve windows of 30 s at the least: a fit within 2 % of the truth.
    let learned = wait_for(&mut rx, |p| p.energy.calibration.learned.is_some()).await;
    let fit = learned
        .energy
        .calibration
        .learned
        .clone()
        .unwrap_or_else(|| panic!("no fit"));
    assert_eq!(fit.reference, Scope::Wall);
    assert_eq!(fit.covers, ["cpu-package"]);
    assert!((fit.fit.slope - 1.6).abs() < 0.02 * 1.6, "{fit:?}");
    assert!((fit.fit.offset_watts - 25.0).abs() < 0.02 * 25.0, "{fit:?}");
    // While the plug reads, the headline is the plug's own.
    assert_eq!(
        headline(&learned).map(|h| h.quality),
        Some(Quality::Measured)
    );

    plugged.store(false, Ordering::SeqCst);
    let calibrated = wait_for(&mut rx, |p| {
        headline(p).is_some_and(|h| h.quality == Quality::Calibrated)
    })
    .await;
    let head = headline(&calibrated).unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.source, CALIBRATED_SOURCE);
    let snapshot = calibrated.snapshot.as_ref().unwrap_or_else(|| panic!());
    assert_eq!(snapshot.coverage().map(|c| c.scope), Some(Scope::Wall));
    let parts = snapshot
        .components()
        .map(|(w, _)| w.0)
        .unwrap_or_else(|| panic!("no parts"));
    let bound = calibrated
        .energy
        .calibration
        .bound_watts
        .unwrap_or_else(|| panic!("no bound"));
    let watts = head.watts.unwrap_or_default().0;
    assert!(bound > 0.0);
    assert!(
        (watts - truth(parts)).abs() <= bound,
        "{watts} W ± {bound} W against {} W",
        truth(parts)
    );
    // Unplugging changed no scope: the session is still the wall's.
    let later = wait_for(&mut rx, |p| {
        p.energy.session.joules.0 > calibrated.energy.session.joules.0
    })
    .await;
    assert_eq!(later.energy.session.scope, Some(Scope::Wall));
    assert!(later.energy.session.scope_changes.is_empty());
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));

    // Restarted without the plug: the kept fit stands in from the first sample.
    let (chain, _) = rig(false);
    let engine = start(chain, config(Preferences::default()).with_store(db));
    let mut rx = engine.subscribe();
    let first = wait_for(&mut rx, |p| p.snapshot.is_some()).await;
    assert_eq!(
        headline(&first).map(|h| h.quality),
        Some(Quality::Calibrated)
    );
    // The fit in use when the plug went, as it was.
    assert_eq!(
        first.energy.calibration.learned,
        calibrated.energy.calibration.learned
    );
    engine.stop();
}
