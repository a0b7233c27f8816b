//! The part of NVML a sweep turns ([`PowerLimits`]): a GPU's power-management limit, its default
//! and the range it may be set in, and setting it; the graphics clocks it may be locked to, and
//! locking or unlocking it; over the real NVML, or over other answers in tests.

use super::*;

/// A GPU's power-management limit and its range, mW, as NVML gives them
/// (`nvmlDeviceGetPowerManagementLimit`, `…LimitDefault`, `…LimitConstraints`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitRange {
    pub limit_mw: u32,
    pub default_mw: u32,
    pub min_mw: u32,
    pub max_mw: u32,
}

/// What a sweep of a GPU's power limit or clock asks of NVML.
pub trait PowerLimits: Send {
    fn gpus(&self) -> Result<u32, Error>;
    /// `Ok(None)`: this GPU's limit cannot be read or set (NVML's `NotSupported`).
    fn range(&self, index: u32) -> Result<Option<LimitRange>, Error>;
    /// Sets the limit (`nvmlDeviceSetPowerManagementLimit`); a refusal says what it needs.
    fn set_limit_mw(&mut self, index: u32, mw: u32) -> Result<(), Error>;
    /// The graphics clocks this GPU may be locked to, MHz, highest first, at its highest memory
    /// clock (`nvmlDeviceGetSupportedGraphicsClocks`); `Ok(None)` where it cannot tell.
    fn graphics_clocks_mhz(&self, index: u32) -> Result<Option<Vec<u32>>, Error>;
    /// Locks the graphics clock to `mhz` (`nvmlDeviceSetGpuLockedClocks`, the same minimum and
    /// maximum), or unlocks it (`nvmlDeviceResetGpuLockedClocks`) with `None`.
    fn lock_graphics_clock_mhz(&mut self, index: u32, mhz: Option<u32>) -> Result<(), Error>;
}

impl PowerLimits for NvmlGpus {
    fn gpus(&self) -> Result<u32, Error> {
        <Self as Gpus>::count(self)
    }

    fn range(&self, index: u32) -> Result<Option<LimitRange>, Error> {
        let device = self.device(index)?;
        let read = || -> Result<LimitRange, NvmlError> {
            let range = device.power_management_limit_constraints()?;
            Ok(LimitRange {
                limit_mw: device.power_management_limit()?,
                default_mw: device.power_management_limit_default()?,
                min_mw: range.min_limit,
                max_mw: range.max_limit,
            })
        };
        match read() {
            Ok(r) => Ok(Some(r)),
            Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
            Err(e) => Err(query_error(index, "power limits", e)),
        }
    }

    fn set_limit_mw(&mut self, index: u32, mw: u32) -> Result<(), Error> {
        let mut device = self.device(index)?;
        device.set_power_management_limit(mw).map_err(|e| match e {
            NvmlError::NoPermission => Error::Unavailable(format!(
                "NVML refused to set GPU {index}'s power limit: it needs root (as \
                     `nvidia-smi -pl` does)"
            )),
            other => query_error(index, "set the power limit", other),
        })
    }

    fn graphics_clocks_mhz(&self, index: u32) -> Result<Option<Vec<u32>>, Error> {
        let device = self.device(index)?;
        let read = || -> Result<Vec<u32>, NvmlError> {
            let memory = device.supported_memory_clocks()?;
            let top = memory.iter().copied().max().unwrap_or(0);
            let mut clocks = device.supported_graphics_clocks(top)?;
            clocks.sort_unstable_by(|a, b| b.cmp(a));
            clocks.dedup();
            Ok(clocks)
        };
        match read() {
            Ok(c) if !c.is_empty() => Ok(Some(c)),
            Ok(_) | Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => Ok(None),
            Err(e) => Err(query_error(index, "supported clocks", e)),
        }
    }

    fn lock_graphics_clock_mhz(&mut self, index: u32, mhz: Option<u32>) -> Result<(), Error> {
        use nvml_wrapper::enums::device::GpuLockedClocksSetting;
        let mut device = self.device(index)?;
        let done = match mhz {
            Some(mhz) => device.set_gpu_locked_clocks(GpuLockedClocksSetting::Numeric {
                min_clock_mhz: mhz,
                max_clock_mhz: mhz,
            }),
            None => device.reset_gpu_locked_clocks(),
        };
        done.map_err(|e| match e {
            NvmlError::NoPermission => Error::Unavailable(format!(
                "NVML refused to lock GPU {index}'s clocks: it needs root (as `nvidia-smi -lgc` \
                 does)"
            )),
            other => query_error(index, "lock the graphics clock", other),
        })
    }
}
