//! A battery's health: what it holds when full against what it was designed to hold, and how
//! many cycles it has been through.
//!
//! Rules:
//! - Health = full ÷ design, both in the unit the gauge reports (charge or energy), so a
//!   voltage never enters it. A ratio above 1 (a new battery, a generous gauge) is kept as it is.
//! - Unknown is never 0 or 100 %: a design or full capacity of 0 is not reported
//!   ([`Health::design`] is `None`, and so is the ratio); a cycle count of 0 is what drivers
//!   give when the gauge does not count (every Linux capture but one), so it is "not reported"
//!   too ([`Cycles::NotReported`]). A battery that has really seen no cycle cannot be told
//!   apart, and is said the same way.
//! - Energy where the gauge gives energy. Where it gives only charge, energy = charge × a
//!   voltage, and [`EnergyFrom`] says which: the design voltage on Linux
//!   (`voltage_min_design`, which UPower also uses), on macOS the nominal 3.8 V of a lithium-ion
//!   cell times the cells the gauge lists. Without a voltage the ratio is known and the energy
//!   is not.

use crate::units::Joules;
use serde::{Deserialize, Serialize};

/// Joules in a watt-hour.
pub const JOULES_PER_WH: f64 = 3600.0;
/// A lithium-ion cell's nominal voltage, for a gauge that reports charge and no design voltage.
pub const NOMINAL_CELL_VOLTS: f64 = 3.8;

/// How many charge cycles a battery has been through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "count")]
pub enum Cycles {
    Counted(u32),
    /// The gauge gives none, or gives 0 (what drivers report when they do not count).
    NotReported,
}

impl Cycles {
    pub fn from_count(count: Option<i64>) -> Self {
        match count.and_then(|c| u32::try_from(c).ok()) {
            Some(c) if c > 0 => Cycles::Counted(c),
            _ => Cycles::NotReported,
        }
    }

    pub fn count(self) -> Option<u32> {
        match self {
            Cycles::Counted(c) => Some(c),
            Cycles::NotReported => None,
        }
    }
}

/// Where a battery's energy figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum EnergyFrom {
    /// The gauge reports energy (Linux `energy_full`, `energy_full_design`).
    Energy,
    /// Charge × the design voltage the gauge reports (Linux `voltage_min_design`).
    ChargeAtDesignVoltage { volts: f64 },
    /// Charge × [`NOMINAL_CELL_VOLTS`] × the cells the gauge lists (macOS).
    ChargeAtNominalCellVoltage { cells: u32 },
    /// Charge only, with no voltage to turn it into energy: the ratio alone is known.
    ChargeOnly,
}

impl EnergyFrom {
    /// What the figures are, in words, for a reader.
    pub fn describe(self) -> String {
        match self {
            EnergyFrom::Energy => "the gauge's energy".into(),
            EnergyFrom::ChargeAtDesignVoltage { volts } => {
                format!("the gauge's charge × its design voltage {volts:.2} V")
            }
            EnergyFrom::ChargeAtNominalCellVoltage { cells } => format!(
                "the gauge's charge × {cells} cells × {NOMINAL_CELL_VOLTS} V (nominal lithium-ion)"
            ),
            EnergyFrom::ChargeOnly => {
                "the gauge's charge, with no voltage: the energy is unknown".into()
            }
        }
    }

    /// Volts to multiply a charge by, when known.
    fn volts(self) -> Option<f64> {
        match self {
            EnergyFrom::Energy | EnergyFrom::ChargeOnly => None,
            EnergyFrom::ChargeAtDesignVoltage { volts } => Some(volts),
            EnergyFrom::ChargeAtNominalCellVoltage { cells } => {
                Some(f64::from(cells) * NOMINAL_CELL_VOLTS)
            }
        }
    }
}

/// The gauge's raw capacities, in its own unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Raw {
    /// Watt-hours.
    Energy {
        design_wh: Option<f64>,
        full_wh: Option<f64>,
    },
    /// Amp-hours, with the voltage to turn them into energy when there is one.
    Charge {
        design_ah: Option<f64>,
        full_ah: Option<f64>,
        from: EnergyFrom,
    },
}

/// One battery's health now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// The battery's name where the OS gives one (`BAT0`), else its gauge's.
    pub battery: String,
    /// Energy it was designed to hold; `None` where not reported or not known as energy.
    pub design: Option<Joules>,
    /// Energy it holds when full now.
    pub full: Option<Joules>,
    /// full ÷ design in the gauge's unit; `None` where either is not reported.
    pub ratio: Option<f64>,
    pub cycles: Cycles,
    pub energy_from: EnergyFrom,
    pub chemistry: Option<String>,
    pub manufacturer: Option<String>,
    pub model: Option<String>,
}

/// A capacity is reported when it is a finite number above 0.
fn reported(v: Option<f64>) -> Option<f64> {
    v.filter(|v| v.is_finite() && *v > 0.0)
}

impl Health {
    /// Health from the gauge's raw figures (see the module rules).
    pub fn from_raw(battery: &str, raw: Raw, cycles: Cycles) -> Self {
        let (design_wh, full_wh, ratio, energy_from) = match raw {
            Raw::Energy { design_wh, full_wh } => {
                let (d, f) = (reported(design_wh), reported(full_wh));
                (d, f, ratio(d, f), EnergyFrom::Energy)
            }
            Raw::Charge {
                design_ah,
                full_ah,
                from,
            } => {
                let (d, f) = (reported(design_ah), reported(full_ah));
                let volts = from.volts().filter(|v| v.is_finite() && *v > 0.0);
                let wh = |ah: Option<f64>| Some(ah? * volts?);
                let from = if volts.is_some() {
                    from
                } else {
                    EnergyFrom::ChargeOnly
                };
                (wh(d), wh(f), ratio(d, f), from)
            }
        };
        let joules = |wh: Option<f64>| wh.map(|wh| Joules(wh * JOULES_PER_WH));
        Health {
            battery: battery.to_string(),
            design: joules(design_wh),
            full: joules(full_wh),
            ratio,
            cycles,
            energy_from,
            chemistry: None,
            manufacturer: None,
            model: None,
        }
    }

    /// The battery's health in whole percent, as the menu shows it.
    pub fn percent(&self) -> Option<f64> {
        self.ratio.map(|r| r * 100.0)
    }
}

fn ratio(design: Option<f64>, full: Option<f64>) -> Option<f64> {
    Some(full? / design?)
}

/// What drawing a kWh from the batteries wears, in the price's currency: `price ÷ (rated_cycles
/// × design capacity in kWh)`, the designs of every battery added (one price buys the machine's
/// batteries). A €200, 70 Wh battery rated for 1,000 cycles: 200 ÷ (1,000 × 0.070) = 2.857 a
/// kWh. `Err` says why it cannot be priced: no battery, or one whose design is not reported.
pub fn wear_per_kwh(price: f64, rated_cycles: u32, batteries: &[Health]) -> Result<f64, String> {
    if batteries.is_empty() {
        return Err("no battery is known".into());
    }
    let mut design_kwh = 0.0;
    for b in batteries {
        match b.design {
            Some(j) => design_kwh += j.0 / crate::units::JOULES_PER_KWH,
            None => {
                return Err(format!(
                    "{} does not report its design capacity as energy ({})",
                    b.battery,
                    b.energy_from.describe()
                ))
            }
        }
    }
    let per_kwh = price / (f64::from(rated_cycles) * design_kwh);
    if per_kwh.is_finite() && per_kwh >= 0.0 {
        Ok(per_kwh)
    } else {
        Err(format!(
            "{price} ÷ ({rated_cycles} cycles × {design_kwh} kWh) is no price"
        ))
    }
}

/// Days of history a trend needs: fewer, and a month's noise in the gauge would be read as wear.
pub const MIN_TREND_DAYS: i64 = 30;
/// The health a trend projects to: where makers and Apple call a battery worn (80 %).
pub const WORN_RATIO: f64 = 0.8;

/// A battery's health over time, as a straight line through its daily figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Trend {
    /// The history spans fewer than [`MIN_TREND_DAYS`] days.
    NotEnoughHistory { days: i64 },
    /// Health falls: `per_year` (a ratio, negative) and the day it reaches [`WORN_RATIO`]
    /// (days since 1970-01-01; today or earlier when it is there already).
    Falling {
        per_year: f64,
        worn_on_day: i64,
        days: i64,
    },
    /// Health holds or rises over the history: no date to give.
    NotFalling { per_year: f64, days: i64 },
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` day; `None` for anything else.
pub fn day_number(day: &str) -> Option<i64> {
    let date = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
    Some(
        date.signed_duration_since(chrono::NaiveDate::default())
            .num_days(),
    )
}

/// The `YYYY-MM-DD` of a day number ([`day_number`]'s inverse); `None` past chrono's range.
pub fn day_text(number: i64) -> Option<String> {
    let date =
        chrono::NaiveDate::default().checked_add_signed(chrono::TimeDelta::try_days(number)?)?;
    Some(date.format("%Y-%m-%d").to_string())
}

/// The least-squares line through `(day, ratio)` points (days since 1970-01-01; any order),
/// and where it crosses [`WORN_RATIO`].
pub fn trend(points: &[(i64, f64)]) -> Trend {
    let points: Vec<(f64, f64)> = points
        .iter()
        .filter(|(_, r)| r.is_finite())
        .map(|&(d, r)| (d as f64, r))
        .collect();
    let (first, last) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (d, _)| {
            (lo.min(*d), hi.max(*d))
        });
    let days = if points.is_empty() {
        0
    } else {
        (last - first) as i64 + 1
    };
    if days < MIN_TREND_DAYS {
        return Trend::NotEnoughHistory { days };
    }
    let n = points.len() as f64;
    let mean_d = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_r = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_d).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_d) * (p.1 - mean_r)).sum();
    // Days all on one day cannot be: `days` ≥ 30 spans two at least, so Sxx > 0.
    let slope = sxy / sxx;
    let per_year = slope * 365.0;
    if slope >= 0.0 || !slope.is_finite() {
        return Trend::NotFalling {
            per_year: if per_year.is_finite() { per_year } else { 0.0 },
            days,
        };
    }
    let crossing = mean_d + (WORN_RATIO - mean_r) / slope;
    Trend::Falling {
        per_year,
        worn_on_day: crossing.floor() as i64,
        days,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_gauges_give_the_ratio_and_joules() {
        // 67.49 Wh of 99.46 Wh: 67.86 %; 99.46 Wh = 358,056 J.
        let h = Health::from_raw(
            "BAT0",
            Raw::Energy {
                design_wh: Some(99.46),
                full_wh: Some(67.49),
            },
            Cycles::from_count(Some(0)),
        );
        assert!((h.ratio.unwrap_or(0.0) - 0.678_564).abs() < 1e-6);
        assert!((h.design.map(|j| j.0).unwrap_or(0.0) - 358_056.0).abs() < 1e-6);
        assert_eq!(h.cycles, Cycles::NotReported);
    }

    #[test]
    fn a_charge_gauge_without_voltage_knows_the_ratio_and_not_the_energy() {
        let h = Health::from_raw(
            "BAT0",
            Raw::Charge {
                design_ah: Some(3.6),
                full_ah: Some(3.424),
                from: EnergyFrom::ChargeAtDesignVoltage { volts: 0.0 },
            },
            Cycles::Counted(12),
        );
        assert!((h.ratio.unwrap_or(0.0) - 0.951_111).abs() < 1e-6);
        assert_eq!(h.design, None);
        assert_eq!(h.energy_from, EnergyFrom::ChargeOnly);
    }

    #[test]
    fn a_design_of_zero_is_not_reported_and_neither_is_the_ratio() {
        let h = Health::from_raw(
            "BAT0",
            Raw::Energy {
                design_wh: Some(0.0),
                full_wh: Some(40.0),
            },
            Cycles::from_count(None),
        );
        assert_eq!((h.design, h.ratio), (None, None));
        assert!(h.full.is_some());
    }

    /// A made-up history (not a capture): 90 days from day 20,000 (2024-10-04), health falling
    /// from 0.95 by 0.0002 a day: 0.95 − 0.0002·d. It reaches 0.8 at d = 0.15 / 0.0002 = 750,
    /// day 20,750 (2026-10-24); −0.073 a year.
    #[test]
    fn a_90_day_history_reaches_80_percent_on_the_day_worked_by_hand() {
        let history: Vec<(i64, f64)> = (0..90)
            .map(|d| (20_000 + d, 0.95 - 0.0002 * d as f64))
            .collect();
        match trend(&history) {
            Trend::Falling {
                per_year,
                worn_on_day,
                days,
            } => {
                assert_eq!(worn_on_day, 20_750);
                assert!((per_year + 0.073).abs() < 1e-9, "{per_year}");
                assert_eq!(days, 90);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn noise_around_the_line_moves_the_date_little_and_29_days_give_none() {
        // ±0.005 alternating around the same line (+ on even days). The wiggle adds
        // Σ(d − 44.5)·w = 45 pairs × −0.005 = −0.225 to Sxy; Sxx = 90·(90² − 1)/12 = 60,742.5;
        // slope −0.0002 − 0.225/60,742.5 = −0.00020370; the mean 0.9411 at day 44.5, so 0.8 at
        // 44.5 + 0.1411/0.00020370 = 737.2: day 20,737, two weeks before the clean line's.
        let noisy: Vec<(i64, f64)> = (0..90)
            .map(|d| {
                let wiggle = if d % 2 == 0 { 0.005 } else { -0.005 };
                (20_000 + d, 0.95 - 0.0002 * d as f64 + wiggle)
            })
            .collect();
        match trend(&noisy) {
            Trend::Falling { worn_on_day, .. } => assert_eq!(worn_on_day, 20_737),
            other => panic!("{other:?}"),
        }
        let short: Vec<(i64, f64)> = (0..29).map(|d| (20_000 + d, 0.9)).collect();
        assert_eq!(trend(&short), Trend::NotEnoughHistory { days: 29 });
        let flat: Vec<(i64, f64)> = (0..40).map(|d| (20_000 + d, 0.9)).collect();
        assert!(matches!(trend(&flat), Trend::NotFalling { .. }));
    }

    #[test]
    fn a_200_eur_70_wh_battery_wears_2_86_a_kwh_and_unknown_design_is_said() {
        let b = Health::from_raw(
            "BAT0",
            Raw::Energy {
                design_wh: Some(70.0),
                full_wh: Some(60.0),
            },
            Cycles::NotReported,
        );
        let rate = wear_per_kwh(200.0, 1000, std::slice::from_ref(&b)).unwrap_or(f64::NAN);
        assert!((rate - 200.0 / 70.0).abs() < 1e-12, "{rate}");
        // 20 W for 30 min = 0.010 kWh: 0.0286.
        assert!((0.010 * rate - 0.028_571).abs() < 1e-6);
        let charge_only = Health::from_raw(
            "BAT1",
            Raw::Charge {
                design_ah: Some(5.0),
                full_ah: Some(4.0),
                from: EnergyFrom::ChargeOnly,
            },
            Cycles::NotReported,
        );
        let why = wear_per_kwh(200.0, 1000, &[b, charge_only])
            .err()
            .unwrap_or_default();
        assert!(why.contains("BAT1 does not report its design"), "{why}");
        assert!(wear_per_kwh(200.0, 1000, &[]).is_err());
    }

    #[test]
    fn day_numbers_count_from_1970() {
        assert_eq!(day_number("1970-01-02"), Some(1));
        assert_eq!(day_number("2024-10-04"), Some(20_000));
        assert_eq!(day_text(20_750).as_deref(), Some("2026-10-24"));
        assert_eq!(day_number("2024-13-01"), None);
        assert_eq!(day_text(i64::MAX), None);
    }

    #[test]
    fn cycles_of_zero_or_below_are_not_reported() {
        assert_eq!(Cycles::from_count(Some(0)), Cycles::NotReported);
        assert_eq!(Cycles::from_count(Some(-1)), Cycles::NotReported);
        assert_eq!(Cycles::from_count(Some(194)).count(), Some(194));
    }
}
