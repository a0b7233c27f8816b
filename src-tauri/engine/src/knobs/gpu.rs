//! An NVIDIA GPU's power limit and its graphics clock as a sweep's knobs, through NVML
//! ([`wattbar_sources::nvidia::PowerLimits`]).
//!
//! Rules:
//! - The first GPU NVML lists (index 0); a machine with more says so, and the others keep their
//!   settings.
//! - The power limit's values are watts as the sweep names them (`700W`; NVML takes milliwatts).
//!   Its steps: the GPU's default limit down to its minimum in four equal steps (700, 575, 450,
//!   325, 200 W on an H100), and the limit in force where it is none of those; most power first.
//!   A value outside the GPU's range is refused before NVML is asked.
//! - The clock's values are `unlocked` (the driver's own boost) and a frequency the graphics
//!   clock is locked to (`1410MHz`, its minimum and maximum both). Its steps: unlocked, then the
//!   supported clocks nearest at or below 85 %, 70 % and 55 % of the highest. NVML cannot read a
//!   lock in force, so a clock sweep starts from `unlocked` and ends unlocked: a lock set before
//!   it (`nvidia-smi -lgc`) is not restored, and the sweep's start says so.
//! - Setting either needs root (NVML's `NoPermission`, as `nvidia-smi -pl` and `-lgc`): each
//!   knob sets itself to where it is at opening (the limit in force; unlocked), so a process that
//!   may not is refused before any change.

use crate::error::Error;
use std::sync::Mutex;
use wattbar_sources::nvidia::{LimitRange, PowerLimits};

/// NVML itself, loaded.
fn nvml() -> Result<Box<dyn PowerLimits>, Error> {
    Ok(Box::new(
        wattbar_sources::nvidia::NvmlGpus::open().map_err(said)?,
    ))
}

/// NVML's GPU 0, where there is one; a machine with more GPUs is told the others keep theirs.
fn first_gpu(nvml: &dyn PowerLimits) -> Result<(), Error> {
    let gpus = nvml.gpus().map_err(said)?;
    if gpus == 0 {
        return Err(said("NVML lists no GPU"));
    }
    if gpus > 1 {
        tracing::warn!("{gpus} GPUs: the sweep sets GPU 0 only; the others keep their settings");
    }
    Ok(())
}

/// GPU 0's power limit, reachable.
pub struct GpuLimit {
    nvml: Mutex<Box<dyn PowerLimits>>,
    range: LimitRange,
}

fn said(e: impl std::fmt::Display) -> Error {
    Error::Setting(e.to_string())
}

fn watts_of(mw: u32) -> String {
    super::values::named(f64::from(mw) / 1000.0, "W")
}

fn mw_of(value: &str, range: &LimitRange) -> Result<u32, Error> {
    let w = super::values::number_named(value, "W")
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
        GpuLimit::over(nvml()?)
    }

    /// GPU 0 through `nvml`: its range read, and its limit set to itself, so a process that may
    /// not set it is told now, before any change.
    pub fn over(mut nvml: Box<dyn PowerLimits>) -> Result<GpuLimit, Error> {
        first_gpu(nvml.as_ref())?;
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

/// The clock's value where nothing is locked.
pub const UNLOCKED: &str = "unlocked";

/// The supported clocks nearest at or below 85 %, 70 % and 55 % of the highest, after
/// `unlocked`.
fn clock_steps(supported_mhz: &[u32]) -> Vec<String> {
    let top = supported_mhz.iter().copied().max().unwrap_or(0);
    let mut locks: Vec<u32> = [85, 70, 55]
        .iter()
        .filter_map(|pct| {
            let target = top * pct / 100;
            supported_mhz.iter().copied().filter(|c| *c <= target).max()
        })
        .collect();
    locks.sort_unstable_by(|a, b| b.cmp(a));
    locks.dedup();
    std::iter::once(UNLOCKED.to_string())
        .chain(
            locks
                .into_iter()
                .map(|m| super::values::named(f64::from(m), "MHz")),
        )
        .collect()
}

/// GPU 0's graphics clock, reachable: unlocked, or locked to one frequency.
pub struct GpuClock {
    nvml: Mutex<Box<dyn PowerLimits>>,
    supported_mhz: Vec<u32>,
    /// What this knob last set; NVML cannot read it back.
    now: Mutex<String>,
}

impl GpuClock {
    /// GPU 0 through NVML itself.
    pub fn open() -> Result<GpuClock, Error> {
        GpuClock::over(nvml()?)
    }

    /// GPU 0 through `nvml`: its clocks read, and unlocked, so a process that may not lock
    /// them is told now, before any change.
    pub fn over(mut nvml: Box<dyn PowerLimits>) -> Result<GpuClock, Error> {
        first_gpu(nvml.as_ref())?;
        let supported_mhz = nvml
            .graphics_clocks_mhz(0)
            .map_err(said)?
            .ok_or_else(|| said("GPU 0 lists no graphics clock it may be locked to"))?;
        nvml.lock_graphics_clock_mhz(0, None).map_err(said)?;
        tracing::warn!(
            "NVML cannot read a clock lock in force: the sweep starts from unlocked and ends unlocked"
        );
        Ok(GpuClock {
            nvml: Mutex::new(nvml),
            supported_mhz,
            now: Mutex::new(UNLOCKED.to_string()),
        })
    }

    pub fn current(&self) -> Result<String, Error> {
        Ok(self.now.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    pub fn steps(&self) -> Result<Vec<String>, Error> {
        Ok(clock_steps(&self.supported_mhz))
    }

    pub fn set(&self, value: &str) -> Result<(), Error> {
        let mhz = if value == UNLOCKED {
            None
        } else {
            let mhz = super::values::number_named(value, "MHz")
                .filter(|m| m.fract() == 0.0 && self.supported_mhz.contains(&(*m as u32)))
                .ok_or_else(|| {
                    said(format!(
                        "{value:?} is not unlocked nor a clock GPU 0 supports (such as {})",
                        clock_steps(&self.supported_mhz)
                            .last()
                            .map_or("1410MHz", |s| s)
                    ))
                })?;
            Some(mhz as u32)
        };
        self.nvml
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lock_graphics_clock_mhz(0, mhz)
            .map_err(said)?;
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = value.to_string();
        Ok(())
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
        /// Each lock asked for (`None`: unlock).
        locks: std::sync::Arc<Mutex<Vec<Option<u32>>>>,
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
        /// An H100 SXM's graphics clocks run from 1,980 MHz down in 15 MHz steps to 345 MHz
        /// (NVIDIA's `nvidia-smi -q -d SUPPORTED_CLOCKS` lists them so).
        fn graphics_clocks_mhz(
            &self,
            _index: u32,
        ) -> Result<Option<Vec<u32>>, wattbar_sources::Error> {
            Ok(Some((0..=109).map(|k| 1980 - 15 * k).collect()))
        }
        fn lock_graphics_clock_mhz(
            &mut self,
            index: u32,
            mhz: Option<u32>,
        ) -> Result<(), wattbar_sources::Error> {
            if self.refuse {
                return Err(wattbar_sources::Error::Unavailable(format!(
                    "NVML refused to lock GPU {index}'s clocks: it needs root"
                )));
            }
            self.locks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(mhz);
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
            locks: Default::default(),
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
            locks: Default::default(),
        }))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("needs root"), "{e}");
    }

    #[test]
    fn the_clock_is_locked_at_85_70_and_55_percent_of_its_highest_and_unlocked_after() {
        let locks = std::sync::Arc::new(Mutex::new(Vec::new()));
        let gpu = GpuClock::over(Box::new(Answers {
            range: h100(),
            refuse: false,
            sets: Default::default(),
            locks: locks.clone(),
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        // 85 % of 1,980 is 1,683: 1,680 is the clock at or below it; 70 %: 1,386 → 1,380;
        // 55 %: 1,089 → 1,080.
        let steps = gpu.steps().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(steps, ["unlocked", "1680MHz", "1380MHz", "1080MHz"]);
        for s in &steps {
            gpu.set(s).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(gpu.current().ok().as_deref(), Some(s.as_str()));
        }
        gpu.set(UNLOCKED).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            *locks.lock().unwrap_or_else(|e| e.into_inner()),
            [None, None, Some(1680), Some(1380), Some(1080), None]
        );
        // A clock the GPU does not list is refused before NVML is asked.
        assert!(gpu.set("1681MHz").is_err());
        assert!(gpu.set("fast").is_err());
        assert_eq!(locks.lock().unwrap_or_else(|e| e.into_inner()).len(), 6);
    }
}
