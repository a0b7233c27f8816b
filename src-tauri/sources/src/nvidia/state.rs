//! What NVML tells of a GPU besides its power, and the part of NVML the source uses
//! ([`Gpus`]), so the logic can be tested without a GPU.

use super::*;

/// Share of time busy over NVML's last sample period, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utilisation {
    pub gpu_percent: u32,
    pub memory_percent: u32,
}

/// Frame-buffer memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub used_bytes: u64,
    pub total_bytes: u64,
}

/// NVML's own readings of the GPU's power, kept apart and never added to each other or to the
/// power this source reports (field values `POWER_INSTANT` and `POWER_AVERAGE` at GPU scope,
/// drivers R535 and newer): the draw now and its one-second average, mW. `None`: not supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PowerFields {
    pub instant_mw: Option<u32>,
    pub average_mw: Option<u32>,
}

/// The part of NVML this source uses, so the logic can be tested without a GPU.
///
/// `Ok(None)` means "this GPU does not support that query" (NVML's `NotSupported`): absent,
/// not zero. `Err` is a failure: `Unavailable` when NVML itself is gone, `Transient` otherwise.
pub trait Gpus: Send {
    fn count(&self) -> Result<u32, Error>;
    fn name(&self, index: u32) -> Result<Option<String>, Error>;
    /// Energy since the driver loaded, mJ.
    fn total_energy_mj(&self, index: u32) -> Result<Option<u64>, Error>;
    fn power_mw(&self, index: u32) -> Result<Option<u32>, Error>;
    fn enforced_limit_mw(&self, index: u32) -> Result<Option<u32>, Error>;
    fn utilisation(&self, index: u32) -> Result<Option<Utilisation>, Error>;
    fn memory(&self, index: u32) -> Result<Option<Memory>, Error>;
    fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error>;
    /// The instant and average power fields; none by default (a GPU or driver without them).
    fn power_fields(&self, _index: u32) -> Result<PowerFields, Error> {
        Ok(PowerFields::default())
    }
    /// Each process's utilisation samples newer than `since_us` (0: all the driver holds);
    /// `Ok(None)`: this GPU cannot tell (none by default).
    fn process_samples(
        &self,
        _index: u32,
        _since_us: u64,
    ) -> Result<Option<Vec<ProcessSample>>, Error> {
        Ok(None)
    }
}

/// Which NVML value gave a GPU's watts this read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerFrom {
    EnergyCounter,
    /// NVML's instant power field, over intervals too short for the counter's mean.
    Instant,
    PowerUsage,
}

impl PowerFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerFrom::EnergyCounter => "energy-counter",
            PowerFrom::Instant => "instant",
            PowerFrom::PowerUsage => "power-usage",
        }
    }
}

/// What one read found out about one GPU besides its power. `None` = not supported or failed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuState {
    pub index: u32,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub watts: Option<Watts>,
    pub power_from: Option<PowerFrom>,
    pub enforced_power_limit: Option<Watts>,
    pub utilisation: Option<Utilisation>,
    pub memory: Option<Memory>,
    /// NVML's instant and one-second-average power, apart from `watts`.
    pub power_instant: Option<Watts>,
    pub power_average: Option<Watts>,
    /// Why the power could not be read this time, if it could not.
    pub error: Option<String>,
}

impl GpuState {
    pub(super) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("index".into(), json!(self.index));
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("name", self.name.clone().map(Value::from));
        put("pci_bus_id", self.pci_bus_id.clone().map(Value::from));
        put("watts", self.watts.map(|w| json!(w.0)));
        put("power_from", self.power_from.map(|p| json!(p.as_str())));
        put(
            "power_instant_watts",
            self.power_instant.map(|w| json!(w.0)),
        );
        put(
            "power_average_watts",
            self.power_average.map(|w| json!(w.0)),
        );
        put(
            "enforced_power_limit_watts",
            self.enforced_power_limit.map(|w| json!(w.0)),
        );
        put(
            "utilisation_gpu_percent",
            self.utilisation.map(|u| json!(u.gpu_percent)),
        );
        put(
            "utilisation_memory_percent",
            self.utilisation.map(|u| json!(u.memory_percent)),
        );
        put(
            "memory_used_bytes",
            self.memory.map(|x| json!(x.used_bytes)),
        );
        put(
            "memory_total_bytes",
            self.memory.map(|x| json!(x.total_bytes)),
        );
        put("error", self.error.clone().map(Value::from));
        Value::Object(m)
    }
}
