//! Values that move by the slot: a price per kWh or a grid carbon intensity, each in force over
//! `[start, end)` (Unix seconds), as a feed publishes them.
//!
//! Rules:
//! - Slots are in time order and never overlap; a feed's 15-minute and 60-minute slots are both
//!   slots, and a day of 23 or 25 hours is the slots it holds (nothing assumes 24 a day).
//! - A price may be negative, and is kept so: its slot's cost is negative.
//! - A missing slot is a gap, never a 0: what is in force there is unknown ([`Series::at`]).
//! - A value that is not a finite number is refused with its place, and so is a slot that does
//!   not run forwards: a bad answer is an error, never a price.

use serde::{Deserialize, Serialize};

/// What a series' values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Money per kWh, in the series' currency.
    PricePerKwh,
    /// Grams of CO₂(-equivalent) per kWh.
    GramsPerKwh,
}

/// One slot: `value` is in force from `start` to `end`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub start: f64,
    pub end: f64,
    pub value: f64,
}

/// A feed's slots, in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub quantity: Quantity,
    /// ISO 4217 for prices (`EUR`, `GBP`); `None` for carbon.
    pub currency: Option<String>,
    pub slots: Vec<Slot>,
}

/// Why slots were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSlot(pub String);

impl std::fmt::Display for BadSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Series {
    /// The series of `slots` (any order): sorted, and checked to run forwards without overlap.
    pub fn new(
        quantity: Quantity,
        currency: Option<String>,
        mut slots: Vec<Slot>,
    ) -> Result<Series, BadSlot> {
        for (i, s) in slots.iter().enumerate() {
            if !(s.start.is_finite() && s.end.is_finite() && s.value.is_finite()) {
                return Err(BadSlot(format!("slot {}: not a finite number", i + 1)));
            }
            if s.end <= s.start {
                return Err(BadSlot(format!(
                    "slot {}: ends at {} before it starts at {}",
                    i + 1,
                    s.end,
                    s.start
                )));
            }
        }
        slots.sort_by(|a, b| a.start.total_cmp(&b.start));
        if let Some(w) = slots.windows(2).find(|w| w[1].start < w[0].end) {
            return Err(BadSlot(format!(
                "slots starting at {} and {} overlap",
                w[0].start, w[1].start
            )));
        }
        Ok(Series {
            quantity,
            currency,
            slots,
        })
    }

    /// The value in force at `t`; `None` in a gap or outside the series.
    pub fn at(&self, t: f64) -> Option<f64> {
        let i = self.slots.partition_point(|s| s.start <= t);
        let s = self.slots.get(i.checked_sub(1)?)?;
        (t < s.end).then_some(s.value)
    }

    /// The start of the first slot and the end of the last.
    pub fn span(&self) -> Option<(f64, f64)> {
        Some((self.slots.first()?.start, self.slots.last()?.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(start: f64, end: f64, value: f64) -> Slot {
        Slot { start, end, value }
    }

    #[test]
    fn the_value_in_force_is_its_slots_and_a_gap_is_unknown_never_zero() {
        let s = Series::new(
            Quantity::PricePerKwh,
            Some("EUR".into()),
            vec![slot(3600.0, 7200.0, -0.01), slot(0.0, 900.0, 0.08)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.slots[0].start, 0.0, "sorted");
        assert_eq!(s.at(0.0), Some(0.08));
        assert_eq!(s.at(899.9), Some(0.08));
        assert_eq!(s.at(900.0), None, "a gap: 15 min to the hour");
        assert_eq!(s.at(5000.0), Some(-0.01), "a negative price is kept");
        assert_eq!(s.at(7200.0), None);
        assert_eq!(s.span(), Some((0.0, 7200.0)));
    }

    #[test]
    fn slots_that_overlap_run_backwards_or_are_not_numbers_are_refused() {
        let bad = |slots| Series::new(Quantity::GramsPerKwh, None, slots).map(|_| ());
        assert!(bad(vec![slot(0.0, 3600.0, 1.0), slot(1800.0, 5400.0, 2.0)]).is_err());
        assert!(bad(vec![slot(10.0, 10.0, 1.0)]).is_err());
        assert!(bad(vec![slot(0.0, 10.0, f64::NAN)]).is_err());
    }
}
