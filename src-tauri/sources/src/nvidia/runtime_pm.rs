//! Hybrid laptops: the NVIDIA display controllers on the PCI bus and whether every one is
//! runtime-suspended, so NVML is not touched (and the dGPU not woken) then.

use super::*;

/// What the PCI bus says about NVIDIA display controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvidiaRuntimePm {
    /// No NVIDIA display controller under `sys/bus/pci/devices` (or no sysfs): ask NVML.
    NoneFound,
    /// At least one is awake (or its runtime PM state is unknown).
    Awake,
    /// Every one is runtime-suspended; this many.
    AllSuspended(usize),
}

/// An NVIDIA display controller: vendor `0x10de`, PCI class `0x03xxxx` (VGA `0x0300`, 3D
/// controller `0x0302`). Audio functions of the same card (`0x0403`) do not count.
pub fn is_nvidia_display(vendor: &str, class: &str) -> bool {
    vendor.trim().eq_ignore_ascii_case(NVIDIA_VENDOR) && class.trim().starts_with("0x03")
}

/// The NVIDIA display controllers on the PCI bus, found once: a read looks only at their
/// `power/runtime_status` files, never at the whole bus again (one file per GPU, not a directory
/// walk and two files per PCI function every sample). A GPU added after the scan (an eGPU) is
/// not watched until the next start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvidiaFunctions {
    devices: Vec<PathBuf>,
}

impl NvidiaFunctions {
    /// Scans `root/sys/bus/pci/devices/*` for NVIDIA display controllers.
    pub fn scan(root: &Path) -> Self {
        let Ok(entries) = std::fs::read_dir(root.join(PCI_DEVICES)) else {
            return NvidiaFunctions::default();
        };
        let mut devices: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|dev| {
                let read = |f: &str| std::fs::read_to_string(dev.join(f)).unwrap_or_default();
                is_nvidia_display(&read("vendor"), &read("class"))
            })
            .collect();
        devices.sort();
        NvidiaFunctions { devices }
    }

    /// Their runtime power state now. An unreadable status counts as awake: only a GPU known to
    /// be asleep is left alone.
    pub fn runtime_pm(&self) -> NvidiaRuntimePm {
        let suspended = self
            .devices
            .iter()
            .filter(|dev| {
                std::fs::read_to_string(dev.join("power/runtime_status"))
                    .is_ok_and(|s| s.trim() == "suspended")
            })
            .count();
        match (suspended, self.devices.len() - suspended) {
            (0, 0) => NvidiaRuntimePm::NoneFound,
            (n, 0) => NvidiaRuntimePm::AllSuspended(n),
            _ => NvidiaRuntimePm::Awake,
        }
    }

    /// `Err(Unavailable(SUSPENDED_REASON))` when every one of them is runtime-suspended.
    pub fn check(&self) -> Result<(), Error> {
        match self.runtime_pm() {
            NvidiaRuntimePm::AllSuspended(_) => Err(Error::Unavailable(SUSPENDED_REASON.into())),
            NvidiaRuntimePm::NoneFound | NvidiaRuntimePm::Awake => Ok(()),
        }
    }
}

/// Scans `root/sys/bus/pci/devices/*` and says what the NVIDIA display controllers' runtime
/// power state is now ([`NvidiaFunctions::runtime_pm`]).
pub fn nvidia_runtime_pm(root: &Path) -> NvidiaRuntimePm {
    NvidiaFunctions::scan(root).runtime_pm()
}

/// `Err(Unavailable(SUSPENDED_REASON))` when every NVIDIA GPU is runtime-suspended.
pub fn check_runtime_pm(root: &Path) -> Result<(), Error> {
    NvidiaFunctions::scan(root).check()
}
