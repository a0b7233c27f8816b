//! wattbar-sources: one module per power source.
//!
//! Each source reads bytes (a file under a root path, a system call) and hands them to a pure
//! `parse_*` function that tests exercise on real captures. Readers take `root: &Path` so tests
//! point them at fake sysfs trees.

pub mod cpu_proxy;
pub mod error;
pub mod linux;
pub mod macos;
pub mod nvidia;
pub mod ollama;
pub mod replay;
pub mod sample;

pub use cpu_proxy::{CpuPowerModel, CpuProxy};
pub use error::Error;
pub use replay::{ReplaySource, Trace};
pub use sample::Sample;

use std::path::Path;
use wattbar_core::Source;

/// The sources for this machine, best first; a CPU-utilisation estimate is the last resort
/// (/proc/stat on Linux, sysinfo elsewhere).
pub fn default_sources(root: &Path, configured_tdp_watts: Option<f64>) -> Vec<Box<dyn Source>> {
    let model = CpuPowerModel::detect(root, configured_tdp_watts);
    if cfg!(target_os = "linux") {
        linux::linux_sources(root, model)
    } else {
        vec![Box::new(CpuProxy::new(model))]
    }
}
