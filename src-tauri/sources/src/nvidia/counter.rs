//! The energy counter: Δenergy into watts and a monotonic total across driver reloads, and
//! its update period inferred as Zeus does.

use super::*;

/// Turns a hardware energy counter (mJ, reset on driver reload) into watts and a monotonic total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergyCounter {
    baseline: Option<(Duration, u64)>,
    total: Joules,
}

impl EnergyCounter {
    /// Takes a counter value read at `at`. Returns the mean power since the baseline when the
    /// interval is usable (at least `min_interval` long, the counter did not go down, the result
    /// is plausible); otherwise `None` and nothing is added to [`EnergyCounter::total`].
    pub fn update(&mut self, at: Duration, mj: u64, min_interval: Duration) -> Option<Watts> {
        let Some((t0, e0)) = self.baseline else {
            self.baseline = Some((at, mj));
            return None;
        };
        if mj < e0 {
            // The driver reloaded and the counter restarted from 0: a new baseline.
            self.baseline = Some((at, mj));
            return None;
        }
        let dt = at.saturating_sub(t0);
        if dt.is_zero() || dt < min_interval {
            // Too soon: the counter may not have ticked yet. Keep the old baseline.
            return None;
        }
        let energy = Joules::from_millijoules((mj - e0) as f64);
        let watts = Watts(energy.0 / dt.as_secs_f64());
        self.baseline = Some((at, mj));
        if !watts.is_plausible() || watts.0 > MAX_GPU_WATTS {
            return None;
        }
        self.total += energy;
        Some(watts)
    }

    /// Energy counted over usable intervals since the first value.
    pub fn total(&self) -> Joules {
        self.total
    }

    /// How long ago (at `at`) the interval the next update measures began.
    pub fn since(&self, at: Duration) -> Option<Duration> {
        self.baseline.map(|(t0, _)| at.saturating_sub(t0))
    }

    /// True once a counter value has been seen: the GPU has an energy counter.
    pub fn has_started(&self) -> bool {
        self.baseline.is_some()
    }
}

/// Zeus's `infer_gpu_counter_update_period` over `(time, counter value)` samples taken as fast
/// as possible: drop the first [`PERIOD_PROBE_WARMUP`] samples, note the times at which the value
/// changed, and take the shortest time between two changes. `None` when the counter changed
/// fewer than twice (then use [`DEFAULT_COUNTER_UPDATE_PERIOD`]).
pub fn infer_counter_update_period(samples: &[(Duration, u64)]) -> Option<Duration> {
    let samples = samples.get(PERIOD_PROBE_WARMUP..)?;
    let (_, mut prev) = *samples.first()?;
    let mut changed_at = Vec::new();
    for &(t, v) in samples {
        if v != prev {
            changed_at.push(t);
            prev = v;
        }
    }
    changed_at
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .filter(|d| !d.is_zero())
        .min()
}

/// Polls GPU `index`'s energy counter (or, without one, its power reading) as fast as possible,
/// up to [`PERIOD_PROBE_SAMPLES`] times or [`PERIOD_PROBE_MAX`], with `now` as the clock.
pub fn probe_counter<G: Gpus + ?Sized>(
    gpus: &G,
    index: u32,
    now: &mut dyn FnMut() -> Duration,
) -> Vec<(Duration, u64)> {
    let use_energy = matches!(gpus.total_energy_mj(index), Ok(Some(_)));
    let start = now();
    let mut samples = Vec::with_capacity(PERIOD_PROBE_SAMPLES);
    while samples.len() < PERIOD_PROBE_SAMPLES {
        let value = if use_energy {
            gpus.total_energy_mj(index)
        } else {
            gpus.power_mw(index).map(|p| p.map(u64::from))
        };
        let t = now();
        match value {
            Ok(Some(v)) => samples.push((t, v)),
            _ => break,
        }
        if t.saturating_sub(start) >= PERIOD_PROBE_MAX {
            break;
        }
    }
    samples
}
