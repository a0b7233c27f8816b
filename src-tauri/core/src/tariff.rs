//! Time-of-use tariffs: a default price, and rules `{weekdays, from, to, price}` over it.
//!
//! Times are local wall-clock times, `HH:MM`, `to` exclusive; `24:00` ends a day. A rule whose
//! `to` is earlier than its `from` runs overnight into the next day (22:00–06:00 on Friday covers
//! Friday night and early Saturday). Rules may not overlap and may not be empty; the error names
//! the entry (1-based, in the order given). At most [`MAX_TARIFF_RULES`] rules.
//!
//! Pricing: the caller passes the local time as seconds since Monday 00:00 of the current week
//! (core reads no clock and knows no time zone). An interval that crosses a boundary is split,
//! and each part's share of the energy is priced at its own rate (power assumed constant
//! within one sampling interval).

use crate::error::Error;
use crate::units::Joules;
use serde::{Deserialize, Serialize};

/// Electricity price per kWh: finite and not negative.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Price(f64);

/// The most rules a tariff may have: a week's price changes, every hour of every day, fit in
/// 168.
pub const MAX_TARIFF_RULES: usize = 200;

/// Upper bound that catches a price typed in the wrong unit (per MWh, or cents).
pub const MAX_PRICE_PER_KWH: f64 = 1000.0;

impl Price {
    /// Nothing a kWh: what the grid charges for energy that does not come from it.
    pub const FREE: Price = Price(0.0);

    pub fn new(per_kwh: f64) -> Result<Self, Error> {
        if !per_kwh.is_finite() {
            return Err(Error::Invalid {
                field: "price",
                message: "must be a number".into(),
            });
        }
        if per_kwh < 0.0 {
            return Err(Error::Invalid {
                field: "price",
                message: "cannot be negative".into(),
            });
        }
        if per_kwh > MAX_PRICE_PER_KWH {
            return Err(Error::Invalid {
                field: "price",
                message: format!("{per_kwh} per kWh is too high; enter the price of one kWh"),
            });
        }
        Ok(Price(per_kwh))
    }

    /// Parses what a person typed in a price field: `0.30`, ` 0,30 `.
    pub fn parse_input(input: &str) -> Result<Self, Error> {
        let text = input.trim();
        if text.is_empty() {
            return Err(Error::Invalid {
                field: "price",
                message: "enter a price per kWh".into(),
            });
        }
        let normalised = text.replacen(',', ".", 1);
        let value: f64 = normalised.parse().map_err(|_| Error::Invalid {
            field: "price",
            message: format!("{text:?} is not a number"),
        })?;
        Price::new(value)
    }

    pub fn per_kwh(self) -> f64 {
        self.0
    }
}

impl Default for Price {
    fn default() -> Self {
        Price(0.30)
    }
}

impl TryFrom<f64> for Price {
    type Error = Error;
    fn try_from(v: f64) -> Result<Self, Error> {
        Price::new(v)
    }
}

impl From<Price> for f64 {
    fn from(p: Price) -> f64 {
        p.0
    }
}

pub const SECONDS_PER_DAY: f64 = 86_400.0;
pub const SECONDS_PER_WEEK: f64 = 7.0 * SECONDS_PER_DAY;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl Weekday {
    pub fn index(self) -> u32 {
        self as u32
    }
}

/// Minutes after midnight, 0..=1440.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOfDay(u16);

impl TimeOfDay {
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let (h, m) = t
            .split_once(':')
            .ok_or_else(|| format!("{t:?} is not a time like 07:30"))?;
        let bad = || format!("{t:?} is not a time between 00:00 and 24:00");
        if m.len() != 2 || h.is_empty() || h.len() > 2 {
            return Err(bad());
        }
        let h: u16 = h.parse().map_err(|_| bad())?;
        let m: u16 = m.parse().map_err(|_| bad())?;
        if m >= 60 || h > 24 || (h == 24 && m != 0) {
            return Err(bad());
        }
        Ok(TimeOfDay(h * 60 + m))
    }

    pub fn minutes(self) -> u16 {
        self.0
    }
}

impl Serialize for TimeOfDay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{:02}:{:02}", self.0 / 60, self.0 % 60))
    }
}

impl<'de> Deserialize<'de> for TimeOfDay {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TimeOfDay::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TariffRule {
    pub weekdays: Vec<Weekday>,
    pub from: TimeOfDay,
    pub to: TimeOfDay,
    pub price: Price,
}

/// A validated schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tariffs {
    default: Price,
    rules: Vec<TariffRule>,
    /// Week-second spans `[start, end)` with their price, sorted, non-overlapping.
    spans: Vec<(f64, f64, Price)>,
}

fn invalid(message: String) -> Error {
    Error::Invalid {
        field: "tariffs",
        message,
    }
}

impl Tariffs {
    pub fn new(default: Price, rules: Vec<TariffRule>) -> Result<Self, Error> {
        if rules.len() > MAX_TARIFF_RULES {
            return Err(invalid(format!(
                "{} tariffs; at most {MAX_TARIFF_RULES}",
                rules.len()
            )));
        }
        let mut spans: Vec<(f64, f64, Price, usize)> = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let n = i + 1;
            if rule.weekdays.is_empty() {
                return Err(invalid(format!("tariff {n} has no weekdays")));
            }
            if rule.from == rule.to {
                return Err(invalid(format!(
                    "tariff {n} starts and ends at the same time"
                )));
            }
            let from = f64::from(rule.from.minutes()) * 60.0;
            let to = f64::from(rule.to.minutes()) * 60.0;
            for day in &rule.weekdays {
                let base = f64::from(day.index()) * SECONDS_PER_DAY;
                if from < to {
                    spans.push((base + from, base + to, rule.price, n));
                } else {
                    // Overnight: to the end of the day, then the start of the next (Sunday wraps to Monday).
                    spans.push((base + from, base + SECONDS_PER_DAY, rule.price, n));
                    let next = (base + SECONDS_PER_DAY) % SECONDS_PER_WEEK;
                    if to > 0.0 {
                        spans.push((next, next + to, rule.price, n));
                    }
                }
            }
        }
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in spans.windows(2) {
            if let [a, b] = pair {
                if b.0 < a.1 {
                    let (first, second) = (a.3.min(b.3), a.3.max(b.3));
                    return Err(invalid(if first == second {
                        format!("tariff {first} overlaps itself")
                    } else {
                        format!("tariff {second} overlaps tariff {first}")
                    }));
                }
            }
        }
        Ok(Tariffs {
            default,
            rules,
            spans: spans.into_iter().map(|(s, e, p, _)| (s, e, p)).collect(),
        })
    }

    pub fn flat(price: Price) -> Self {
        Tariffs {
            default: price,
            rules: Vec::new(),
            spans: Vec::new(),
        }
    }

    pub fn default_price(&self) -> Price {
        self.default
    }

    pub fn rules(&self) -> &[TariffRule] {
        &self.rules
    }

    /// The price in force at `week_seconds` (seconds since Monday 00:00 local).
    pub fn price_at(&self, week_seconds: f64) -> Price {
        let t = week_seconds.rem_euclid(SECONDS_PER_WEEK);
        self.spans
            .iter()
            .find(|(s, e, _)| *s <= t && t < *e)
            .map(|(_, _, p)| *p)
            .unwrap_or(self.default)
    }

    /// Cost of `energy` drawn evenly over `seconds` starting at `start_week_seconds`, split at
    /// every tariff boundary inside the interval.
    pub fn cost(&self, start_week_seconds: f64, seconds: f64, energy: Joules) -> f64 {
        if !energy.0.is_finite() || !seconds.is_finite() || seconds < 0.0 {
            return 0.0;
        }
        if seconds == 0.0 {
            return energy.kwh() * self.price_at(start_week_seconds).per_kwh();
        }
        let start = start_week_seconds.rem_euclid(SECONDS_PER_WEEK);
        let end = start + seconds;
        let mut cuts: Vec<f64> = vec![start, end];
        for week in [0.0, SECONDS_PER_WEEK] {
            for (s, e, _) in &self.spans {
                for b in [s + week, e + week] {
                    if b > start && b < end {
                        cuts.push(b);
                    }
                }
            }
        }
        cuts.sort_by(f64::total_cmp);
        cuts.windows(2)
            .map(|w| {
                let share = (w[1] - w[0]) / seconds;
                let mid = (w[0] + w[1]) / 2.0;
                energy.kwh() * share * self.price_at(mid).per_kwh()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(p: f64) -> Price {
        Price::new(p).unwrap_or_else(|e| panic!("{e}"))
    }

    fn time(t: &str) -> TimeOfDay {
        TimeOfDay::parse(t).unwrap_or_else(|e| panic!("{e}"))
    }

    fn rule(days: &[Weekday], from: &str, to: &str, p: f64) -> TariffRule {
        TariffRule {
            weekdays: days.to_vec(),
            from: time(from),
            to: time(to),
            price: price(p),
        }
    }

    const WEEKDAYS: [Weekday; 5] = [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
    ];

    #[test]
    fn a_weekday_rule_applies_on_weekdays_only() {
        let t = Tariffs::new(price(0.30), vec![rule(&WEEKDAYS, "17:00", "20:00", 0.50)])
            .unwrap_or_else(|e| panic!("{e}"));
        let tue_18h = 1.0 * SECONDS_PER_DAY + 18.0 * 3600.0;
        let sat_18h = 5.0 * SECONDS_PER_DAY + 18.0 * 3600.0;
        assert_eq!(t.price_at(tue_18h), price(0.50));
        assert_eq!(t.price_at(sat_18h), price(0.30));
        assert_eq!(
            t.price_at(1.0 * SECONDS_PER_DAY + 20.0 * 3600.0),
            price(0.30)
        );
    }

    #[test]
    fn a_boundary_inside_one_interval_is_split() {
        // 1 kWh drawn evenly from 16:59:30 to 17:00:30 on Monday: half at 0.30, half at 0.50.
        let t = Tariffs::new(price(0.30), vec![rule(&WEEKDAYS, "17:00", "20:00", 0.50)])
            .unwrap_or_else(|e| panic!("{e}"));
        let start = 17.0 * 3600.0 - 30.0;
        let cost = t.cost(start, 60.0, Joules::from_kwh(1.0));
        assert!((cost - 0.40).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn an_overnight_rule_runs_into_the_next_day_and_sunday_wraps_to_monday() {
        let t = Tariffs::new(
            price(0.30),
            vec![rule(&[Weekday::Sun], "22:00", "06:00", 0.10)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.price_at(6.0 * SECONDS_PER_DAY + 23.0 * 3600.0),
            price(0.10)
        );
        assert_eq!(t.price_at(5.0 * 3600.0), price(0.10));
        assert_eq!(t.price_at(7.0 * 3600.0), price(0.30));
        // Sunday 23:59:30 → Monday 00:00:30 stays in the night rate all through.
        let cost = t.cost(SECONDS_PER_WEEK - 30.0, 60.0, Joules::from_kwh(1.0));
        assert!((cost - 0.10).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn overlaps_and_bad_times_are_refused_naming_the_entry() {
        let err = Tariffs::new(
            price(0.30),
            vec![
                rule(&WEEKDAYS, "07:00", "09:00", 0.40),
                rule(&[Weekday::Wed], "08:30", "10:00", 0.45),
            ],
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("tariffs: tariff 2 overlaps tariff 1"));
        assert!(TimeOfDay::parse("25:00").is_err());
        assert!(TimeOfDay::parse("07:60").is_err());
        assert!(TimeOfDay::parse("7h").is_err());
        assert!(TimeOfDay::parse("24:00").is_ok());
        let same = Tariffs::new(price(0.3), vec![rule(&WEEKDAYS, "07:00", "07:00", 0.4)]);
        assert!(same.is_err());
        let none = Tariffs::new(price(0.3), vec![rule(&[], "07:00", "08:00", 0.4)]);
        assert!(none.is_err());
    }

    #[test]
    fn rules_read_from_json_with_times_as_text() {
        let rules: Vec<TariffRule> = serde_json::from_str(
            r#"[{"weekdays":["sat","sun"],"from":"00:00","to":"24:00","price":0.2}]"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let t = Tariffs::new(price(0.3), rules).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.price_at(6.0 * SECONDS_PER_DAY + 1.0), price(0.2));
        assert!(serde_json::from_str::<Vec<TariffRule>>(
            r#"[{"weekdays":["sat"],"from":"26:00","to":"24:00","price":0.2}]"#
        )
        .is_err());
    }

    #[test]
    fn a_price_for_every_hour_of_the_week_is_taken_and_more_than_200_rules_are_not() {
        let day = |i: usize| {
            [
                Weekday::Mon,
                Weekday::Tue,
                Weekday::Wed,
                Weekday::Thu,
                Weekday::Fri,
                Weekday::Sat,
                Weekday::Sun,
            ][i]
        };
        // 7 days × 24 hours = 168 one-hour rules, none overlapping.
        let hourly: Vec<TariffRule> = (0..168)
            .map(|k| {
                let h = k % 24;
                rule(
                    &[day(k / 24)],
                    &format!("{h:02}:00"),
                    &format!("{:02}:00", h + 1),
                    0.1,
                )
            })
            .collect();
        assert!(Tariffs::new(price(0.3), hourly).is_ok());
        // 201 rules: refused by their count before any is looked at.
        let many = vec![rule(&[], "07:00", "07:00", 0.4); MAX_TARIFF_RULES + 1];
        assert_eq!(
            Tariffs::new(price(0.3), many)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("tariffs: 201 tariffs; at most 200")
        );
    }
}
