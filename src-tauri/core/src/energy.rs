//! Energy from power samples: the trapezoid rule with an explicit gap policy.
//!
//! Formula: for consecutive valid samples (t₀, P₀), (t₁, P₁) on a monotonic clock,
//! E += (P₀ + P₁) / 2 × (t₁ − t₀).
//!
//! Gap policy:
//! - an interval up to the gap threshold (default 10 s) is integrated linearly;
//! - a longer interval (sleep, suspend, a stalled source) adds no energy and is recorded as a
//!   [`Gap`] with its length. The last value is never held across it;
//! - a sample that is absent, NaN, infinite or negative contributes nothing: it is skipped, and the
//!   next valid sample is joined to the last valid one under the same threshold;
//! - a time that does not move forward starts a new baseline and adds nothing;
//! - power above [`MAX_POWER_WATTS`] is clamped to it and counted in `clamped`;
//! - every gap is counted; the first [`MAX_LISTED_GAPS`] are kept with their times, so that an
//!   integrator that runs for months holds bounded memory.
//!
//! Non-goals: hardware energy counters (deltas of counters need no integration), persistence,
//! and wall-clock handling. The caller passes a monotonic time and reports suspends it detected
//! with [`Integrator::interrupt`].

use crate::units::{Joules, Watts};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Longest interval that is still integrated.
pub const DEFAULT_GAP_THRESHOLD: Duration = Duration::from_secs(10);

/// No machine Wattbar watches draws more than this; a larger value is a broken sensor.
pub const MAX_POWER_WATTS: f64 = 100_000.0;

/// The most gaps an integrator lists with their times; later ones are only counted.
pub const MAX_LISTED_GAPS: usize = 1_000;

/// An interval that added no energy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// Monotonic time, in seconds, at which the gap started.
    pub from: f64,
    pub seconds: f64,
}

#[derive(Debug, Clone)]
pub struct Integrator {
    gap_threshold: Duration,
    last: Option<(Duration, Watts)>,
    total: Joules,
    gaps: Vec<Gap>,
    gap_count: usize,
    clamped: u64,
}

impl Default for Integrator {
    fn default() -> Self {
        Integrator::new(DEFAULT_GAP_THRESHOLD)
    }
}

impl Integrator {
    pub fn new(gap_threshold: Duration) -> Self {
        Integrator {
            gap_threshold,
            last: None,
            total: Joules(0.0),
            gaps: Vec::new(),
            gap_count: 0,
            clamped: 0,
        }
    }

    /// Adds a sample taken at monotonic time `t` and returns the energy this step added.
    pub fn push(&mut self, t: Duration, watts: Option<Watts>) -> Joules {
        let Some(w) = watts.filter(|w| w.is_plausible()) else {
            return Joules(0.0);
        };
        let w = if w.0 > MAX_POWER_WATTS {
            self.clamped += 1;
            Watts(MAX_POWER_WATTS)
        } else {
            w
        };
        let added = match self.last {
            Some((t0, w0)) if t > t0 => {
                let dt = t - t0;
                if dt > self.gap_threshold {
                    self.note_gap(Gap {
                        from: t0.as_secs_f64(),
                        seconds: dt.as_secs_f64(),
                    });
                    Joules(0.0)
                } else {
                    Joules((w0.0 + w.0) / 2.0 * dt.as_secs_f64())
                }
            }
            _ => Joules(0.0),
        };
        self.total += added;
        self.last = Some((t, w));
        added
    }

    /// The machine was suspended (or the clock jumped) before `t`: forget the last sample so that
    /// nothing is integrated across it, and record the gap.
    pub fn interrupt(&mut self, t: Duration, seconds: f64) {
        self.last = None;
        self.note_gap(Gap {
            from: t.as_secs_f64(),
            seconds,
        });
    }

    fn note_gap(&mut self, gap: Gap) {
        self.gap_count += 1;
        if self.gaps.len() < MAX_LISTED_GAPS {
            self.gaps.push(gap);
        }
    }

    pub fn total(&self) -> Joules {
        self.total
    }

    pub fn set_gap_threshold(&mut self, gap_threshold: Duration) {
        self.gap_threshold = gap_threshold;
    }

    /// Monotonic time of the last valid sample, the start of the next interval.
    /// A fresh integrator that continues from this one's last sample: the next step after it
    /// is integrated (a new session starts between two samples and loses nothing).
    pub fn continued(&self) -> Integrator {
        Integrator {
            last: self.last,
            ..Integrator::new(self.gap_threshold)
        }
    }

    pub fn last_time(&self) -> Option<Duration> {
        self.last.map(|(t, _)| t)
    }

    /// The first [`MAX_LISTED_GAPS`] gaps, in order.
    pub fn gaps(&self) -> &[Gap] {
        &self.gaps
    }

    /// Every gap so far, listed or not.
    pub fn gap_count(&self) -> usize {
        self.gap_count
    }

    /// How many samples were clamped to [`MAX_POWER_WATTS`].
    pub fn clamped(&self) -> u64 {
        self.clamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn constant_300_w_for_600_s_is_180_kj_or_0_05_kwh() {
        let mut i = Integrator::default();
        for s in 0..=600 {
            i.push(secs(s as f64), Some(Watts(300.0)));
        }
        assert!((i.total().0 - 180_000.0).abs() < 1e-6);
        assert!((i.total().kwh() - 0.05).abs() < 1e-12);
        assert!(i.gaps().is_empty());
    }

    /// Sample times from 0 to `end` with steps of 0.5 to 1.5 s from a fixed LCG: jittered like
    /// a real timer, the same on every run.
    fn jittered_times(end: f64) -> Vec<f64> {
        let mut state: u64 = 2026;
        let mut ts = vec![0.0];
        loop {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let step = 0.5 + (state >> 11) as f64 / (1u64 << 53) as f64;
            let last = ts[ts.len() - 1];
            if last + step >= end {
                ts.push(end);
                return ts;
            }
            ts.push(last + step);
        }
    }

    #[test]
    fn a_drifting_sine_at_jittered_steps_integrates_within_a_hundredth_of_a_percent() {
        // P(t) = 100 + 50 sin(2πt/37.3) + 0.2 t over 600 s: 37.3 s divides neither the span nor
        // the steps, and the drift is a load warming up. ∫ = 100·600 + 50·37.3/2π·(1 − cos(2π·600/37.3))
        // + 0.1·600² = 96,042.09 J.
        let period = 37.3;
        let p = |t: f64| 100.0 + 50.0 * (2.0 * std::f64::consts::PI * t / period).sin() + 0.2 * t;
        let exact = 100.0 * 600.0
            + 50.0 * period / (2.0 * std::f64::consts::PI)
                * (1.0 - (2.0 * std::f64::consts::PI * 600.0 / period).cos())
            + 0.1 * 600.0 * 600.0;
        assert!((exact - 96_042.09).abs() < 0.01, "{exact}");
        let ts = jittered_times(600.0);
        let mut i = Integrator::default();
        for &t in &ts {
            i.push(secs(t), Some(Watts(p(t))));
        }
        let tolerance = 1e-4;
        let error = (i.total().0 - exact).abs() / exact;
        assert!(error < tolerance, "trapezoids off by {error:e}");
        // The same samples by rectangles (each value held until the next) miss it by 5×.
        let rectangles: f64 = ts.windows(2).map(|w| p(w[0]) * (w[1] - w[0])).sum();
        let rect_error = (rectangles - exact).abs() / exact;
        assert!(
            rect_error > 5.0 * tolerance,
            "rectangles off by only {rect_error:e}"
        );
    }

    #[test]
    fn a_five_second_gap_is_interpolated() {
        let mut i = Integrator::default();
        i.push(secs(0.0), Some(Watts(10.0)));
        let added = i.push(secs(5.0), Some(Watts(20.0)));
        assert_eq!(added, Joules(75.0));
        assert!(i.gaps().is_empty());
    }

    #[test]
    fn a_thirty_second_gap_adds_nothing_and_is_recorded() {
        let mut i = Integrator::default();
        i.push(secs(0.0), Some(Watts(10.0)));
        i.push(secs(1.0), Some(Watts(10.0)));
        let added = i.push(secs(31.0), Some(Watts(500.0)));
        assert_eq!(added, Joules(0.0));
        assert_eq!(i.total(), Joules(10.0));
        assert_eq!(
            i.gaps(),
            &[Gap {
                from: 1.0,
                seconds: 30.0
            }]
        );
        i.push(secs(32.0), Some(Watts(500.0)));
        assert_eq!(i.total(), Joules(510.0));
    }

    #[test]
    fn a_nan_in_the_middle_contributes_nothing() {
        let mut i = Integrator::default();
        i.push(secs(0.0), Some(Watts(10.0)));
        assert_eq!(i.push(secs(1.0), Some(Watts(f64::NAN))), Joules(0.0));
        assert_eq!(i.push(secs(1.5), None), Joules(0.0));
        assert_eq!(i.push(secs(1.7), Some(Watts(-3.0))), Joules(0.0));
        i.push(secs(2.0), Some(Watts(10.0)));
        assert_eq!(i.total(), Joules(20.0));
        assert!(i.total().0.is_finite());
    }

    #[test]
    fn absurd_power_is_clamped_to_100_kw() {
        let mut i = Integrator::default();
        i.push(secs(0.0), Some(Watts(1e9)));
        i.push(secs(1.0), Some(Watts(1e9)));
        assert_eq!(i.total(), Joules(MAX_POWER_WATTS));
        assert_eq!(i.clamped(), 2);
    }

    #[test]
    fn time_going_backwards_starts_a_new_baseline() {
        let mut i = Integrator::default();
        i.push(secs(10.0), Some(Watts(10.0)));
        assert_eq!(i.push(secs(5.0), Some(Watts(10.0))), Joules(0.0));
        assert_eq!(i.push(secs(6.0), Some(Watts(10.0))), Joules(10.0));
    }

    #[test]
    fn a_suspend_is_never_bridged_by_the_last_value() {
        let mut i = Integrator::default();
        i.push(secs(0.0), Some(Watts(50.0)));
        i.interrupt(secs(1.0), 3600.0);
        assert_eq!(i.push(secs(1.0), Some(Watts(50.0))), Joules(0.0));
        assert_eq!(i.gaps().len(), 1);
        assert_eq!(i.gaps()[0].seconds, 3600.0);
    }

    #[test]
    fn a_month_of_gaps_is_counted_whole_and_listed_for_the_first_thousand() {
        // A source that answers every 20 s against the 10 s threshold: 3,000 samples, 2,999 gaps
        // of 20 s each, no energy.
        let mut i = Integrator::default();
        for k in 0..3_000 {
            i.push(secs(f64::from(k) * 20.0), Some(Watts(10.0)));
        }
        assert_eq!(i.total(), Joules(0.0));
        assert_eq!(i.gap_count(), 2_999);
        assert_eq!(i.gaps().len(), MAX_LISTED_GAPS);
        assert_eq!(
            i.gaps()[999],
            Gap {
                from: 19_980.0,
                seconds: 20.0
            }
        );
    }
}
