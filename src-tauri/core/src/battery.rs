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
use std::collections::BTreeMap;

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

/// A battery's own price and rating, where it differs from the machine's (`battery_prices`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatteryPricing {
    /// What a new one costs, in the preferences' currency.
    pub price: f64,
    /// The full cycles it is rated for; `None`: the machine's `battery_rated_cycles`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rated_cycles: Option<u32>,
}

/// What drawing a kWh from the batteries wears, in the price's currency.
///
/// One battery: `price ÷ (rated_cycles × design capacity in kWh)`. A €200, 70 Wh battery rated
/// for 1,000 cycles: 200 ÷ (1,000 × 0.070) = 2.857 a kWh. Several: a kWh is taken to come from
/// each in proportion to its design capacity (they discharge to the same depth), so the rate
/// is Σ (price ÷ cycles) ÷ Σ design kWh, where a battery named in `per_battery` has its own price
/// and cycles and the rest together cost `price` (one price buys the machine's batteries) at
/// `rated_cycles`. `Err` says why it cannot be priced: no battery, one whose design is not
/// reported, or one with no price at all.
pub fn wear_per_kwh(
    price: Option<f64>,
    rated_cycles: u32,
    per_battery: &BTreeMap<String, BatteryPricing>,
    batteries: &[Health],
) -> Result<f64, String> {
    if batteries.is_empty() {
        return Err("no battery is known".into());
    }
    let mut design_kwh = 0.0;
    let mut per_cycle = 0.0;
    let mut unnamed: Option<&str> = None;
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
        match per_battery.get(&b.battery) {
            Some(own) => {
                per_cycle += own.price / f64::from(own.rated_cycles.unwrap_or(rated_cycles));
            }
            None => unnamed = unnamed.or(Some(b.battery.as_str())),
        }
    }
    if let Some(name) = unnamed {
        match price {
            Some(p) => per_cycle += p / f64::from(rated_cycles),
            None if per_battery.is_empty() => return Err("no battery_price is set".into()),
            None => {
                return Err(format!(
                "{name} has no price: battery_prices does not name it and no battery_price is set"
            ))
            }
        }
    }
    let per_kwh = per_cycle / design_kwh;
    if per_kwh.is_finite() && per_kwh >= 0.0 {
        Ok(per_kwh)
    } else {
        Err(format!(
            "{per_cycle} a cycle over {design_kwh} kWh is no price"
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
mod tests;
