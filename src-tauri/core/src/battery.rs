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
    Energy { design_wh: Option<f64>, full_wh: Option<f64> },
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

    #[test]
    fn cycles_of_zero_or_below_are_not_reported() {
        assert_eq!(Cycles::from_count(Some(0)), Cycles::NotReported);
        assert_eq!(Cycles::from_count(Some(-1)), Cycles::NotReported);
        assert_eq!(Cycles::from_count(Some(194)).count(), Some(194));
    }
}
