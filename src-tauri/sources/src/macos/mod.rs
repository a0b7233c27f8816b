//! macOS sources: parsers of ioreg, powermetrics, pmset, top and `macmon pipe` output (pure,
//! tested on real captures on any OS) and, on macOS only, the readers that run them.
//!
//! Sources, best first (see [`macos_sources`]):
//! - `macmon`: SMC `PSTR` system power plus the IOReport CPU/GPU/ANE/DRAM breakdown, no root;
//! - `smart-battery`: AppleSmartBattery through `ioreg -a -r -c AppleSmartBattery`;
//! - `powermetrics`: CPU/GPU/ANE energy, root only;
//! - `cpu-proxy`: CPU utilisation (in process, `sysinfo`) × the CPU power model, estimated.
//!
//! `top` output is still parsed (`wattbar-cli parse top`), but no `top` is run: in the steady
//! state no source starts a process. `pmset` gives state only (power source, charge, Low Power
//! Mode), never watts, so it is not a [`Source`](wattbar_core::Source): parse it with `pmset`.
//!
//! Readers that block for a sampling interval (`macmon`, `powermetrics`) run in a
//! [`Background`](crate::background::Background) worker thread, so that one tick of the chain never waits for them; the chain
//! gets the latest finished sample. A worker produces only as fast as it is read.

pub mod command;
pub mod ioreg;
pub mod macmon;
mod plist_xml;
pub mod pmset;
pub mod powermetrics;
#[cfg(target_os = "macos")]
pub mod procs;
pub mod rusage;
pub mod top;

/// The macOS sources, best first: macmon (SMC + IOReport), AppleSmartBattery, powermetrics
/// (root only), then the in-process CPU proxy.
#[cfg(target_os = "macos")]
pub fn macos_sources(model: crate::cpu_proxy::CpuPowerModel) -> Vec<Box<dyn wattbar_core::Source>> {
    vec![
        Box::new(macmon::MacmonSource::new(macmon::DEFAULT_INTERVAL)),
        Box::new(ioreg::SmartBatterySource::new()),
        Box::new(powermetrics::PowermetricsSource::new(
            powermetrics::DEFAULT_INTERVAL,
        )),
        Box::new(crate::cpu_proxy::CpuProxy::new(model)),
    ]
}
