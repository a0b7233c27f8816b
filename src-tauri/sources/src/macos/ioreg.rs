//! AppleSmartBattery from `ioreg`: the battery gauge's own power telemetry (source `smart-battery`).
//!
//! Input: `ioreg -a -r -c AppleSmartBattery` (plist, what the reader runs) or the text form of
//! `ioreg -r -n AppleSmartBattery`; [`parse_ioreg`] detects which (`<?xml` / `<plist`).
//!
//! Cost: the reader starts a process. It declares the domains it gives, so the chain runs it
//! only every 30 s for the supply state while macmon measures the system, and every sample
//! only when the battery gauge is the best measure of the draw (a Mac without SMC access).
//!
//! Rules:
//! - System draw (domain `system`, measured) = `PowerTelemetryData.SystemLoad` mW when present
//!   and non-zero (0 is an unpopulated field),
//!   on AC or on battery: it is what the machine uses, whoever supplies it.
//! - Otherwise, and only when `ExternalConnected` is false: `Voltage × |InstantAmperage|`
//!   (mV × mA; `Amperage` if there is no `InstantAmperage`). On AC the battery current says
//!   nothing about the draw (0 A while the adapter powers everything), and a zero current right
//!   after unplugging is no measurement either: both give no system reading, never 0 W.
//! - Power into the battery (domain `battery`) = `PowerTelemetryData.BatteryPower` when
//!   positive, else `Voltage × Amperage` while charging. Adapter input (domain `adapter`) =
//!   `PowerTelemetryData.SystemPowerIn`. Neither is ever the system draw.
//! - `BatteryInstalled` false is a desktop Mac's ghost battery: nothing here is a measurement
//!   and the source is unavailable.
//!
//! - Health: [`SmartBattery::health`].
//!
//! Pitfalls: text `ioreg` prints negative numbers as unsigned 64-bit (`18446744073709550000`
//! is −1616): every integer is reinterpreted as i64; plist prints them signed already. Nested
//! dictionaries repeat key names (`BatteryData.Voltage` ≠ `Voltage`): only top-level keys are
//! read, plus the named keys of `PowerTelemetryData` and `AdapterDetails`.

use crate::error::Error;
use crate::sample::Sample;
use serde_json::{json, Map, Value};
use wattbar_core::battery::{Cycles, EnergyFrom, Health, Raw};
use wattbar_core::{Domain, Quality, Reading, Stamp, Watts};

use super::plist_xml;
mod text;
pub use super::plist_xml::IoValue;
use text::parse_text;

pub const SOURCE_ID: &str = "smart-battery";

fn get<'a>(dict: &'a [(String, IoValue)], key: &str) -> Option<&'a IoValue> {
    dict.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn get_dict<'a>(dict: &'a [(String, IoValue)], key: &str) -> Option<&'a [(String, IoValue)]> {
    match get(dict, key) {
        Some(IoValue::Dict(d)) => Some(d),
        _ => None,
    }
}

/// `PowerTelemetryData`: the gauge's power figures (mW, mV, mA).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PowerTelemetry {
    pub system_load_mw: Option<i64>,
    pub system_power_in_mw: Option<i64>,
    /// Positive while charging, negative while discharging.
    pub battery_power_mw: Option<i64>,
    pub system_voltage_in_mv: Option<i64>,
    pub system_current_in_ma: Option<i64>,
    /// Apple's empirical wall-side figure; units unverified, kept as state only.
    pub wall_energy_estimate: Option<i64>,
}

/// The top-level facts of one AppleSmartBattery entry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SmartBattery {
    pub battery_installed: Option<bool>,
    pub external_connected: Option<bool>,
    pub is_charging: Option<bool>,
    pub fully_charged: Option<bool>,
    /// `CurrentCapacity`: percent on Apple Silicon (mAh on some Intel Macs).
    pub current_capacity: Option<i64>,
    pub max_capacity: Option<i64>,
    pub voltage_mv: Option<i64>,
    pub amperage_ma: Option<i64>,
    pub instant_amperage_ma: Option<i64>,
    /// `AdapterDetails.Watts`: the adapter's rating, not its draw.
    pub adapter_rating_watts: Option<i64>,
    pub telemetry: Option<PowerTelemetry>,
    /// What the battery was designed to hold, mAh.
    pub design_capacity_mah: Option<i64>,
    /// What it holds when full now, mAh, as the gauge measured it (`AppleRawMaxCapacity`).
    pub raw_max_capacity_mah: Option<i64>,
    /// The gauge's nominal full charge, mAh (`NominalChargeCapacity`).
    pub nominal_charge_capacity_mah: Option<i64>,
    pub cycle_count: Option<i64>,
    /// `DesignCycleCount9C`: the cycles Apple rates the battery for.
    pub design_cycle_count: Option<i64>,
    /// Cells in the pack: the length of `BatteryData.CellVoltage`.
    pub cells: Option<usize>,
    /// The gauge's chip (`DeviceName`, e.g. bq40z651) and the maker (`Manufacturer`).
    pub device_name: Option<String>,
    pub manufacturer: Option<String>,
}

fn mw(v: i64) -> Watts {
    Watts::from_milliwatts(v as f64)
}

impl SmartBattery {
    /// On battery or on mains, and the charge: `CurrentCapacity / MaxCapacity` (percent over
    /// 100 on Apple Silicon, mAh over mAh on Intel). `None` without an installed battery.
    pub fn supply(&self) -> Option<wattbar_core::Battery> {
        if self.battery_installed == Some(false) {
            return None;
        }
        let on_battery = !self.external_connected?;
        let percent = match (self.current_capacity, self.max_capacity) {
            (Some(c), Some(m)) if m > 0 && c >= 0 => Some((c as f64 * 100.0 / m as f64).min(100.0)),
            _ => None,
        };
        Some(wattbar_core::Battery {
            on_battery,
            percent,
        })
    }

    fn from_dict(d: &[(String, IoValue)]) -> Self {
        let int = |k: &str| get(d, k).and_then(IoValue::int);
        let flag = |k: &str| get(d, k).and_then(IoValue::bool);
        let text = |k: &str| match get(d, k) {
            Some(IoValue::Str(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            _ => None,
        };
        let telemetry = get_dict(d, "PowerTelemetryData").map(|t| {
            let int = |k: &str| get(t, k).and_then(IoValue::int);
            PowerTelemetry {
                system_load_mw: int("SystemLoad"),
                system_power_in_mw: int("SystemPowerIn"),
                battery_power_mw: int("BatteryPower"),
                system_voltage_in_mv: int("SystemVoltageIn"),
                system_current_in_ma: int("SystemCurrentIn"),
                wall_energy_estimate: int("WallEnergyEstimate"),
            }
        });
        SmartBattery {
            battery_installed: flag("BatteryInstalled"),
            external_connected: flag("ExternalConnected"),
            is_charging: flag("IsCharging"),
            fully_charged: flag("FullyCharged"),
            current_capacity: int("CurrentCapacity"),
            max_capacity: int("MaxCapacity"),
            voltage_mv: int("Voltage"),
            amperage_ma: int("Amperage"),
            instant_amperage_ma: int("InstantAmperage"),
            adapter_rating_watts: get_dict(d, "AdapterDetails")
                .and_then(|a| get(a, "Watts"))
                .and_then(IoValue::int),
            telemetry,
            design_capacity_mah: int("DesignCapacity"),
            raw_max_capacity_mah: int("AppleRawMaxCapacity"),
            nominal_charge_capacity_mah: int("NominalChargeCapacity"),
            cycle_count: int("CycleCount"),
            design_cycle_count: int("DesignCycleCount9C"),
            cells: get_dict(d, "BatteryData")
                .and_then(|b| get(b, "CellVoltage"))
                .and_then(|v| match v {
                    IoValue::Array { len } if *len > 0 => Some(*len),
                    _ => None,
                }),
            device_name: text("DeviceName"),
            manufacturer: text("Manufacturer"),
        }
    }

    /// The battery's health (`wattbar_core::battery`): full = `AppleRawMaxCapacity` where
    /// present, else `NominalChargeCapacity`, else `MaxCapacity` when it is in mAh (above 100:
    /// on Apple Silicon it is a percentage); over `DesignCapacity`. Energy at 3.8 V for each
    /// cell in `BatteryData.CellVoltage`. `None` without an installed battery.
    pub fn health(&self) -> Option<Health> {
        if !self.is_installed() {
            return None;
        }
        let full = self
            .raw_max_capacity_mah
            .or(self.nominal_charge_capacity_mah)
            .or(self.max_capacity.filter(|m| *m > 100));
        let ah = |mah: Option<i64>| mah.map(|m| m as f64 / 1e3);
        let from = match self.cells.and_then(|c| u32::try_from(c).ok()) {
            Some(cells) => EnergyFrom::ChargeAtNominalCellVoltage { cells },
            None => EnergyFrom::ChargeOnly,
        };
        let raw = Raw::Charge {
            design_ah: ah(self.design_capacity_mah),
            full_ah: ah(full),
            from,
        };
        let name = self.device_name.as_deref().unwrap_or("battery");
        let mut h = Health::from_raw(name, raw, Cycles::from_count(self.cycle_count));
        h.manufacturer = self.manufacturer.clone();
        h.model = self.device_name.clone();
        Some(h)
    }

    /// False only for a desktop Mac's placeholder battery.
    pub fn is_installed(&self) -> bool {
        self.battery_installed != Some(false)
    }

    /// Whole-system draw, as the module docs say; `None` when the data holds no measurement.
    pub fn system_power(&self) -> Option<Watts> {
        if !self.is_installed() {
            return None;
        }
        // A zero SystemLoad is an unpopulated field (a running Mac never draws 0 W).
        if let Some(load) = self
            .telemetry
            .as_ref()
            .and_then(|t| t.system_load_mw)
            .filter(|mw| *mw > 0)
        {
            return Some(mw(load));
        }
        if self.external_connected != Some(false) {
            return None;
        }
        let volts = self.voltage_mv? as f64 / 1e3;
        let amps = self
            .instant_amperage_ma
            .or(self.amperage_ma)?
            .unsigned_abs() as f64
            / 1e3;
        Some(Watts(volts * amps)).filter(|w| w.is_plausible() && w.0 > 0.0)
    }

    /// Power into the battery while it charges.
    pub fn charge_power(&self) -> Option<Watts> {
        if !self.is_installed() {
            return None;
        }
        if let Some(p) = self.telemetry.as_ref().and_then(|t| t.battery_power_mw) {
            return Some(mw(p)).filter(|w| w.0 > 0.0);
        }
        if self.is_charging != Some(true) {
            return None;
        }
        let w = self.voltage_mv? as f64 * self.amperage_ma? as f64 / 1e6;
        Some(Watts(w)).filter(|w| w.is_plausible() && w.0 > 0.0)
    }

    /// Power drawn from the adapter (`SystemPowerIn`), when one is connected and delivering.
    pub fn adapter_power(&self) -> Option<Watts> {
        if self.external_connected == Some(false) {
            return None;
        }
        let p = self.telemetry.as_ref().and_then(|t| t.system_power_in_mw)?;
        Some(mw(p)).filter(|w| w.0 > 0.0)
    }

    pub fn to_sample(&self, at: Stamp) -> Sample {
        let mut readings = Vec::new();
        let mut push = |domain, w: Option<Watts>| {
            if let Some(w) = w {
                readings.push(Reading::power(domain, w, SOURCE_ID, Quality::Measured, at));
            }
        };
        push(Domain::System, self.system_power());
        push(Domain::Battery, self.charge_power());
        push(Domain::Adapter, self.adapter_power());

        let mut state = Map::new();
        state.insert("battery_installed".into(), json!(self.is_installed()));
        if self.is_installed() {
            let opt = |v: Option<i64>| v.map_or(Value::Null, |v| json!(v));
            if let Some(ext) = self.external_connected {
                state.insert(
                    "power_source".into(),
                    json!(if ext { "AC" } else { "Battery" }),
                );
            }
            state.insert("charging".into(), json!(self.is_charging));
            state.insert("fully_charged".into(), json!(self.fully_charged));
            state.insert("current_capacity".into(), opt(self.current_capacity));
            state.insert("max_capacity".into(), opt(self.max_capacity));
            state.insert("voltage_mv".into(), opt(self.voltage_mv));
            state.insert(
                "instant_amperage_ma".into(),
                opt(self.instant_amperage_ma.or(self.amperage_ma)),
            );
            state.insert(
                "adapter_rating_watts".into(),
                opt(self.adapter_rating_watts),
            );
            if let Some(t) = &self.telemetry {
                state.insert("wall_energy_estimate".into(), opt(t.wall_energy_estimate));
            }
        }
        Sample { readings, state }
    }
}

fn parse_err(line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        what: "ioreg AppleSmartBattery",
        line,
        message: message.into(),
    }
}

/// Parses `ioreg` output for AppleSmartBattery, plist or text (detected). The first entry wins.
pub fn parse_ioreg(text: &str) -> Result<SmartBattery, Error> {
    let t = text.trim_start();
    let dict = if t.starts_with("<?xml") || t.starts_with("<plist") {
        parse_plist(t)?
    } else {
        parse_text(text)?
    };
    if get(&dict, "Voltage").is_none() && get(&dict, "BatteryInstalled").is_none() {
        return Err(parse_err(
            None,
            "the entry has neither `Voltage` nor `BatteryInstalled`: not an AppleSmartBattery",
        ));
    }
    Ok(SmartBattery::from_dict(&dict))
}

#[cfg(test)]
fn from_plist(v: &plist::Value) -> IoValue {
    match v {
        plist::Value::Integer(i) => i
            .as_signed()
            .or_else(|| i.as_unsigned().map(|u| u as i64))
            .map_or(IoValue::Other, IoValue::Int),
        plist::Value::Real(r) => IoValue::Real(*r),
        plist::Value::Boolean(b) => IoValue::Bool(*b),
        plist::Value::String(s) => IoValue::Str(s.clone()),
        plist::Value::Dictionary(d) => {
            IoValue::Dict(d.iter().map(|(k, v)| (k.clone(), from_plist(v))).collect())
        }
        plist::Value::Array(a) => IoValue::Array { len: a.len() },
        _ => IoValue::Other,
    }
}

fn parse_plist(text: &str) -> Result<Vec<(String, IoValue)>, Error> {
    plist_xml::first_dict(text).map_err(|e| parse_err(None, format!("bad plist: {e}")))
}

/// The same dictionary through the `plist` crate: the reference the fast reader is checked against.
#[cfg(test)]
fn parse_plist_reference(text: &str) -> Result<Vec<(String, IoValue)>, Error> {
    let value = plist::Value::from_reader_xml(text.as_bytes())
        .map_err(|e| parse_err(None, format!("bad plist: {e}")))?;
    let first = match &value {
        plist::Value::Array(items) => items.first(),
        dict @ plist::Value::Dictionary(_) => Some(dict),
        _ => None,
    };
    match first.map(from_plist) {
        Some(IoValue::Dict(d)) => Ok(d),
        _ => Err(parse_err(
            None,
            "the plist holds no AppleSmartBattery dictionary (is there a battery?)",
        )),
    }
}

/// Runs `ioreg -a -r -c AppleSmartBattery` and parses it. No entry, or a ghost battery, is
/// `Unavailable`. The chain runs it at its slow pace unless the battery measures the headline.
#[cfg(target_os = "macos")]
pub fn read_smart_battery() -> Result<SmartBattery, Error> {
    let out = super::command::run_command("ioreg", &["-a", "-r", "-c", "AppleSmartBattery"])?;
    if out.trim().is_empty() {
        return Err(Error::Unavailable(
            "no AppleSmartBattery in the I/O Registry: this Mac has no battery".into(),
        ));
    }
    let battery = parse_ioreg(&out)?;
    if !battery.is_installed() {
        return Err(Error::Unavailable(
            "AppleSmartBattery says BatteryInstalled = false: a desktop Mac's placeholder, \
             not a battery"
                .into(),
        ));
    }
    Ok(battery)
}

/// AppleSmartBattery as a [`Source`](wattbar_core::Source).
#[cfg(target_os = "macos")]
#[derive(Debug, Default)]
pub struct SmartBatterySource {
    supply: Option<wattbar_core::Battery>,
    /// The battery's health at the last read; replaced only when a figure changes.
    health: Option<std::sync::Arc<[Health]>>,
}

#[cfg(target_os = "macos")]
impl SmartBatterySource {
    pub fn new() -> Self {
        SmartBatterySource::default()
    }
}

#[cfg(target_os = "macos")]
impl wattbar_core::Source for SmartBatterySource {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let battery = read_smart_battery();
        self.supply = battery.as_ref().ok().and_then(SmartBattery::supply);
        let health = battery.as_ref().ok().and_then(SmartBattery::health);
        if self.health.as_deref().and_then(|h| h.first()) != health.as_ref() {
            self.health = health.map(|h| std::sync::Arc::from(vec![h]));
        }
        let readings = battery?.to_sample(at).readings;
        if readings.is_empty() {
            return Err(Error::Transient(
                "on AC without PowerTelemetryData the battery gauge does not measure the \
                 system's draw"
                    .into(),
            )
            .into());
        }
        Ok(readings)
    }

    fn battery(&self) -> Option<wattbar_core::Battery> {
        self.supply
    }

    fn battery_health(&self) -> Option<std::sync::Arc<[Health]>> {
        self.health.clone()
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::System, Domain::Battery, Domain::Adapter])
    }
}

#[cfg(test)]
mod tests;
