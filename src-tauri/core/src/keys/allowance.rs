//! A key's budget as a person writes it (`50kJ/day`, `200Wh/week`, `2kWh/month`, money as
//! `0.50/day` in the preferences' currency), and the fixed UTC window a moment falls in.
//!
//! Limits, checked before anything is built: the text is at most [`MAX_TEXT_CHARS`]; an amount
//! is finite, above 0 and at most [`MAX_JOULES`] (or [`MAX_MONEY`]).

use crate::error::Error;
use chrono::{DateTime, Datelike, Duration, NaiveDate};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest budget text read.
pub const MAX_TEXT_CHARS: usize = 64;
/// The most a budget may allow: 1 TJ (278 MWh), more than any machine draws in a month.
pub const MAX_JOULES: f64 = 1e12;
/// The most money a budget may allow, in its currency.
pub const MAX_MONEY: f64 = 1e9;

/// A fixed window in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Day,
    /// ISO week: from Monday 00:00 UTC.
    Week,
    /// From the 1st, 00:00 UTC.
    Month,
}

impl Period {
    /// The window `[start, end)` (Unix seconds) holding `at_unix`; `None` for a time no
    /// calendar reaches (NaN, or beyond year 262,000).
    pub fn window(self, at_unix: f64) -> Option<(f64, f64)> {
        if !at_unix.is_finite() {
            return None;
        }
        let date = DateTime::from_timestamp(at_unix.floor() as i64, 0)?.date_naive();
        let (from, to) = match self {
            Period::Day => (date, date.succ_opt()?),
            Period::Week => {
                let monday =
                    date - Duration::days(i64::from(date.weekday().num_days_from_monday()));
                (monday, monday + Duration::days(7))
            }
            Period::Month => {
                let first = NaiveDate::from_ymd_opt(date.year(), date.month(), 1)?;
                let next = if date.month() == 12 {
                    NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)?
                } else {
                    NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)?
                };
                (first, next)
            }
        };
        let unix = |d: NaiveDate| {
            d.and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc().timestamp() as f64)
        };
        Some((unix(from)?, unix(to)?))
    }

    /// The name of the window holding `at_unix`, as usage groups are labelled: `2026-12-05`,
    /// `2026-W49` (ISO week and its year), `2026-12`.
    pub fn label(self, at_unix: f64) -> Option<String> {
        if !at_unix.is_finite() {
            return None;
        }
        let date = DateTime::from_timestamp(at_unix.floor() as i64, 0)?.date_naive();
        Some(match self {
            Period::Day => date.format("%Y-%m-%d").to_string(),
            Period::Week => {
                let week = date.iso_week();
                format!("{}-W{:02}", week.year(), week.week())
            }
            Period::Month => date.format("%Y-%m").to_string(),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Joules(f64),
    /// In the preferences' currency.
    Money(f64),
}

/// An amount per window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Allowance {
    pub amount: Amount,
    pub period: Period,
}

fn invalid(message: String) -> Error {
    Error::Invalid {
        field: "budget",
        message,
    }
}

/// `text` split at its `/` into the amount's text and the period.
fn split(text: &str) -> Result<(&str, Period), Error> {
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(invalid(format!("longer than {MAX_TEXT_CHARS} characters")));
    }
    let (amount, period) = text.trim().split_once('/').ok_or_else(|| {
        invalid(format!(
            "{text:?}: an amount per day, week or month, as 50kJ/day"
        ))
    })?;
    let period = match period.trim().to_ascii_lowercase().as_str() {
        "day" | "d" => Period::Day,
        "week" | "w" => Period::Week,
        "month" | "mo" => Period::Month,
        other => return Err(invalid(format!("{other:?} is not day, week or month"))),
    };
    Ok((amount.trim(), period))
}

/// A finite number above 0 and at most `max`.
fn positive(text: &str, max: f64) -> Result<f64, Error> {
    let x: f64 = text
        .trim()
        .parse()
        .map_err(|_| invalid(format!("{text:?} is not a number")))?;
    if !(x.is_finite() && x > 0.0 && x <= max) {
        return Err(invalid(format!("{text} is not between 0 and {max:e}")));
    }
    Ok(x)
}

impl Allowance {
    /// Energy per window: `50kJ/day`, `200 Wh/week`, `2kWh/month` (J, kJ, MJ, Wh, kWh, MWh).
    pub fn energy(text: &str) -> Result<Allowance, Error> {
        let (amount, period) = split(text)?;
        let lower = amount.to_ascii_lowercase();
        let (number, per_unit) = [
            ("mwh", 3.6e9),
            ("kwh", 3.6e6),
            ("wh", 3600.0),
            ("mj", 1e6),
            ("kj", 1e3),
            ("j", 1.0),
        ]
        .into_iter()
        .find_map(|(unit, j)| lower.strip_suffix(unit).map(|n| (n.to_string(), j)))
        .ok_or_else(|| invalid(format!("{amount:?} has no unit: J, kJ, MJ, Wh, kWh or MWh")))?;
        let joules = positive(&number, MAX_JOULES / per_unit)? * per_unit;
        Ok(Allowance {
            amount: Amount::Joules(joules),
            period,
        })
    }

    /// Money per window, in the preferences' currency: `0.50/day`.
    pub fn money(text: &str) -> Result<Allowance, Error> {
        let (amount, period) = split(text)?;
        Ok(Allowance {
            amount: Amount::Money(positive(amount, MAX_MONEY)?),
            period,
        })
    }

    /// The joules allowed, for an energy budget.
    pub fn joules(&self) -> Option<f64> {
        match self.amount {
            Amount::Joules(j) => Some(j),
            Amount::Money(_) => None,
        }
    }
}

/// As it reads back: `50000 J/day`, `0.5/day`.
impl fmt::Display for Allowance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.amount {
            Amount::Joules(j) => write!(f, "{j}J/{}", self.period.name()),
            Amount::Money(m) => write!(f, "{m}/{}", self.period.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_budgets_read_in_any_unit_a_person_writes() {
        let j = |t: &str| Allowance::energy(t).map(|a| (a.joules(), a.period));
        assert_eq!(j("50kJ/day"), Ok((Some(50_000.0), Period::Day)));
        // 200 Wh × 3,600 = 720 kJ; 2 kWh × 3.6 MJ = 7.2 MJ.
        assert_eq!(j("200 Wh / week"), Ok((Some(720_000.0), Period::Week)));
        assert_eq!(j("2kWh/month"), Ok((Some(7_200_000.0), Period::Month)));
        assert_eq!(j("1.5MJ/d"), Ok((Some(1_500_000.0), Period::Day)));
        // What reads back parses to the same.
        let a = Allowance::energy("2kWh/month").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Allowance::energy(&a.to_string()), Ok(a));
    }

    #[test]
    fn a_budget_without_a_unit_period_or_sane_amount_is_refused_and_says_why() {
        let why = |t: &str| {
            Allowance::energy(t)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(why("50/day").contains("no unit"), "{}", why("50/day"));
        assert!(why("50kJ").contains("per day, week or month"));
        assert!(why("50kJ/year").contains("not day, week or month"));
        assert!(why("0kJ/day").contains("between 0"));
        assert!(why("-5kJ/day").contains("between 0"));
        assert!(why("NaNkJ/day").contains("between 0"));
        assert!(why("1e300J/day").contains("between 0"));
        assert!(
            why("300MWh/day").contains("between 0"),
            "1.08 TJ, above 1 TJ"
        );
        assert!(why(&"9".repeat(100)).contains("longer than 64"));
        assert_eq!(
            Allowance::money("0.50/day").map(|a| a.amount),
            Ok(Amount::Money(0.5))
        );
        assert!(Allowance::money("0.50EUR/day").is_err());
    }

    #[test]
    fn windows_are_fixed_in_utc_day_iso_week_and_calendar_month() {
        // Saturday 2026-12-05 17:30 UTC.
        let at = 1_796_491_800.0;
        assert_eq!(
            Period::Day.window(at),
            Some((1_796_428_800.0, 1_796_515_200.0))
        );
        // From Monday 2026-11-30 to Monday 2026-12-07.
        assert_eq!(
            Period::Week.window(at),
            Some((1_795_996_800.0, 1_796_601_600.0))
        );
        // December: from the 1st to 2027-01-01, across the year's end.
        assert_eq!(
            Period::Month.window(at),
            Some((1_796_083_200.0, 1_798_761_600.0))
        );
        // The leap day of 2028 is in February's window, which ends on 1 March.
        assert_eq!(
            Period::Month.window(1_835_438_400.0),
            Some((1_832_976_000.0, 1_835_481_600.0))
        );
        // A window's start is its own; its end is the next one's.
        assert_eq!(
            Period::Day.window(1_796_515_200.0).map(|w| w.0),
            Some(1_796_515_200.0)
        );
        assert_eq!(Period::Day.window(f64::NAN), None);
        assert_eq!(Period::Day.window(1e300), None);
    }

    #[test]
    fn usage_groups_are_named_by_their_window() {
        // Saturday 2026-12-05 17:30 UTC is in ISO week 49 of 2026.
        let at = 1_796_491_800.0;
        assert_eq!(Period::Day.label(at).as_deref(), Some("2026-12-05"));
        assert_eq!(Period::Week.label(at).as_deref(), Some("2026-W49"));
        assert_eq!(Period::Month.label(at).as_deref(), Some("2026-12"));
        // Friday 2027-01-01 belongs to week 53 of 2026, ISO's year, not the calendar's.
        assert_eq!(
            Period::Week.label(1_798_761_600.0).as_deref(),
            Some("2026-W53")
        );
        assert_eq!(Period::Day.label(f64::NAN), None);
    }
}
