//! Batteries and adapters: `root/sys/class/power_supply/*`.
//!
//! Rules:
//! - Direction comes from `status`, never from the sign of a current (drivers disagree on it).
//! - Only a battery that is Discharging while no adapter is online measures the whole system:
//!   domain `system`. A Charging battery measures power *into* the battery: domain `battery`.
//!   Full, Not charging and Unknown are no measurement at all (drivers report placeholders such
//!   as `CURRENT_NOW=1000` then), so no reading, never 0 W.
//! - P = `power_now` / 10⁶ when present, else |`current_now`| × `voltage_now` / 10¹².
//! - All of a supply's fields come from one read: `uevent` when it exists (the kernel fills it
//!   in one call), else the attribute files. Never a mix: they are read at different moments.
//! - Discharging batteries (BAT0 + BAT1) add up into one system reading.
//! - Peripheral batteries (`scope` = Device: a mouse, a headset) are not the machine's: skipped.
//! - Health (full ÷ design, cycles, chemistry, maker) comes from the same read ([`health`]).
//! - Strings are read lossily; a supply is a battery when `TYPE` says so or, without `TYPE`,
//!   when it has a `STATUS`; an adapter when `TYPE` is Mains/USB or it has only `ONLINE`.

use super::sysfs::read_attr;
use crate::error::Error;
use crate::sample::Sample;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wattbar_core::battery::{Cycles, EnergyFrom, Health, Raw};
use wattbar_core::{Domain, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "power-supply";
const CLASS: &str = "sys/class/power_supply";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Battery,
    Adapter,
    Other,
}

/// One supply's fields, from one read.
#[derive(Debug, Clone, PartialEq)]
pub struct Supply {
    pub name: String,
    pub kind: Kind,
    pub status: Option<String>,
    pub online: Option<bool>,
    pub power_now_uw: Option<u64>,
    pub current_now_ua: Option<i64>,
    pub voltage_now_uv: Option<u64>,
    pub capacity_percent: Option<u8>,
    /// What the battery holds when full, and was designed to: energy (µWh) or charge (µAh).
    pub energy_full_uwh: Option<i64>,
    pub energy_full_design_uwh: Option<i64>,
    pub charge_full_uah: Option<i64>,
    pub charge_full_design_uah: Option<i64>,
    pub voltage_min_design_uv: Option<i64>,
    pub cycle_count: Option<i64>,
    pub technology: Option<String>,
    pub manufacturer: Option<String>,
    pub model_name: Option<String>,
}

/// Parses `uevent` (`POWER_SUPPLY_KEY=value` lines) into lowercase keys without the prefix.
pub fn parse_uevent(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter_map(|(k, v)| {
            k.trim()
                .strip_prefix("POWER_SUPPLY_")
                .map(|k| (k.to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect()
}

/// Builds a supply from fields named as in sysfs (`status`, `power_now`, …).
pub fn supply(name: &str, fields: &BTreeMap<String, String>) -> Supply {
    let num = |k: &str| fields.get(k).and_then(|v| v.trim().parse::<i64>().ok());
    let text = |k: &str| {
        fields
            .get(k)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty() && *v != "Unknown")
            .map(str::to_string)
    };
    let peripheral = fields.get("scope").is_some_and(|s| s == "Device");
    let kind = match fields.get("type").map(String::as_str) {
        // A mouse's or headset's battery is not the machine's.
        _ if peripheral => Kind::Other,
        Some("Battery") => Kind::Battery,
        Some(t) if t == "Mains" || t.starts_with("USB") => Kind::Adapter,
        Some(_) => Kind::Other,
        None if fields.contains_key("status") => Kind::Battery,
        None if fields.contains_key("online") => Kind::Adapter,
        None => Kind::Other,
    };
    Supply {
        name: name.to_string(),
        kind,
        status: fields.get("status").cloned(),
        online: num("online").map(|v| v != 0),
        power_now_uw: num("power_now").and_then(|v| u64::try_from(v).ok()),
        current_now_ua: num("current_now"),
        voltage_now_uv: num("voltage_now").and_then(|v| u64::try_from(v).ok()),
        capacity_percent: num("capacity").and_then(|v| u8::try_from(v).ok()),
        energy_full_uwh: num("energy_full"),
        energy_full_design_uwh: num("energy_full_design"),
        charge_full_uah: num("charge_full"),
        charge_full_design_uah: num("charge_full_design"),
        voltage_min_design_uv: num("voltage_min_design"),
        cycle_count: num("cycle_count"),
        technology: text("technology"),
        manufacturer: text("manufacturer"),
        model_name: text("model_name"),
    }
}

const ATTRIBUTES: [&str; 17] = [
    "type",
    "scope",
    "status",
    "online",
    "power_now",
    "current_now",
    "voltage_now",
    "capacity",
    "energy_full",
    "energy_full_design",
    "charge_full",
    "charge_full_design",
    "voltage_min_design",
    "cycle_count",
    "technology",
    "manufacturer",
    "model_name",
];

/// The fields of a supply's `uevent`, when it has one that says anything.
pub fn read_uevent(dir: &Path) -> Option<BTreeMap<String, String>> {
    read_attr(&dir.join("uevent"))
        .map(|t| parse_uevent(&t))
        .filter(|f| f.contains_key("status") || f.contains_key("online"))
}

/// The fields of a supply's attribute files.
pub fn read_attributes(dir: &Path) -> BTreeMap<String, String> {
    ATTRIBUTES
        .iter()
        .filter_map(|a| read_attr(&dir.join(a)).map(|v| (a.to_string(), v)))
        .collect()
}

/// Reads one supply directory: `uevent` if it exists, else the attribute files.
pub fn read_supply(dir: &Path) -> Option<Supply> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let fields = read_uevent(dir).unwrap_or_else(|| read_attributes(dir));
    Some(supply(&name, &fields))
}

fn supply_dirs(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let base = root.join(CLASS);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .map_err(|e| {
            Error::Unavailable(format!(
                "no power_supply class under {}: {e}",
                base.display()
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    Ok(dirs)
}

pub fn read_supplies(root: &Path) -> Result<Vec<Supply>, Error> {
    Ok(supply_dirs(root)?
        .iter()
        .filter_map(|d| read_supply(d))
        .collect())
}

/// Instantaneous power of a battery, without direction. A battery that is charging or
/// discharging draws something: a 0 is a driver that has not measured, so it is `None`.
pub fn battery_watts(s: &Supply) -> Option<Watts> {
    let w = match s.power_now_uw {
        Some(uw) => Watts::from_microwatts(uw as f64),
        None => {
            let (ua, uv) = (s.current_now_ua?, s.voltage_now_uv?);
            Watts(ua.unsigned_abs() as f64 * uv as f64 / 1e12)
        }
    };
    (w.0 > 0.0).then_some(w)
}

/// A battery's health (`wattbar_core::battery`): from `energy_full`/`energy_full_design` (µWh)
/// where given, else `charge_full`/`charge_full_design` (µAh) at `voltage_min_design`. `None`
/// for a supply that is not a battery.
pub fn health(s: &Supply) -> Option<Health> {
    if s.kind != Kind::Battery {
        return None;
    }
    let micro = |v: Option<i64>| v.map(|v| v as f64 / 1e6);
    let raw = if s.energy_full_uwh.is_some() || s.energy_full_design_uwh.is_some() {
        Raw::Energy {
            design_wh: micro(s.energy_full_design_uwh),
            full_wh: micro(s.energy_full_uwh),
        }
    } else {
        Raw::Charge {
            design_ah: micro(s.charge_full_design_uah),
            full_ah: micro(s.charge_full_uah),
            from: EnergyFrom::ChargeAtDesignVoltage {
                volts: micro(s.voltage_min_design_uv).unwrap_or(0.0),
            },
        }
    };
    let mut h = Health::from_raw(&s.name, raw, Cycles::from_count(s.cycle_count));
    h.chemistry = s.technology.clone();
    h.manufacturer = s.manufacturer.clone();
    h.model = s.model_name.clone();
    Some(h)
}

/// What the supplies say now (see the module rules).
pub fn interpret(supplies: &[Supply], at: Stamp) -> Result<Sample, Error> {
    let batteries: Vec<&Supply> = supplies
        .iter()
        .filter(|s| s.kind == Kind::Battery)
        .collect();
    if batteries.is_empty() {
        return Err(Error::Unavailable("no battery in power_supply".into()));
    }
    let ac_online = supplies
        .iter()
        .any(|s| s.kind == Kind::Adapter && s.online == Some(true));
    let mut sample = Sample::default();
    sample
        .state
        .insert("ac_online".into(), serde_json::Value::Bool(ac_online));
    let mut system: Option<Watts> = None;
    let mut any_discharging = false;
    for b in &batteries {
        let status = b.status.as_deref().unwrap_or("Unknown");
        sample.state.insert(
            format!("{}_status", b.name),
            serde_json::Value::String(status.to_string()),
        );
        if let Some(c) = b.capacity_percent {
            sample
                .state
                .insert(format!("{}_capacity_percent", b.name), serde_json::json!(c));
        }
        match status {
            "Discharging" if !ac_online => {
                any_discharging = true;
                if let Some(w) = battery_watts(b) {
                    system = Some(system.unwrap_or(Watts(0.0)) + w);
                }
            }
            "Charging" => {
                if let Some(w) = battery_watts(b) {
                    sample.readings.push(
                        Reading::power(Domain::Battery, w, SOURCE_ID, Quality::Measured, at)
                            .with_device(b.name.clone()),
                    );
                }
            }
            _ => {}
        }
    }
    if let Some(w) = system {
        sample.readings.insert(
            0,
            Reading::power(Domain::System, w, SOURCE_ID, Quality::Measured, at),
        );
    } else if any_discharging {
        sample.state.insert(
            "note".into(),
            "discharging, but the driver reports neither power_now nor current_now".into(),
        );
    }
    Ok(sample)
}

/// On battery when no adapter is online and a battery discharges; the charge is the mean of the
/// batteries' `capacity`. `None` without a battery.
pub fn supply_state(supplies: &[Supply]) -> Option<wattbar_core::Battery> {
    let batteries: Vec<&Supply> = supplies
        .iter()
        .filter(|s| s.kind == Kind::Battery)
        .collect();
    if batteries.is_empty() {
        return None;
    }
    let ac_online = supplies
        .iter()
        .any(|s| s.kind == Kind::Adapter && s.online == Some(true));
    let discharging = batteries
        .iter()
        .any(|b| b.status.as_deref() == Some("Discharging"));
    let charges: Vec<f64> = batteries
        .iter()
        .filter_map(|b| b.capacity_percent.map(f64::from))
        .collect();
    let percent = (!charges.is_empty()).then(|| charges.iter().sum::<f64>() / charges.len() as f64);
    Some(wattbar_core::Battery {
        on_battery: discharging && !ac_online,
        percent,
    })
}

pub struct PowerSupply {
    root: PathBuf,
    supply: Option<wattbar_core::Battery>,
    /// The batteries' health at the last read; replaced only when a figure changes.
    health: Option<Arc<[Health]>>,
    /// Supply folders, listed once and again every [`RESCAN_EVERY`] reads (a battery may be
    /// hot-swapped).
    dirs: Vec<PathBuf>,
    reads: u32,
}

const RESCAN_EVERY: u32 = 300;

impl PowerSupply {
    pub fn new(root: &Path) -> Self {
        PowerSupply {
            root: root.to_path_buf(),
            supply: None,
            health: None,
            dirs: Vec::new(),
            reads: 0,
        }
    }

    fn supplies(&mut self) -> Result<Vec<Supply>, Error> {
        self.reads += 1;
        if self.dirs.is_empty() || self.reads >= RESCAN_EVERY {
            self.reads = 0;
            self.dirs = supply_dirs(&self.root)?;
        }
        Ok(self.dirs.iter().filter_map(|d| read_supply(d)).collect())
    }
}

impl Source for PowerSupply {
    fn id(&self) -> &str {
        SOURCE_ID
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let supplies = self.supplies()?;
        self.supply = supply_state(&supplies);
        let health: Vec<Health> = supplies.iter().filter_map(health).collect();
        if self.health.as_deref() != Some(health.as_slice()) {
            self.health = (!health.is_empty()).then(|| health.into());
        }
        Ok(interpret(&supplies, at)?.readings)
    }

    fn battery(&self) -> Option<wattbar_core::Battery> {
        self.supply
    }

    fn battery_health(&self) -> Option<Arc<[Health]>> {
        self.health.clone()
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::System, Domain::Battery])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uevent_keys_lose_their_prefix_and_other_lines_are_ignored() {
        let f = parse_uevent("DEVTYPE=power_supply\nPOWER_SUPPLY_STATUS=Not charging\nPOWER_SUPPLY_SERIAL_NUMBER= 2958\n");
        assert_eq!(f.get("status").map(String::as_str), Some("Not charging"));
        assert_eq!(f.get("serial_number").map(String::as_str), Some("2958"));
        assert!(!f.contains_key("devtype"));
    }

    #[test]
    fn a_discharging_battery_reporting_zero_is_no_measurement() {
        let fields = parse_uevent(
            "POWER_SUPPLY_STATUS=Discharging\nPOWER_SUPPLY_POWER_NOW=0\nPOWER_SUPPLY_VOLTAGE_NOW=12000000\n",
        );
        let sample = interpret(&[supply("BAT0", &fields)], Stamp::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(sample.readings.is_empty(), "{:?}", sample.readings);
        assert!(sample.state.contains_key("note"));
    }

    #[test]
    fn a_wireless_mouse_battery_is_not_system_draw() {
        let mouse = parse_uevent(
            "POWER_SUPPLY_NAME=hidpp_battery_0\nPOWER_SUPPLY_SCOPE=Device\nPOWER_SUPPLY_STATUS=Discharging\nPOWER_SUPPLY_POWER_NOW=50000\n",
        );
        let s = supply("hidpp_battery_0", &mouse);
        assert_eq!(s.kind, Kind::Other);
        assert!(interpret(&[s], Stamp::default()).is_err());
    }

    #[test]
    fn the_sign_of_the_current_never_decides_direction() {
        let mut fields = BTreeMap::new();
        fields.insert("status".to_string(), "Charging".to_string());
        fields.insert("current_now".to_string(), "-2000000".to_string());
        fields.insert("voltage_now".to_string(), "12000000".to_string());
        let s = supply("BAT0", &fields);
        let sample = interpret(&[s], Stamp::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sample.readings.len(), 1);
        assert_eq!(sample.readings[0].domain, Domain::Battery);
        assert_eq!(sample.readings[0].watts, Some(Watts(24.0)));
    }
}
