//! The part of NVML a power-limit sweep turns ([`PowerLimits`]): a GPU's power-management limit,
//! its default and the range it may be set in, and setting it; over the real NVML, or over other
//! answers in tests.

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

/// What a power-limit sweep asks of NVML.
pub trait PowerLimits: Send {
    fn gpus(&self) -> Result<u32, Error>;
    /// `Ok(None)`: this GPU's limit cannot be read or set (NVML's `NotSupported`).
    fn range(&self, index: u32) -> Result<Option<LimitRange>, Error>;
    /// Sets the limit (`nvmlDeviceSetPowerManagementLimit`); a refusal says what it needs.
    fn set_limit_mw(&mut self, index: u32, mw: u32) -> Result<(), Error>;
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
}
