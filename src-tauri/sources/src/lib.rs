//! wattbar-sources: one module per power source.
//!
//! Each source reads bytes (a file under a root path, a system call) and hands them to a pure
//! `parse_*` function that tests exercise on real captures. Readers take `root: &Path` so tests
//! point them at fake sysfs trees.

pub mod background;
pub mod capped;
pub mod cpu_proxy;
pub mod error;
pub mod linux;
pub mod macos;
pub mod nvidia;
pub mod ollama;
pub mod plugs;
pub mod prices;
pub mod processes;
pub mod replay;
pub mod resolver;
pub mod sample;
pub mod server_metrics;
pub mod tool;

pub use cpu_proxy::{CpuPowerModel, CpuProxy};
pub use error::Error;
pub use replay::{ReplaySource, Trace};
pub use sample::Sample;

use std::path::Path;
use wattbar_core::{Quality, Source};

/// The sources for this machine, best first; a CPU-utilisation estimate is the last resort
/// (/proc/stat on Linux, sysinfo elsewhere).
pub fn default_sources(root: &Path, configured_tdp_watts: Option<f64>) -> Vec<Box<dyn Source>> {
    let model = CpuPowerModel::detect(root, configured_tdp_watts);
    let mut sources: Vec<Box<dyn Source>> = Vec::new();
    match nvidia::NvmlSource::new(root) {
        Ok(nvml) => sources.push(Box::new(nvml)),
        Err(e) => sources.push(Box::new(Absent::new(
            nvidia::SOURCE_ID,
            Quality::Measured,
            e,
        ))),
    }
    #[cfg(target_os = "macos")]
    sources.extend(macos::macos_sources(model));
    if cfg!(target_os = "linux") {
        sources.extend(linux::linux_sources(root, model));
    } else if cfg!(not(target_os = "macos")) {
        sources.push(Box::new(CpuProxy::new(model)));
    }
    sources.push(Box::new(ollama::OllamaHeuristic::default()));
    sources
}

/// A source that could not even be set up: it stays in the chain so that its reason is shown.
pub struct Absent {
    id: &'static str,
    quality: Quality,
    reason: String,
}

impl Absent {
    pub fn new(id: &'static str, quality: Quality, why: Error) -> Self {
        let reason = match why {
            Error::Unavailable(r) | Error::Transient(r) => r,
            other => other.to_string(),
        };
        Absent {
            id,
            quality,
            reason,
        }
    }
}

impl Source for Absent {
    fn id(&self) -> &str {
        self.id
    }
    fn quality(&self) -> Quality {
        self.quality
    }
    fn read(
        &mut self,
        _at: wattbar_core::Stamp,
    ) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        Err(wattbar_core::Error::Unavailable(self.reason.clone()))
    }
}
