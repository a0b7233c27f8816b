//! What the GPUs were doing during a run: utilisation (mean, max) and memory used (peak), per
//! device, read through NVML beside the power sources.
//!
//! Rules:
//! - Read on a thread of its own at the run's interval (no faster than 200 ms: NVML's
//!   utilisation is itself an average over its last sample period).
//! - A runtime-suspended NVIDIA GPU is not woken to be asked (see `wattbar_sources::nvidia`).
//! - No NVML, no GPU, or a GPU that does not report a value: `null`, with the reason, never 0.

use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_engine::unix_now;
use wattbar_sources::nvidia::{self, Gpus, Memory, Utilisation};

const MIN_PERIOD: Duration = Duration::from_millis(200);

/// One reading of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    pub t: f64,
    pub index: u32,
    pub name: Option<String>,
    pub utilisation: Option<Utilisation>,
    pub memory: Option<Memory>,
}

/// One GPU over one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFigure {
    pub index: u32,
    pub name: Option<String>,
    pub utilisation_mean_percent: Option<f64>,
    pub utilisation_max_percent: Option<u32>,
    pub memory_used_peak_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub samples: usize,
}

/// Per GPU, the samples from `from` to `to`.
pub fn figures(samples: &[GpuSample], from: f64, to: f64) -> Vec<GpuFigure> {
    let mut out: Vec<GpuFigure> = Vec::new();
    let mut sums: Vec<(u64, usize)> = Vec::new();
    for s in samples.iter().filter(|s| s.t >= from && s.t <= to) {
        let i = match out.iter().position(|g| g.index == s.index) {
            Some(i) => i,
            None => {
                out.push(GpuFigure {
                    index: s.index,
                    name: s.name.clone(),
                    utilisation_mean_percent: None,
                    utilisation_max_percent: None,
                    memory_used_peak_bytes: None,
                    memory_total_bytes: None,
                    samples: 0,
                });
                sums.push((0, 0));
                out.len() - 1
            }
        };
        let g = &mut out[i];
        g.samples += 1;
        if let Some(u) = s.utilisation {
            sums[i].0 += u64::from(u.gpu_percent);
            sums[i].1 += 1;
            g.utilisation_max_percent = Some(
                g.utilisation_max_percent
                    .map_or(u.gpu_percent, |m| m.max(u.gpu_percent)),
            );
        }
        if let Some(m) = s.memory {
            g.memory_used_peak_bytes = Some(
                g.memory_used_peak_bytes
                    .map_or(m.used_bytes, |p| p.max(m.used_bytes)),
            );
            g.memory_total_bytes = Some(m.total_bytes);
        }
    }
    for (g, (sum, n)) in out.iter_mut().zip(sums) {
        g.utilisation_mean_percent = (n > 0).then(|| sum as f64 / n as f64);
    }
    out.sort_by_key(|g| g.index);
    out
}

/// Reads every GPU once.
pub fn read_all<G: Gpus + ?Sized>(gpus: &G, t: f64) -> Result<Vec<GpuSample>, String> {
    let count = gpus.count().map_err(|e| e.to_string())?;
    if count == 0 {
        return Err("NVML reports no NVIDIA GPU".into());
    }
    Ok((0..count)
        .map(|index| GpuSample {
            t,
            index,
            name: gpus.name(index).ok().flatten(),
            utilisation: gpus.utilisation(index).ok().flatten(),
            memory: gpus.memory(index).ok().flatten(),
        })
        .collect())
}

/// The watcher: samples kept for the whole run, or why there are none.
pub struct GpuWatch {
    samples: Arc<Mutex<Vec<GpuSample>>>,
    why_not: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
}

impl GpuWatch {
    pub fn start(interval: Duration, root: &Path) -> GpuWatch {
        let watch = GpuWatch {
            samples: Arc::default(),
            why_not: Arc::new(Mutex::new(Some("not read yet".into()))),
            stop: Arc::default(),
        };
        let (samples, why_not, stop) = (
            Arc::clone(&watch.samples),
            Arc::clone(&watch.why_not),
            Arc::clone(&watch.stop),
        );
        let root = root.to_path_buf();
        let period = interval.max(MIN_PERIOD);
        let spawned = std::thread::Builder::new()
            .name("wattbar-run-gpu".into())
            .spawn(move || {
                let set_why = |why: String| {
                    *why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                };
                let mut gpus = None;
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = nvidia::check_runtime_pm(&root) {
                        set_why(e.to_string());
                    } else {
                        if gpus.is_none() {
                            match nvidia::NvmlGpus::open() {
                                Ok(g) => gpus = Some(g),
                                Err(e) => {
                                    set_why(e.to_string());
                                    return;
                                }
                            }
                        }
                        if let Some(g) = &gpus {
                            match read_all(g, unix_now()) {
                                Ok(read) => {
                                    samples
                                        .lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .extend(read);
                                    *why_not.lock().unwrap_or_else(|e| e.into_inner()) = None;
                                }
                                Err(why) => set_why(why),
                            }
                        }
                    }
                    std::thread::sleep(period);
                }
            });
        if let Err(e) = spawned {
            *watch.why_not.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
        }
        watch
    }

    /// Per GPU over the window, or why nothing is known.
    pub fn figures(&self, from: f64, to: f64) -> (Vec<GpuFigure>, Option<String>) {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let figures = figures(&samples, from, to);
        let why = if figures.is_empty() {
            self.why_not
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .or_else(|| Some("no GPU sample fell inside the run".into()))
        } else {
            None
        };
        (figures, why)
    }
}

impl Drop for GpuWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, index: u32, util: Option<u32>, used_gib: Option<u64>) -> GpuSample {
        GpuSample {
            t,
            index,
            name: Some("NVIDIA H100 80GB HBM3".into()),
            utilisation: util.map(|u| Utilisation {
                gpu_percent: u,
                memory_percent: u / 2,
            }),
            memory: used_gib.map(|g| Memory {
                used_bytes: g << 30,
                total_bytes: 80 << 30,
            }),
        }
    }

    #[test]
    fn per_gpu_the_mean_and_max_utilisation_and_the_peak_memory_inside_the_run() {
        let samples = [
            sample(9.0, 0, Some(100), Some(79)), // before the run
            sample(10.0, 0, Some(20), Some(10)),
            sample(10.0, 1, None, Some(1)),
            sample(11.0, 0, Some(90), Some(40)),
            sample(11.0, 1, None, Some(2)),
            sample(12.0, 0, Some(70), Some(30)),
        ];
        let f = figures(&samples, 10.0, 12.0);
        assert_eq!(f.len(), 2);
        // GPU 0: (20 + 90 + 70) / 3 = 60 %, max 90 %, peak 40 GiB (79 GiB was before the run).
        assert_eq!(f[0].utilisation_mean_percent, Some(60.0));
        assert_eq!(f[0].utilisation_max_percent, Some(90));
        assert_eq!(f[0].memory_used_peak_bytes, Some(40 << 30));
        // GPU 1 reports no utilisation (MIG): absent, not 0 %.
        assert_eq!(f[1].utilisation_mean_percent, None);
        assert_eq!(f[1].utilisation_max_percent, None);
        assert_eq!(f[1].memory_used_peak_bytes, Some(2 << 30));
    }
}
