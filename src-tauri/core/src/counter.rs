//! Energy from hardware energy counters (NVML mJ, RAPL µJ, hwmon µJ, powermetrics mJ).
//!
//! Two steps, so that the meter never sees a raw register:
//! - [`CounterTotal`], in each source: turns the raw register into a validated, unwrapped,
//!   monotonic total and the interval's watts. A register that went down with a known range
//!   wrapped: energy = cur + range − prev. One that went down with no known range was reset
//!   (driver reload, reboot, or a wrap that cannot be sized): a new baseline, nothing added. An
//!   interval above the source's own bound (RAPL's 1 kW per zone) is a broken counter or a bogus
//!   unit: nothing added, the value is the next baseline.
//! - [`CounterIntegrator`], in the meter: energy = cur − prev of those totals. A decrease is a
//!   source restart (a new baseline, nothing added); a delta above
//!   [`MAX_POWER_WATTS`](crate::energy::MAX_POWER_WATTS) over the interval adds nothing and is
//!   counted in `rejected`. Non-finite or negative values add nothing and keep the old baseline.
//!
//! Counters beat integrated power wherever they exist: they count every joule between two
//! reads, however the power moved in between.
//!
//! Non-goals: persistence.

pub mod stepped;

use crate::energy::MAX_POWER_WATTS;
use crate::units::Joules;
use std::time::Duration;

/// A raw hardware energy register made into a monotonic total (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterTotal {
    baseline: Option<(Duration, Joules)>,
    total: Joules,
}

impl CounterTotal {
    pub fn new() -> Self {
        CounterTotal::default()
    }

    /// Takes the register's value read at monotonic `at`; `range` is the value at which it wraps
    /// to zero, when known, and `max_watts` the most the part can draw. Returns the mean power
    /// since the previous value when that interval is usable; otherwise `None` and nothing is
    /// added to the total.
    pub fn update(
        &mut self,
        at: Duration,
        value: Joules,
        range: Option<Joules>,
        max_watts: f64,
    ) -> Option<crate::units::Watts> {
        if !value.0.is_finite() || value.0 < 0.0 {
            return None;
        }
        let Some((t0, v0)) = self.baseline else {
            self.baseline = Some((at, value));
            return None;
        };
        let dt = at.saturating_sub(t0).as_secs_f64();
        if dt <= 0.0 {
            return None;
        }
        self.baseline = Some((at, value));
        let delta = if value.0 >= v0.0 {
            value.0 - v0.0
        } else {
            // Wrapped at its range, when known; with none it was reset and counts nothing.
            let range = range.filter(|r| r.0.is_finite() && r.0 > v0.0)?;
            value.0 + range.0 - v0.0
        };
        let watts = delta / dt;
        if !watts.is_finite() || watts > max_watts {
            return None;
        }
        self.total += Joules(delta);
        Some(crate::units::Watts(watts))
    }

    /// Energy counted over usable intervals; `None` before the first value.
    pub fn total(&self) -> Option<Joules> {
        self.baseline.map(|_| self.total)
    }
}

#[derive(Debug, Clone, Default)]
pub struct CounterIntegrator {
    last: Option<(Duration, Joules)>,
    total: Joules,
    resets: u64,
    rejected: u64,
}

impl CounterIntegrator {
    pub fn new() -> Self {
        CounterIntegrator::default()
    }

    /// Adds a source's monotonic total read at monotonic time `t`. Returns the energy this step
    /// added.
    pub fn push(&mut self, t: Duration, value: Joules) -> Joules {
        if !value.0.is_finite() || value.0 < 0.0 {
            return Joules(0.0);
        }
        let Some((t0, v0)) = self.last else {
            self.last = Some((t, value));
            return Joules(0.0);
        };
        self.last = Some((t, value));
        if value.0 < v0.0 {
            self.resets += 1;
            return Joules(0.0);
        }
        let delta = value.0 - v0.0;
        let dt = t.saturating_sub(t0).as_secs_f64();
        if dt <= 0.0 || delta / dt > MAX_POWER_WATTS {
            self.rejected += 1;
            return Joules(0.0);
        }
        self.total += Joules(delta);
        Joules(delta)
    }

    pub fn total(&self) -> Joules {
        self.total
    }

    /// True once a baseline is set: the next value measures an interval.
    pub fn started(&self) -> bool {
        self.last.is_some()
    }

    /// Times the total went down (the source restarted).
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Intervals dropped as implausible.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn deltas_add_up_to_the_counter_span() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(1000.0));
        c.push(s(1), Joules(1300.0));
        c.push(s(2), Joules(1600.0));
        assert_eq!(c.total(), Joules(600.0));
    }

    #[test]
    fn a_rapl_wrap_with_its_range_is_not_a_negative_sample() {
        // max_energy_range_uj 262143328850 µJ; prev 262143000000, cur 500000 → 828850 µJ in 1 s.
        let range = Joules::from_microjoules(262_143_328_850.0);
        let mut c = CounterTotal::new();
        c.update(
            s(0),
            Joules::from_microjoules(262_143_000_000.0),
            Some(range),
            1000.0,
        );
        let w = c.update(
            s(1),
            Joules::from_microjoules(500_000.0),
            Some(range),
            1000.0,
        );
        assert_eq!(w.map(|w| (w.0 * 1e6).round() / 1e6), Some(0.82885));
        assert!((c.total().unwrap_or_default().0 - 0.828_85).abs() < 1e-9);
    }

    #[test]
    fn a_wrap_that_cannot_be_sized_drops_its_interval_only() {
        let mut c = CounterTotal::new();
        c.update(s(0), Joules(100.0), None, 1000.0);
        assert_eq!(c.update(s(1), Joules(5.0), None, 1000.0), None);
        assert_eq!(c.total(), Some(Joules(0.0)));
        assert!(c.update(s(2), Joules(15.0), None, 1000.0).is_some());
        assert_eq!(c.total(), Some(Joules(10.0)));
    }

    #[test]
    fn steps_above_the_sources_bound_are_left_out_of_the_total() {
        // 2,227 J in one second is 2.2 kW from a 7.5 W Celeron: a bogus unit.
        let mut c = CounterTotal::new();
        c.update(s(0), Joules(0.0), None, 1000.0);
        assert_eq!(c.update(s(1), Joules(2227.0), None, 1000.0), None);
        assert_eq!(
            c.update(s(2), Joules(2232.0), None, 1000.0),
            Some(crate::units::Watts(5.0))
        );
        assert_eq!(c.total(), Some(Joules(5.0)));
    }

    #[test]
    fn a_total_that_goes_down_is_a_restart_that_adds_nothing() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(5000.0));
        assert_eq!(c.push(s(1), Joules(10.0)), Joules(0.0));
        assert_eq!(c.resets(), 1);
        assert_eq!(c.push(s(2), Joules(110.0)), Joules(100.0));
    }

    #[test]
    fn an_implausible_jump_is_rejected_not_integrated() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(0.0));
        assert_eq!(c.push(s(1), Joules(1e9)), Joules(0.0));
        assert_eq!(c.rejected(), 1);
        assert_eq!(c.push(s(2), Joules(1e9 + 50.0)), Joules(50.0));
    }

    #[test]
    fn nan_or_negative_values_keep_the_old_baseline() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(100.0));
        assert_eq!(c.push(s(1), Joules(f64::NAN)), Joules(0.0));
        assert_eq!(c.push(s(2), Joules(-5.0)), Joules(0.0));
        assert_eq!(c.push(s(3), Joules(130.0)), Joules(30.0));
    }
}
