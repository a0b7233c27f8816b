//! Energy from hardware energy counters (NVML mJ, RAPL µJ, hwmon µJ, powermetrics mJ).
//!
//! Rule: energy = cur − prev. Counters beat integrated power wherever they exist: they count
//! every joule between two reads, however the power moved in between.
//! - A counter that went down with a known range wrapped: energy = cur + range − prev.
//! - A counter that went down with no known range was reset (driver reload, reboot): the new
//!   value starts a new baseline and adds nothing.
//! - A delta that implies more than [`MAX_POWER_WATTS`](crate::energy::MAX_POWER_WATTS) over the
//!   interval is a broken counter or a bogus unit: it adds nothing, and is counted in `rejected`.
//! - Non-finite or negative values add nothing and keep the old baseline.
//!
//! Non-goals: turning counters into watts for display (sources do that), and persistence.

use crate::energy::MAX_POWER_WATTS;
use crate::units::Joules;
use std::time::Duration;

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

    /// Adds a counter value read at monotonic time `t`; `range` is the value at which the
    /// counter wraps to zero, when known. Returns the energy this step added.
    pub fn push(&mut self, t: Duration, value: Joules, range: Option<Joules>) -> Joules {
        if !value.0.is_finite() || value.0 < 0.0 {
            return Joules(0.0);
        }
        let Some((t0, v0)) = self.last else {
            self.last = Some((t, value));
            return Joules(0.0);
        };
        self.last = Some((t, value));
        let delta = if value.0 >= v0.0 {
            value.0 - v0.0
        } else {
            match range.filter(|r| r.0.is_finite() && r.0 > v0.0) {
                Some(r) => value.0 + r.0 - v0.0,
                None => {
                    self.resets += 1;
                    return Joules(0.0);
                }
            }
        };
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

    /// Times the counter went down with no known range.
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
        c.push(s(0), Joules(1000.0), None);
        c.push(s(1), Joules(1300.0), None);
        c.push(s(2), Joules(1600.0), None);
        assert_eq!(c.total(), Joules(600.0));
    }

    #[test]
    fn a_wrap_with_a_known_range_is_not_a_negative_sample() {
        // RAPL: max_energy_range_uj 262143328850 µJ; prev 262143000000, cur 500000 → 828850 µJ.
        let range = Joules::from_microjoules(262_143_328_850.0);
        let mut c = CounterIntegrator::new();
        c.push(
            s(0),
            Joules::from_microjoules(262_143_000_000.0),
            Some(range),
        );
        let added = c.push(s(1), Joules::from_microjoules(500_000.0), Some(range));
        assert!((added.0 - 0.828_85).abs() < 1e-9, "{added:?}");
    }

    #[test]
    fn a_decrease_with_no_range_is_a_reset_that_adds_nothing() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(5000.0), None);
        assert_eq!(c.push(s(1), Joules(10.0), None), Joules(0.0));
        assert_eq!(c.resets(), 1);
        assert_eq!(c.push(s(2), Joules(110.0), None), Joules(100.0));
    }

    #[test]
    fn an_implausible_jump_is_rejected_not_integrated() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(0.0), None);
        assert_eq!(c.push(s(1), Joules(1e9), None), Joules(0.0));
        assert_eq!(c.rejected(), 1);
        assert_eq!(c.push(s(2), Joules(1e9 + 50.0), None), Joules(50.0));
    }

    #[test]
    fn nan_or_negative_values_keep_the_old_baseline() {
        let mut c = CounterIntegrator::new();
        c.push(s(0), Joules(100.0), None);
        assert_eq!(c.push(s(1), Joules(f64::NAN), None), Joules(0.0));
        assert_eq!(c.push(s(2), Joules(-5.0), None), Joules(0.0));
        assert_eq!(c.push(s(3), Joules(130.0), None), Joules(30.0));
    }
}
