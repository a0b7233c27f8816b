//! [`Gpus`] over the real NVML (`nvml-wrapper`), and NVML's errors said as the chain takes them.

use super::*;

/// [`Gpus`] over the real NVML.
pub struct NvmlGpus {
    nvml: Nvml,
}

impl NvmlGpus {
    /// Loads `libnvidia-ml.so.1` and initialises NVML.
    pub fn open() -> Result<Self, Error> {
        Nvml::init()
            .map(|nvml| NvmlGpus { nvml })
            .map_err(|e| Error::Unavailable(init_reason(&e)))
    }

    pub(super) fn device(&self, index: u32) -> Result<nvml_wrapper::Device<'_>, Error> {
        self.nvml
            .device_by_index(index)
            .map_err(|e| query_error(index, "open", e))
    }

    fn query<T>(
        &self,
        index: u32,
        what: &str,
        f: impl FnOnce(&nvml_wrapper::Device<'_>) -> Result<T, NvmlError>,
    ) -> Result<Option<T>, Error> {
        let device = self.device(index)?;
        match f(&device) {
            Ok(v) => Ok(Some(v)),
            // Not supported by this GPU, or a driver too old to have the function.
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
            Err(e) => Err(query_error(index, what, e)),
        }
    }
}

fn init_reason(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => format!(
            "the NVIDIA management library libnvidia-ml.so.1 could not be loaded ({inner}); \
             install the NVIDIA driver to measure NVIDIA GPUs"
        ),
        NvmlError::DriverNotLoaded => "libnvidia-ml.so.1 is installed but the NVIDIA kernel \
             driver is not loaded"
            .into(),
        NvmlError::NoPermission => {
            "NVML has no permission to talk to the NVIDIA driver (check /dev/nvidia*)".into()
        }
        other => format!("NVML (libnvidia-ml.so.1) failed to initialise: {other}"),
    }
}

pub(super) fn query_error(index: u32, what: &str, e: NvmlError) -> Error {
    nvml_error(format!("NVML {what} on GPU {index}: {e}"), e)
}

/// NVML itself gone is `Unavailable`; anything else may pass.
fn nvml_error(message: String, e: NvmlError) -> Error {
    match e {
        NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibraryNotFound => {
            Error::Unavailable(message)
        }
        _ => Error::Transient(message),
    }
}

impl Gpus for NvmlGpus {
    fn process_samples(
        &self,
        index: u32,
        since_us: u64,
    ) -> Result<Option<Vec<ProcessSample>>, Error> {
        let device = self.device(index)?;
        match device.process_utilization_stats(since_us) {
            Ok(samples) => Ok(Some(
                samples
                    .into_iter()
                    .map(|s| ProcessSample {
                        pid: s.pid,
                        timestamp_us: s.timestamp,
                        sm_percent: s.sm_util,
                    })
                    .collect(),
            )),
            // No sample newer than `since_us`.
            Err(NvmlError::NotFound) => Ok(Some(Vec::new())),
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
            Err(e) => Err(query_error(index, "per-process utilisation", e)),
        }
    }

    fn count(&self) -> Result<u32, Error> {
        self.nvml
            .device_count()
            .map_err(|e| nvml_error(format!("NVML device count: {e}"), e))
    }

    fn name(&self, index: u32) -> Result<Option<String>, Error> {
        self.query(index, "name", |d| d.name())
    }

    fn total_energy_mj(&self, index: u32) -> Result<Option<u64>, Error> {
        self.query(index, "total energy", |d| d.total_energy_consumption())
    }

    fn power_mw(&self, index: u32) -> Result<Option<u32>, Error> {
        self.query(index, "power usage", |d| d.power_usage())
    }

    fn power_fields(&self, index: u32) -> Result<PowerFields, Error> {
        use nvml_wrapper::enums::device::SampleValue;
        use nvml_wrapper::struct_wrappers::device::FieldValueSample;
        use nvml_wrapper::structs::device::FieldId;
        use nvml_wrapper::sys_exports::field_id::{
            NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT,
        };
        let asked = [
            FieldId(NVML_FI_DEV_POWER_INSTANT),
            FieldId(NVML_FI_DEV_POWER_AVERAGE),
        ];
        let Some(samples) = self.query(index, "power fields", |d| d.field_values_for(&asked))?
        else {
            return Ok(PowerFields::default());
        };
        // The answers come in the order asked; a field the GPU lacks is an error of its own.
        let mw = |s: Option<&Result<FieldValueSample, NvmlError>>| match s {
            Some(Ok(FieldValueSample {
                value: Ok(SampleValue::U32(v)),
                ..
            })) => Some(*v),
            Some(Ok(FieldValueSample {
                value: Ok(SampleValue::U64(v)),
                ..
            })) => u32::try_from(*v).ok(),
            _ => None,
        };
        Ok(PowerFields {
            instant_mw: mw(samples.first()),
            average_mw: mw(samples.get(1)),
        })
    }

    fn enforced_limit_mw(&self, index: u32) -> Result<Option<u32>, Error> {
        self.query(index, "enforced power limit", |d| d.enforced_power_limit())
    }

    fn utilisation(&self, index: u32) -> Result<Option<Utilisation>, Error> {
        self.query(index, "utilisation", |d| d.utilization_rates())
            .map(|u| {
                u.map(|u| Utilisation {
                    gpu_percent: u.gpu,
                    memory_percent: u.memory,
                })
            })
    }

    fn memory(&self, index: u32) -> Result<Option<Memory>, Error> {
        self.query(index, "memory", |d| d.memory_info()).map(|m| {
            m.map(|m| Memory {
                used_bytes: m.used,
                total_bytes: m.total,
            })
        })
    }

    fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error> {
        self.query(index, "PCI info", |d| d.pci_info())
            .map(|p| p.map(|p| p.bus_id))
    }
}
