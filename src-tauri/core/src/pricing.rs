//! What an interval's energy costs and emits: the feed's slot in force where a price feed is set
//! and has one, the tariffs (the fixed price and its time-of-use rules) everywhere else.
//!
//! Rules:
//! - An interval is cut at every slot edge inside it, and each part's share of the energy
//!   (power taken as constant within one sampling interval) is priced at its own slot. A slot's
//!   price may be negative, and so is the cost of energy drawn in it.
//! - Where the feed has no slot (before the first fetch, past the cache, a hole in its answer)
//!   the tariffs price the part, and the part says so ([`SlotPart::price_per_kwh`] is `None`):
//!   a missing price is never 0 and never a gap in the cost.
//! - Carbon likewise: the carbon feed's slot in force, else the fixed intensity, else unknown
//!   (no grams, and the energy is counted as [`Priced::carbon_unknown_joules`]).
//! - Core takes the times: Unix seconds for the feeds' slots, local week seconds for the
//!   tariffs' rules.

use crate::slots::Series;
use crate::tariff::Tariffs;
use crate::units::Joules;

/// Prices and intensities in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Pricing {
    pub tariffs: Tariffs,
    /// Retail prices per kWh by the slot, in the preferences' currency; `None`: no price feed.
    pub feed: Option<Series>,
    /// The fixed intensity, gCO₂/kWh; the carbon feed's fallback.
    pub carbon_g_per_kwh: Option<f64>,
    /// Intensities by the slot; `None`: no carbon feed.
    pub carbon: Option<Series>,
}

/// One slot's share of an interval, as the ledger keeps it per slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlotPart {
    /// The feed's slot; for a part the tariffs priced, the UTC hour it lies in.
    pub start: f64,
    pub end: f64,
    /// The slot's retail price; `None` where the feed had none and the tariffs priced it.
    pub price_per_kwh: Option<f64>,
    pub joules: f64,
    pub cost: f64,
}

/// What an interval cost and emitted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Priced {
    pub cost: f64,
    /// Grams of CO₂; `None` where no intensity was known for any of it.
    pub carbon_g: Option<f64>,
    /// Energy a price feed was set for but had no slot for: priced by the tariffs.
    pub fallback_joules: f64,
    /// Energy no intensity was known for.
    pub carbon_unknown_joules: f64,
    /// Per slot, where a price feed is set; empty otherwise.
    pub parts: Vec<SlotPart>,
}

const HOUR: f64 = 3600.0;

impl Pricing {
    /// The tariffs and a fixed intensity alone, as without feeds.
    pub fn fixed(tariffs: Tariffs, carbon_g_per_kwh: Option<f64>) -> Pricing {
        Pricing {
            tariffs,
            feed: None,
            carbon_g_per_kwh,
            carbon: None,
        }
    }

    /// The retail price per kWh at Unix time `unix`, local week second `week_seconds`, and
    /// whether the feed gave it (false: the tariffs').
    pub fn price_at(&self, unix: f64, week_seconds: f64) -> (f64, bool) {
        match self.feed.as_ref().and_then(|f| f.at(unix)) {
            Some(p) => (p, true),
            None => (self.tariffs.price_at(week_seconds).per_kwh(), false),
        }
    }

    /// The intensity in force at `unix`, gCO₂/kWh.
    pub fn carbon_at(&self, unix: f64) -> Option<f64> {
        self.carbon
            .as_ref()
            .and_then(|c| c.at(unix))
            .or(self.carbon_g_per_kwh)
    }

    /// `energy` drawn evenly over `seconds` from Unix time `start_unix` (local week second
    /// `start_week`).
    pub fn price(&self, start_unix: f64, start_week: f64, seconds: f64, energy: Joules) -> Priced {
        if !energy.0.is_finite() || !seconds.is_finite() || seconds < 0.0 || !start_unix.is_finite()
        {
            return Priced::default();
        }
        let mut out = Priced::default();
        match &self.feed {
            None => out.cost = self.tariffs.cost(start_week, seconds, energy),
            Some(feed) => {
                for (a, b) in pieces(feed, start_unix, seconds) {
                    let share = if seconds > 0.0 {
                        (b - a) / seconds
                    } else {
                        1.0
                    };
                    let joules = energy.0 * share;
                    let part = match slot_at(feed, a, b) {
                        Some((start, end, price)) => SlotPart {
                            start,
                            end,
                            price_per_kwh: Some(price),
                            joules,
                            cost: Joules(joules).kwh() * price,
                        },
                        None => {
                            let hour = (a / HOUR).floor() * HOUR;
                            out.fallback_joules += joules;
                            SlotPart {
                                start: hour,
                                end: hour + HOUR,
                                price_per_kwh: None,
                                joules,
                                cost: self.tariffs.cost(
                                    start_week + (a - start_unix),
                                    b - a,
                                    Joules(joules),
                                ),
                            }
                        }
                    };
                    out.cost += part.cost;
                    merge(&mut out.parts, part);
                }
            }
        }
        match &self.carbon {
            None => match self.carbon_g_per_kwh {
                Some(g) => out.carbon_g = Some(g * energy.kwh()),
                None => out.carbon_unknown_joules = energy.0,
            },
            Some(carbon) => {
                for (a, b) in pieces(carbon, start_unix, seconds) {
                    let share = if seconds > 0.0 {
                        (b - a) / seconds
                    } else {
                        1.0
                    };
                    let joules = Joules(energy.0 * share);
                    let at = if b > a { (a + b) / 2.0 } else { a };
                    match carbon.at(at).or(self.carbon_g_per_kwh) {
                        Some(g) => *out.carbon_g.get_or_insert(0.0) += g * joules.kwh(),
                        None => out.carbon_unknown_joules += joules.0,
                    }
                }
            }
        }
        out
    }
}

/// `[start, start + seconds]` cut at every edge of `series`' slots inside it, and at every
/// UTC hour inside a stretch no slot covers (so a fallback part belongs to one hour).
fn pieces(series: &Series, start: f64, seconds: f64) -> Vec<(f64, f64)> {
    let end = start + seconds;
    if seconds == 0.0 {
        return vec![(start, start)];
    }
    let mut cuts = vec![start, end];
    let first = series.slots.partition_point(|s| s.end <= start);
    for s in series.slots[first..].iter().take_while(|s| s.start < end) {
        cuts.extend(
            [s.start, s.end]
                .into_iter()
                .filter(|t| *t > start && *t < end),
        );
    }
    let mut hour = (start / HOUR).floor() * HOUR + HOUR;
    while hour < end {
        cuts.push(hour);
        hour += HOUR;
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    cuts.windows(2).map(|w| (w[0], w[1])).collect()
}

/// The slot of `series` that `[a, b]` lies in: start, end and value.
fn slot_at(series: &Series, a: f64, b: f64) -> Option<(f64, f64, f64)> {
    let mid = if b > a { (a + b) / 2.0 } else { a };
    let i = series.slots.partition_point(|s| s.start <= mid);
    let s = series.slots.get(i.checked_sub(1)?)?;
    (mid < s.end).then_some((s.start, s.end, s.value))
}

/// Adds `part` to the part of the same slot, or after it.
fn merge(parts: &mut Vec<SlotPart>, part: SlotPart) {
    match parts.iter_mut().find(|p| {
        p.start == part.start && p.price_per_kwh.is_some() == part.price_per_kwh.is_some()
    }) {
        Some(p) => {
            p.joules += part.joules;
            p.cost += part.cost;
        }
        None => parts.push(part),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::{Quantity, Slot};
    use crate::tariff::Price;

    fn series(quantity: Quantity, slots: &[(f64, f64, f64)]) -> Series {
        Series::new(
            quantity,
            None,
            slots
                .iter()
                .map(|&(start, end, value)| Slot { start, end, value })
                .collect(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn flat(p: f64) -> Tariffs {
        Tariffs::flat(Price::new(p).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn an_interval_across_two_quarter_hours_is_priced_at_each() {
        // 15-minute slots at 0.20 and 0.08 per kWh from 0 s. 1 kWh drawn evenly from 600 s to
        // 1,200 s: 300 s in each, 0.5 kWh × 0.20 + 0.5 kWh × 0.08 = 0.14.
        let pricing = Pricing {
            feed: Some(series(
                Quantity::PricePerKwh,
                &[(0.0, 900.0, 0.20), (900.0, 1800.0, 0.08)],
            )),
            ..Pricing::fixed(flat(0.30), None)
        };
        let p = pricing.price(600.0, 600.0, 600.0, Joules::from_kwh(1.0));
        assert!((p.cost - 0.14).abs() < 1e-12, "{p:?}");
        assert_eq!(p.fallback_joules, 0.0);
        assert_eq!(p.parts.len(), 2);
        assert_eq!(
            (p.parts[0].start, p.parts[0].price_per_kwh),
            (0.0, Some(0.20))
        );
        assert!((p.parts[1].joules - 1.8e6).abs() < 1e-6);
        assert_eq!(p.carbon_g, None);
        assert!((p.carbon_unknown_joules - 3.6e6).abs() < 1e-6);
    }

    #[test]
    fn a_negative_slot_costs_negative_and_a_missing_one_is_the_fallback_flagged() {
        // An hour at −0.05, then nothing: 2 kWh from 3,000 s to 4,200 s is 1 kWh in the
        // negative hour (−0.05) and 1 kWh past it at the 0.30 fallback, flagged: 0.25 in all.
        let pricing = Pricing {
            feed: Some(series(Quantity::PricePerKwh, &[(0.0, 3600.0, -0.05)])),
            ..Pricing::fixed(flat(0.30), None)
        };
        let p = pricing.price(3000.0, 3000.0, 1200.0, Joules::from_kwh(2.0));
        assert!((p.cost - 0.25).abs() < 1e-12, "{p:?}");
        assert!((p.fallback_joules - 3.6e6).abs() < 1e-6);
        assert!((p.parts[0].cost + 0.05).abs() < 1e-12);
        assert_eq!(p.parts[1].price_per_kwh, None);
        assert_eq!((p.parts[1].start, p.parts[1].end), (3600.0, 7200.0));
        assert_eq!(pricing.price_at(4000.0, 4000.0), (0.30, false));
        assert_eq!(pricing.price_at(10.0, 10.0), (-0.05, true));
    }

    #[test]
    fn without_a_feed_the_tariffs_price_everything_and_no_slot_is_kept() {
        let pricing = Pricing::fixed(flat(0.30), Some(400.0));
        let p = pricing.price(0.0, 0.0, 3600.0, Joules::from_kwh(0.5));
        assert!((p.cost - 0.15).abs() < 1e-12);
        assert_eq!(p.carbon_g, Some(200.0));
        assert!(p.parts.is_empty());
        assert_eq!(p.fallback_joules, 0.0);
    }

    #[test]
    fn carbon_by_the_slot_falls_back_to_the_fixed_intensity() {
        // 100 g for the first half hour, nothing after, 300 g fixed: 1 kWh over an hour is
        // 0.5 × 100 + 0.5 × 300 = 200 g. Without the fixed figure, 50 g and 1.8 MJ unknown.
        let carbon = series(Quantity::GramsPerKwh, &[(0.0, 1800.0, 100.0)]);
        let mut pricing = Pricing {
            carbon: Some(carbon),
            ..Pricing::fixed(flat(0.30), Some(300.0))
        };
        let p = pricing.price(0.0, 0.0, 3600.0, Joules::from_kwh(1.0));
        assert!(
            (p.carbon_g.unwrap_or_default() - 200.0).abs() < 1e-9,
            "{p:?}"
        );
        pricing.carbon_g_per_kwh = None;
        let p = pricing.price(0.0, 0.0, 3600.0, Joules::from_kwh(1.0));
        assert!(
            (p.carbon_g.unwrap_or_default() - 50.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!((p.carbon_unknown_joules - 1.8e6).abs() < 1e-6);
        assert_eq!(pricing.carbon_at(100.0), Some(100.0));
    }

    #[test]
    fn a_long_fallback_stretch_is_kept_by_the_hour() {
        // No slot at all for 2.5 h: three parts, one per UTC hour, 0.3 kWh in all at 0.30.
        let pricing = Pricing {
            feed: Some(series(Quantity::PricePerKwh, &[(-3600.0, 0.0, 0.1)])),
            ..Pricing::fixed(flat(0.30), None)
        };
        let p = pricing.price(0.0, 0.0, 9000.0, Joules::from_kwh(0.3));
        assert_eq!(p.parts.len(), 3);
        assert!((p.cost - 0.09).abs() < 1e-12);
        assert!((p.parts[2].joules - 0.3 * 3.6e6 / 5.0).abs() < 1e-6);
    }
}
