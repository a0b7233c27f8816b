//! An NVIDIA GPU's power limit as a sweep's knob, through NVML
//! ([`wattbar_sources::nvidia::PowerLimits`]).
//!
//! Rules:
//! - The first GPU NVML lists (index 0); a machine with more says so, and the others keep their
//!   limits.
//! - Values are watts as the sweep names them (`700W`); NVML takes milliwatts.
//! - The steps: the GPU's default limit down to its minimum in four equal steps (700, 575, 450,
//!   325, 200 W on an H100), and the limit in force where it is none of those; most power first.
//! - A value outside the GPU's range is refused before NVML is asked. Setting a limit needs root
//!   (NVML's `NoPermission`, as `nvidia-smi -pl`): said, before any change, since the limit in
//!   force is set back to itself first.

use crate::error::Error;
use std::sync::Mutex;
use wattbar_sources::nvidia::{LimitRange, PowerLimits};

/// GPU 0's power limit, reachable.
pub struct GpuLimit {
    nvml: Mutex<Box<dyn PowerLimits>>,
    range: LimitRange,
}

impl std::fmt::Debug for GpuLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuLimit")
            .field("range", &self.range)
            .finish()
    }
}

fn said(e: impl std::fmt::Display) -> Error {
    Error::Setting(e.to_string())
}

/// Watts as the sweep names them.
fn watts_of(mw: u32) -> String {
    let text = format!("{:.3}", f64::from(mw) / 1000.0);
    format!("{}W", text.trim_end_matches('0').trim_end_matches('.'))
}

fn mw_of(value: &str, range: &LimitRange) -> Result<u32, Error> {
    let w: f64 = value
        .strip_suffix('W')
        .and_then(|n| n.parse().ok())
        .filter(|w: &f64| w.is_finite() && *w > 0.0)
        .ok_or_else(|| said(format!("{value:?} is not a power limit such as 300W")))?;
    let mw = (w * 1000.0).round();
    if mw < f64::from(range.min_mw) || mw > f64::from(range.max_mw) {
        return Err(said(format!(
            "{value} is outside GPU 0's range, {} to {}",
            watts_of(range.min_mw),
            watts_of(range.max_mw)
        )));
    }
    Ok(mw as u32)
}

/// The default down to the minimum in four equal steps, and the limit in force.
fn steps_of(range: &LimitRange) -> Vec<String> {
    let (top, bottom) = (range.default_mw, range.min_mw.min(range.default_mw));
    let mut mws: Vec<u32> = (0..=4).map(|k| top - (top - bottom) / 4 * k).collect();
    mws[4] = bottom;
    mws.push(range.limit_mw);
    mws.sort_unstable_by(|a, b| b.cmp(a));
    mws.dedup();
    mws.into_iter().map(watts_of).collect()
}

impl GpuLimit {
    /// GPU 0 through NVML itself.
    pub fn open() -> Result<GpuLimit, Error> {
        let nvml = wattbar_sources::nvidia::NvmlGpus::open().map_err(said)?;
        GpuLimit::over(Box::new(nvml))
    }

    /// GPU 0 through `nvml`: its range read, and its limit set to itself, so a process that may
    /// not set it is told now, before any change.
    pub fn over(mut nvml: Box<dyn PowerLimits>) -> Result<GpuLimit, Error> {
        let gpus = nvml.gpus().map_err(said)?;
        if gpus == 0 {
            return Err(said("NVML lists no GPU"));
        }
        if gpus > 1 {
            tracing::warn!("{gpus} GPUs: the sweep sets GPU 0's power limit only");
        }
        let range = nvml
            .range(0)
            .map_err(said)?
            .ok_or_else(|| said("GPU 0 has no power limit NVML can read or set"))?;
        nvml.set_limit_mw(0, range.limit_mw).map_err(said)?;
        Ok(GpuLimit {
            nvml: Mutex::new(nvml),
            range,
        })
    }

    fn read(&self) -> Result<LimitRange, Error> {
        let nvml = self.nvml.lock().unwrap_or_else(|e| e.into_inner());
        nvml.range(0)
            .map_err(said)?
            .ok_or_else(|| said("GPU 0's power limit can no longer be read"))
    }

    pub fn current(&self) -> Result<String, Error> {
        self.read().map(|r| watts_of(r.limit_mw))
    }

    pub fn steps(&self) -> Result<Vec<String>, Error> {
        Ok(steps_of(&self.read()?))
    }

    pub fn set(&self, value: &str) -> Result<(), Error> {
        let mw = mw_of(value, &self.range)?;
        self.nvml
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_limit_mw(0, mw)
            .map_err(said)?;
        let now = self.read()?.limit_mw;
        if now == mw {
            Ok(())
        } else {
            Err(said(format!(
                "GPU 0 was given {value} and kept {}",
                watts_of(now)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_sources::nvidia::parse_query_gpu_csv;

    /// NVML's answers for one GPU: its range as a captured `nvidia-smi` run read it, the limit
    /// following each set, and every call kept.
    struct Answers {
        range: LimitRange,
        refuse: bool,
        sets: std::sync::Arc<Mutex<Vec<u32>>>,
    }

    impl PowerLimits for Answers {
        fn gpus(&self) -> Result<u32, wattbar_sources::Error> {
            Ok(1)
        }
        fn range(&self, _index: u32) -> Result<Option<LimitRange>, wattbar_sources::Error> {
            Ok(Some(self.range))
        }
        fn set_limit_mw(&mut self, index: u32, mw: u32) -> Result<(), wattbar_sources::Error> {
            if self.refuse {
                return Err(wattbar_sources::Error::Unavailable(format!(
                    "NVML refused to set GPU {index}'s power limit: it needs root (as \
                     `nvidia-smi -pl` does)"
                )));
            }
            self.sets.lock().unwrap_or_else(|e| e.into_inner()).push(mw);
            self.range.limit_mw = mw;
            Ok(())
        }
    }

    /// The H100 80GB HBM3 capture (driver 590.48.01): limit 700 W, default 700 W, 200–700 W.
    fn h100() -> LimitRange {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/fixtures/nvidia-smi/nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv",
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
        let rows = parse_query_gpu_csv(&text).unwrap_or_else(|e| panic!("{e}"));
        let mw = |column: &str| {
            (rows[0]
                .number(column)
                .unwrap_or_else(|| panic!("no {column}"))
                * 1000.0)
                .round() as u32
        };
        LimitRange {
            limit_mw: mw("power.limit"),
            default_mw: mw("power.default_limit"),
            min_mw: mw("power.min_limit"),
            max_mw: mw("power.max_limit"),
        }
    }

    #[test]
    fn an_h100_is_swept_from_its_default_to_its_minimum_and_each_set_is_nvmls() {
        let range = h100();
        assert_eq!(
            (range.limit_mw, range.default_mw, range.min_mw, range.max_mw),
            (700_000, 700_000, 200_000, 700_000)
        );
        let sets = std::sync::Arc::new(Mutex::new(Vec::new()));
        let gpu = GpuLimit::over(Box::new(Answers {
            range,
            refuse: false,
            sets: sets.clone(),
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(gpu.current().ok().as_deref(), Some("700W"));
        let steps = gpu.steps().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(steps, ["700W", "575W", "450W", "325W", "200W"]);
        for s in &steps {
            gpu.set(s).unwrap_or_else(|e| panic!("{e}"));
        }
        gpu.set("700W").unwrap_or_else(|e| panic!("{e}"));
        // The probe at opening (the limit set to itself), each step, then back.
        assert_eq!(
            *sets.lock().unwrap_or_else(|e| e.into_inner()),
            [700_000, 700_000, 575_000, 450_000, 325_000, 200_000, 700_000]
        );
        // Outside the range, or not a limit: refused before NVML is asked.
        assert!(gpu
            .set("150W")
            .is_err_and(|e| e.to_string().contains("200W to 700W")));
        assert!(gpu.set("fast").is_err());
        assert_eq!(sets.lock().unwrap_or_else(|e| e.into_inner()).len(), 7);
    }

    #[test]
    fn without_root_the_sweep_is_refused_before_any_change() {
        let e = GpuLimit::over(Box::new(Answers {
            range: h100(),
            refuse: true,
            sets: Default::default(),
        }))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("needs root"), "{e}");
    }
}
