//! Physical units as types, so that a number always says what it is.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign};
use std::time::Duration;

/// Joules in one kilowatt-hour: 1000 W × 3600 s.
pub const JOULES_PER_KWH: f64 = 3_600_000.0;

/// Power in watts.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Watts(pub f64);

/// Energy in joules.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Joules(pub f64);

impl Watts {
    pub fn from_milliwatts(mw: f64) -> Self {
        Watts(mw / 1e3)
    }
    pub fn from_microwatts(uw: f64) -> Self {
        Watts(uw / 1e6)
    }
    /// Energy delivered at this power for `dt`.
    pub fn over(self, dt: Duration) -> Joules {
        Joules(self.0 * dt.as_secs_f64())
    }
    /// A physically meaningful power reading: finite and not negative.
    pub fn is_plausible(self) -> bool {
        self.0.is_finite() && self.0 >= 0.0
    }
}

impl Joules {
    pub fn from_microjoules(uj: f64) -> Self {
        Joules(uj / 1e6)
    }
    pub fn from_millijoules(mj: f64) -> Self {
        Joules(mj / 1e3)
    }
    pub fn kwh(self) -> f64 {
        self.0 / JOULES_PER_KWH
    }
    pub fn from_kwh(kwh: f64) -> Self {
        Joules(kwh * JOULES_PER_KWH)
    }
}

impl Add for Joules {
    type Output = Joules;
    fn add(self, rhs: Joules) -> Joules {
        Joules(self.0 + rhs.0)
    }
}

impl AddAssign for Joules {
    fn add_assign(&mut self, rhs: Joules) {
        self.0 += rhs.0;
    }
}

impl Add for Watts {
    type Output = Watts;
    fn add(self, rhs: Watts) -> Watts {
        Watts(self.0 + rhs.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_hundred_watts_for_ten_minutes_is_a_twentieth_of_a_kwh() {
        let e = Watts(300.0).over(Duration::from_secs(600));
        assert_eq!(e, Joules(180_000.0));
        assert!((e.kwh() - 0.05).abs() < 1e-12);
    }

    #[test]
    fn sub_units_convert_to_base_units() {
        assert_eq!(Watts::from_milliwatts(14_200.0), Watts(14.2));
        assert_eq!(Watts::from_microwatts(68_000_000.0), Watts(68.0));
        assert_eq!(Joules::from_microjoules(1_079_160.0), Joules(1.07916));
        assert_eq!(Joules::from_kwh(0.05), Joules(180_000.0));
    }

    #[test]
    fn nan_and_negative_power_are_not_plausible() {
        assert!(!Watts(f64::NAN).is_plausible());
        assert!(!Watts(-1.0).is_plausible());
        assert!(!Watts(f64::INFINITY).is_plausible());
        assert!(Watts(0.0).is_plausible());
    }
}
