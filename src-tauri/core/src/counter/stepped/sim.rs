//! A simulated plug, for the tests of the counter and of the windows read from it: its true
//! energy grows at a power the test sets, its counter is that energy cut down to whole steps, it
//! answers once a second (each answer received 50 ms into the second), and the sampler reads
//! every 100 ms, as the engine does while a request is measured.

use super::{Answer, SteppedCounter};
use std::time::Duration;

pub(crate) const WH: f64 = 3_600.0;

pub(crate) fn ms(t: u64) -> Duration {
    Duration::from_millis(t)
}

pub(crate) struct Plug {
    /// Watts from each moment on: (from ms, watts).
    pub power: Vec<(u64, f64)>,
    /// True energy at 0 ms.
    pub start_joules: f64,
    pub step: f64,
    /// What the device's power reading is of the true power.
    pub reads: f64,
}

impl Plug {
    pub fn watts(&self, t: u64) -> f64 {
        self.power
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .map_or(0.0, |(_, w)| *w)
    }

    /// The true energy at `t` ms.
    pub fn truth(&self, t: u64) -> f64 {
        let mut e = self.start_joules;
        for (i, (from, w)) in self.power.iter().enumerate() {
            let to = self.power.get(i + 1).map_or(u64::MAX, |p| p.0).min(t);
            if to > *from {
                e += w * (to - from) as f64 / 1000.0;
            }
        }
        e
    }

    pub fn counter(&self, t: u64) -> f64 {
        (self.truth(t) / self.step).floor() * self.step
    }
}

/// Samples every 100 ms from 0 to `until` ms; at each, the newest answer (if new) is taken
/// first. `counter_of` may distort what the device reports. Answers the total at every sample.
pub(crate) fn run(
    plug: &Plug,
    until: u64,
    counter_of: impl Fn(u64, f64) -> f64,
) -> Vec<(u64, f64)> {
    run_timed(plug, until, counter_of, |_| 0)
}

/// [`run`], with each answer made at its moment and received `late(moment)` ms after it, as an
/// answer slowed by a busy device or machine is.
pub(crate) fn run_timed(
    plug: &Plug,
    until: u64,
    counter_of: impl Fn(u64, f64) -> f64,
    late: impl Fn(u64) -> u64,
) -> Vec<(u64, f64)> {
    let mut c = SteppedCounter::new(4_000.0);
    let mut out = Vec::new();
    let mut answered = None;
    for t in (0..=until).step_by(100) {
        // The newest answer in by now: made at `m`, in `late(m)` ms after.
        let newest = (t >= 50)
            .then(|| (t - 50) / 1000 * 1000 + 50)
            .and_then(|m| {
                [Some(m), m.checked_sub(1000)]
                    .into_iter()
                    .flatten()
                    .find(|m| m + late(*m) <= t)
            });
        if newest.is_some() && newest > answered {
            answered = newest;
            let at = newest.unwrap_or_default();
            // Timed as the source times it: halfway through the round trip, within half of it.
            let half = late(at) / 2;
            c.answer(Answer {
                at: ms(at + half),
                counter: Some(counter_of(at, plug.counter(at))),
                watts: Some(plug.watts(at) * plug.reads),
                resolution: Some(plug.step),
                within: ms(half),
            });
        }
        if let Some(total) = c.total_at(ms(t)) {
            out.push((t, total.0));
        }
    }
    out
}

pub(crate) fn total_at(totals: &[(u64, f64)], t: u64) -> f64 {
    totals
        .iter()
        .find(|(at, _)| *at == t)
        .map_or(f64::NAN, |(_, j)| *j)
}
