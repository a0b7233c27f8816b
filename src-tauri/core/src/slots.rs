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
//! - One feed's answer ([`Series::from_answer`]) holds at most [`MAX_ANSWER_SLOTS`] slots, each
//!   at least [`MIN_SLOT_SECONDS`] long, over at most [`MAX_ANSWER_SPAN_SECONDS`], every value
//!   one a grid has (±[`MAX_PRICE_PER_KWH`] per kWh, 0 to [`MAX_CARBON_G_PER_KWH`] g). A parser
//!   checks the count ([`answer_room`]) before it builds the slots. Past a limit the whole answer
//!   is refused, saying which: no feed publishes such an answer, so it is no price.
//! - Merging, pricing a window and choosing the lowest one are O(n log n) in the slots: a long
//!   cache never holds the engine's loop.
//!
//! [`MAX_PRICE_PER_KWH`]: crate::tariff::MAX_PRICE_PER_KWH

use serde::{Deserialize, Serialize};

/// Upper bound for carbon intensity: no grid is dirtier than pure lignite (~1200 g/kWh).
pub const MAX_CARBON_G_PER_KWH: f64 = 2000.0;

/// The shortest slot a feed may give: the markets' and grids' finest is 15 minutes.
pub const MIN_SLOT_SECONDS: f64 = 300.0;

/// The longest time one answer may cover: a day back and a week ahead, with a day to spare.
pub const MAX_ANSWER_SPAN_SECONDS: f64 = 9.0 * 86_400.0;

/// The most slots one answer may hold: its longest span in its shortest slots (2,592).
pub const MAX_ANSWER_SLOTS: usize = (MAX_ANSWER_SPAN_SECONDS / MIN_SLOT_SECONDS) as usize;

/// Two windows whose means differ by less than this share are equally cheap, and the earlier
/// is chosen: no feed prices to nine digits, and rounding at Unix times differs in the twelfth.
const TIE: f64 = 1e-9;

/// Refuses an answer of `count` slots before they are built.
pub fn answer_room(count: usize) -> Result<(), BadSlot> {
    if count > MAX_ANSWER_SLOTS {
        return Err(BadSlot(format!(
            "{count} slots in one answer, more than the {MAX_ANSWER_SLOTS} of {} days in \
             {}-minute slots",
            MAX_ANSWER_SPAN_SECONDS / 86_400.0,
            MIN_SLOT_SECONDS / 60.0
        )));
    }
    Ok(())
}

/// What a series' values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Money per kWh, in the series' currency.
    PricePerKwh,
    /// Grams of CO₂(-equivalent) per kWh.
    GramsPerKwh,
}

impl Quantity {
    /// Whether `v` is a value some grid has: a price within ±[`MAX_PRICE_PER_KWH`] per kWh, an
    /// intensity from 0 to [`MAX_CARBON_G_PER_KWH`].
    ///
    /// [`MAX_PRICE_PER_KWH`]: crate::tariff::MAX_PRICE_PER_KWH
    pub fn plausible(self, v: f64) -> bool {
        match self {
            Quantity::PricePerKwh => v.abs() <= crate::tariff::MAX_PRICE_PER_KWH,
            Quantity::GramsPerKwh => (0.0..=MAX_CARBON_G_PER_KWH).contains(&v),
        }
    }
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

    /// The series of one feed's answer: [`Series::new`] within the answer's limits (see the
    /// module's rules).
    pub fn from_answer(
        quantity: Quantity,
        currency: Option<String>,
        slots: Vec<Slot>,
    ) -> Result<Series, BadSlot> {
        answer_room(slots.len())?;
        for (i, s) in slots.iter().enumerate() {
            if s.end - s.start < MIN_SLOT_SECONDS {
                return Err(BadSlot(format!(
                    "slot {}: {} s long, shorter than any feed's {} s",
                    i + 1,
                    s.end - s.start,
                    MIN_SLOT_SECONDS
                )));
            }
            if s.value.is_finite() && !quantity.plausible(s.value) {
                return Err(BadSlot(format!(
                    "slot {}: {} is no grid's {}",
                    i + 1,
                    s.value,
                    match quantity {
                        Quantity::PricePerKwh => "price per kWh",
                        Quantity::GramsPerKwh => "gCO₂ per kWh",
                    }
                )));
            }
        }
        let series = Series::new(quantity, currency, slots)?;
        if let Some((start, end)) = series.span() {
            if end - start > MAX_ANSWER_SPAN_SECONDS {
                return Err(BadSlot(format!(
                    "the slots span {:.1} days, more than {} in one answer",
                    (end - start) / 86_400.0,
                    MAX_ANSWER_SPAN_SECONDS / 86_400.0
                )));
            }
        }
        Ok(series)
    }

    /// The value in force at `t`; `None` in a gap or outside the series.
    pub fn at(&self, t: f64) -> Option<f64> {
        let i = self.slots.partition_point(|s| s.start <= t);
        let s = self.slots.get(i.checked_sub(1)?)?;
        (t < s.end).then_some(s.value)
    }

    /// This series with `newer`'s slots in place of every slot they overlap, the rest kept:
    /// a fetch's answer is the feed's word for the time it covers.
    pub fn merged(&self, newer: &Series) -> Series {
        // Both are sorted and free of overlap, so their ends are sorted too: one pass each.
        let mut next = 0;
        let kept = self.slots.iter().filter(|s| {
            while newer.slots.get(next).is_some_and(|n| n.end <= s.start) {
                next += 1;
            }
            newer.slots.get(next).is_none_or(|n| n.start >= s.end)
        });
        let mut slots = Vec::with_capacity(self.slots.len() + newer.slots.len());
        let mut kept = kept.copied().peekable();
        let mut fresh = newer.slots.iter().copied().peekable();
        loop {
            let take_kept = match (kept.peek(), fresh.peek()) {
                (Some(k), Some(f)) => k.start < f.start,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            slots.extend(if take_kept { kept.next() } else { fresh.next() });
        }
        Series {
            quantity: newer.quantity,
            currency: newer.currency.clone().or_else(|| self.currency.clone()),
            slots,
        }
    }

    /// The slots that end after `t`: what is kept in memory.
    pub fn since(&self, t: f64) -> Series {
        self.within(t, f64::INFINITY)
    }

    /// The slots that end after `from` and start before `to`.
    pub fn within(&self, from: f64, to: f64) -> Series {
        Series {
            slots: self
                .slots
                .iter()
                .filter(|s| s.end > from && s.start < to)
                .copied()
                .collect(),
            ..self.clone()
        }
    }

    /// This series less the slots no grid has: a price beyond ±[`MAX_PRICE_PER_KWH`] per kWh
    /// (a figure per MWh, or a hostile feed), an intensity outside 0 to
    /// [`MAX_CARBON_G_PER_KWH`]; and how many were left out.
    ///
    /// [`MAX_PRICE_PER_KWH`]: crate::tariff::MAX_PRICE_PER_KWH
    pub fn plausible(&self) -> (Series, usize) {
        let kept: Vec<Slot> = self
            .slots
            .iter()
            .filter(|s| self.quantity.plausible(s.value))
            .copied()
            .collect();
        let refused = self.slots.len() - kept.len();
        (
            Series {
                slots: kept,
                ..self.clone()
            },
            refused,
        )
    }

    /// The start of the first slot and the end of the last.
    pub fn span(&self) -> Option<(f64, f64)> {
        Some((self.slots.first()?.start, self.slots.last()?.end))
    }
}

/// What turns a spot price into the price a customer pays, as evcc's tariffs do:
/// `(spot + charges) × (1 + tax)`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Retail {
    /// Grid fees, levies and the supplier's margin, per kWh.
    pub charges_per_kwh: f64,
    /// VAT and the like, as a fraction (0.19 for 19 %).
    pub tax: f64,
}

/// Where a job of a given length is cheapest (or greenest) to run, and what starting now costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start: f64,
    pub end: f64,
    /// The mean value over the window, weighted by time.
    pub mean: f64,
    /// The mean over the same length from the earliest start; `None` where a gap lies within.
    pub now_mean: Option<f64>,
    /// `1 − mean ÷ now_mean`: the share saved by waiting; `None` where starting now costs
    /// nothing or less (a saving of a negative price is no fraction), or is unknown.
    pub saving_fraction: Option<f64>,
}

/// A series' running integral, for means over any window in O(log n): the value-seconds and
/// the covered seconds up to each slot's start.
struct Integral<'a> {
    slots: &'a [Slot],
    /// `(value × seconds, seconds)` summed over the slots before each index.
    before: Vec<(f64, f64)>,
}

impl<'a> Integral<'a> {
    fn new(slots: &'a [Slot]) -> Integral<'a> {
        let mut before = Vec::with_capacity(slots.len() + 1);
        let (mut sum, mut covered) = (0.0, 0.0);
        before.push((sum, covered));
        for s in slots {
            sum += s.value * (s.end - s.start);
            covered += s.end - s.start;
            before.push((sum, covered));
        }
        Integral { slots, before }
    }

    /// `(value × seconds, seconds covered)` from the series' start to `t`.
    fn to(&self, t: f64) -> (f64, f64) {
        let i = self.slots.partition_point(|s| s.start <= t);
        let Some(last) = i.checked_sub(1).and_then(|j| self.slots.get(j)) else {
            return (0.0, 0.0);
        };
        let (sum, covered) = self.before.get(i - 1).copied().unwrap_or_default();
        let inside = (t.min(last.end) - last.start).max(0.0);
        (sum + last.value * inside, covered + inside)
    }

    /// [`Series::mean_over`], from the sums. Divided by the covered seconds, worked out as the
    /// value-seconds were: at Unix times a second's position is rounded to ~2.4e-7 s, so
    /// `to - from` as divisor would make equal windows' means differ in the eighth digit.
    fn mean(&self, from: f64, to: f64) -> Option<f64> {
        let ((a, ca), (b, cb)) = (self.to(from), self.to(to));
        let covered = cb - ca;
        ((to - from) - covered <= 1e-6 && covered > 0.0).then(|| (b - a) / covered)
    }
}

impl Series {
    /// The series with each value mapped by `f`; a slot it gives `None` for is left out.
    pub fn map_values(&self, f: impl Fn(f64) -> Option<f64>) -> Series {
        Series {
            slots: self
                .slots
                .iter()
                .filter_map(|s| {
                    Some(Slot {
                        value: f(s.value)?,
                        ..*s
                    })
                })
                .collect(),
            ..self.clone()
        }
    }

    /// The retail series of a spot series.
    pub fn retail(&self, r: Retail) -> Series {
        Series {
            slots: self
                .slots
                .iter()
                .map(|s| Slot {
                    value: (s.value + r.charges_per_kwh) * (1.0 + r.tax),
                    ..*s
                })
                .collect(),
            ..self.clone()
        }
    }

    /// The time-weighted mean from `from` to `to`; `None` where a gap or the series' end lies
    /// within: a window is priced whole or not at all.
    pub fn mean_over(&self, from: f64, to: f64) -> Option<f64> {
        if from.is_nan() || to.is_nan() || to <= from {
            return None;
        }
        let mut covered = 0.0;
        let mut sum = 0.0;
        let mut at = from;
        for s in self.slots.iter().filter(|s| s.end > from && s.start < to) {
            if s.start > at + 1e-9 {
                return None;
            }
            let (a, b) = (s.start.max(from), s.end.min(to));
            sum += s.value * (b - a);
            covered += b - a;
            at = b;
        }
        ((to - from) - covered <= 1e-6 && covered > 0.0).then(|| sum / covered)
    }

    /// The start within `[earliest, latest_end − duration]` whose window of `duration` has the
    /// lowest running mean (not the one cheapest slot: a job lasts its length), the earliest of
    /// equals; `None` where no such window lies wholly within the series. The mean is piecewise
    /// linear in the start, bending only where the window's start or end meets a slot's edge,
    /// so those starts, and the two ends of the range, are all that need trying.
    pub fn lowest_window(&self, earliest: f64, latest_end: f64, duration: f64) -> Option<Window> {
        let latest = latest_end - duration;
        if duration.is_nan() || latest.is_nan() || duration <= 0.0 || latest < earliest {
            return None;
        }
        let mut starts = vec![earliest, latest];
        for s in &self.slots {
            for edge in [s.start, s.end] {
                starts.extend([edge, edge - duration]);
            }
        }
        starts.retain(|t| *t >= earliest && *t <= latest);
        starts.sort_by(f64::total_cmp);
        starts.dedup();
        let integral = Integral::new(&self.slots);
        let now_mean = integral.mean(earliest, earliest + duration);
        let (start, mean) = starts
            .into_iter()
            .filter_map(|t| Some((t, integral.mean(t, t + duration)?)))
            .fold(None, |best: Option<(f64, f64)>, (t, m)| match best {
                Some((_, bm)) if bm <= m + TIE * bm.abs().max(m.abs()).max(1.0) => best,
                _ => Some((t, m)),
            })?;
        Some(Window {
            start,
            end: start + duration,
            mean,
            now_mean,
            saving_fraction: now_mean.filter(|n| *n > 0.0).map(|n| 1.0 - mean / n),
        })
    }
}

#[cfg(test)]
mod tests;
