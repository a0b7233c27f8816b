//! NVIDIA GPUs through NVML (`libnvidia-ml.so.1`, loaded at run time by `nvml-wrapper`).
//!
//! Source id `nvml`, domain `gpu`, device = the GPU's NVML index as a string, quality `measured`.
//!
//! Per GPU, which value wins:
//! 1. the total energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ since the driver
//!    loaded, Volta and newer): watts = Δenergy / Δt over the engine's monotonic [`Stamp`]s.
//!    A counter that goes down means the driver reloaded: the new value is the new baseline and
//!    nothing is added for that interval. An interval shorter than
//!    [`NvmlSource::min_sampling_interval`] is not used (the counter may not have moved yet, which
//!    would read as a false 0 W); the baseline is kept for the next read. An interval of fewer
//!    than four counter updates takes its watts from NVML's instant power field where the
//!    driver has one: over so few ticks, one tick more or less reads as 0 W, then twice the
//!    draw, at a steady load (seen on an H100 sampled every 100 ms beside a 97.5 ms update).
//!    The energy is the counter's all the same.
//! 2. otherwise (no counter, first read, after a reload, too short an interval) the power
//!    reading (`nvmlDeviceGetPowerUsage`, mW; a one-second average on Ampere and newer).
//! 3. neither: the reading has `watts: None`. Absent is not zero.
//!
//! On a GPU with the counter, each reading's `energy_counter` is the energy this source has
//! counted for that GPU since it started, so it stays monotonic across driver reloads; without
//! one it is `None`.
//!
//! The enforced power limit, utilisation and memory use go into [`GpuState`] (and into
//! `Sample::state["gpus"]`). A value the GPU does not support (utilisation in MIG mode) is left
//! out, never 0. So do NVML's own power fields where the driver has them ([`PowerFields`]: the
//! instant draw and the one-second average, R535 and newer), kept apart: neither is added to
//! the reading's watts nor to each other, so nothing is counted twice. NVML's memory power is a
//! field of the memory *scope*, which `nvml-wrapper`'s `field_values_for` cannot ask for (it
//! sends scope 0, the GPU); reading it would take unsafe FFI, so it is not read.
//!
//! Pitfalls:
//! - No library or no driver: [`Error::Unavailable`] with NVML's reason.
//! - Hybrid laptops: opening NVML, or any query, wakes a runtime-suspended dGPU and keeps it
//!   awake, which costs more battery than the reading is worth. The source finds the NVIDIA
//!   display controllers (vendor `0x10de`, class `0x03xxxx`) under `root/sys/bus/pci/devices/*`
//!   once, when it is made ([`NvidiaFunctions`]); before every read it looks at their
//!   `power/runtime_status` alone: when every one is `suspended`, NVML is not touched.
//!   [`check_runtime_pm`] then says `Unavailable`; [`Source::read`] reports the same reason as
//!   `Transient`, because the chain never asks an unavailable source again and the GPU will wake.
//! - NVML counters update only every 20–100 ms depending on the GPU. As Zeus does
//!   (`infer_gpu_counter_update_period`), the source polls the counter as fast as it can when it
//!   opens, takes the shortest time between changes as the update period
//!   ([`infer_counter_update_period`]) and asks to be sampled no faster than half of it
//!   ([`NvmlSource::min_sampling_interval`]).
//!
//! [`parse_query_gpu_csv`] reads `nvidia-smi --query-gpu … --format=csv` output. NVML itself
//! needs no parser; the CSV captures feed a fake [`Gpus`] in the tests, and it is the parser a
//! future `nvidia-smi` fallback would use.

use crate::error::Error;
use crate::sample::Sample;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "nvml";

mod processes;
pub use processes::ProcessSample;

/// Above this an energy-counter interval is a glitch, not a GPU (a GB200 module peaks at 2.7 kW).
pub const MAX_GPU_WATTS: f64 = 3_000.0;

/// An interval must span this many counter updates for its watts to be the counter's mean.
const COUNTER_UPDATES_FOR_WATTS: u32 = 4;

/// Update period assumed when it cannot be measured; Zeus's fallback too.
pub const DEFAULT_COUNTER_UPDATE_PERIOD: Duration = Duration::from_millis(100);

/// How many times the counter is polled to infer its update period, as Zeus does.
pub const PERIOD_PROBE_SAMPLES: usize = 1000;
/// Polling gives up after this long, so a slow driver cannot stall start-up.
pub const PERIOD_PROBE_MAX: Duration = Duration::from_secs(1);
/// The first samples are dropped: the first calls are slow (warm-up), as Zeus found.
pub const PERIOD_PROBE_WARMUP: usize = 10;

pub const SUSPENDED_REASON: &str = "the NVIDIA GPU is suspended; not waking it";

const NVIDIA_VENDOR: &str = "0x10de";
const PCI_DEVICES: &str = "sys/bus/pci/devices";

/// Share of time busy over NVML's last sample period, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utilisation {
    pub gpu_percent: u32,
    pub memory_percent: u32,
}

/// Frame-buffer memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub used_bytes: u64,
    pub total_bytes: u64,
}

/// NVML's own readings of the GPU's power, kept apart and never added to each other or to the
/// power this source reports (field values `POWER_INSTANT` and `POWER_AVERAGE` at GPU scope,
/// drivers R535 and newer): the draw now and its one-second average, mW. `None`: not supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PowerFields {
    pub instant_mw: Option<u32>,
    pub average_mw: Option<u32>,
}

/// The part of NVML this source uses, so the logic can be tested without a GPU.
///
/// `Ok(None)` means "this GPU does not support that query" (NVML's `NotSupported`): absent,
/// not zero. `Err` is a failure: `Unavailable` when NVML itself is gone, `Transient` otherwise.
pub trait Gpus: Send {
    fn count(&self) -> Result<u32, Error>;
    fn name(&self, index: u32) -> Result<Option<String>, Error>;
    /// Energy since the driver loaded, mJ.
    fn total_energy_mj(&self, index: u32) -> Result<Option<u64>, Error>;
    fn power_mw(&self, index: u32) -> Result<Option<u32>, Error>;
    fn enforced_limit_mw(&self, index: u32) -> Result<Option<u32>, Error>;
    fn utilisation(&self, index: u32) -> Result<Option<Utilisation>, Error>;
    fn memory(&self, index: u32) -> Result<Option<Memory>, Error>;
    fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error>;
    /// The instant and average power fields; none by default (a GPU or driver without them).
    fn power_fields(&self, _index: u32) -> Result<PowerFields, Error> {
        Ok(PowerFields::default())
    }
    /// Each process's utilisation samples newer than `since_us` (0: all the driver holds);
    /// `Ok(None)`: this GPU cannot tell (none by default).
    fn process_samples(
        &self,
        _index: u32,
        _since_us: u64,
    ) -> Result<Option<Vec<ProcessSample>>, Error> {
        Ok(None)
    }
}

/// Which NVML value gave a GPU's watts this read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerFrom {
    EnergyCounter,
    /// NVML's instant power field, over intervals too short for the counter's mean.
    Instant,
    PowerUsage,
}

impl PowerFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerFrom::EnergyCounter => "energy-counter",
            PowerFrom::Instant => "instant",
            PowerFrom::PowerUsage => "power-usage",
        }
    }
}

/// What one read found out about one GPU besides its power. `None` = not supported or failed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuState {
    pub index: u32,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub watts: Option<Watts>,
    pub power_from: Option<PowerFrom>,
    pub enforced_power_limit: Option<Watts>,
    pub utilisation: Option<Utilisation>,
    pub memory: Option<Memory>,
    /// NVML's instant and one-second-average power, apart from `watts`.
    pub power_instant: Option<Watts>,
    pub power_average: Option<Watts>,
    /// Why the power could not be read this time, if it could not.
    pub error: Option<String>,
}

impl GpuState {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("index".into(), json!(self.index));
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("name", self.name.clone().map(Value::from));
        put("pci_bus_id", self.pci_bus_id.clone().map(Value::from));
        put("watts", self.watts.map(|w| json!(w.0)));
        put("power_from", self.power_from.map(|p| json!(p.as_str())));
        put(
            "power_instant_watts",
            self.power_instant.map(|w| json!(w.0)),
        );
        put(
            "power_average_watts",
            self.power_average.map(|w| json!(w.0)),
        );
        put(
            "enforced_power_limit_watts",
            self.enforced_power_limit.map(|w| json!(w.0)),
        );
        put(
            "utilisation_gpu_percent",
            self.utilisation.map(|u| json!(u.gpu_percent)),
        );
        put(
            "utilisation_memory_percent",
            self.utilisation.map(|u| json!(u.memory_percent)),
        );
        put(
            "memory_used_bytes",
            self.memory.map(|x| json!(x.used_bytes)),
        );
        put(
            "memory_total_bytes",
            self.memory.map(|x| json!(x.total_bytes)),
        );
        put("error", self.error.clone().map(Value::from));
        Value::Object(m)
    }
}

/// Turns a hardware energy counter (mJ, reset on driver reload) into watts and a monotonic total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergyCounter {
    baseline: Option<(Duration, u64)>,
    total: Joules,
}

impl EnergyCounter {
    /// Takes a counter value read at `at`. Returns the mean power since the baseline when the
    /// interval is usable (at least `min_interval` long, the counter did not go down, the result
    /// is plausible); otherwise `None` and nothing is added to [`EnergyCounter::total`].
    pub fn update(&mut self, at: Duration, mj: u64, min_interval: Duration) -> Option<Watts> {
        let Some((t0, e0)) = self.baseline else {
            self.baseline = Some((at, mj));
            return None;
        };
        if mj < e0 {
            // The driver reloaded and the counter restarted from 0: a new baseline.
            self.baseline = Some((at, mj));
            return None;
        }
        let dt = at.saturating_sub(t0);
        if dt.is_zero() || dt < min_interval {
            // Too soon: the counter may not have ticked yet. Keep the old baseline.
            return None;
        }
        let energy = Joules::from_millijoules((mj - e0) as f64);
        let watts = Watts(energy.0 / dt.as_secs_f64());
        self.baseline = Some((at, mj));
        if !watts.is_plausible() || watts.0 > MAX_GPU_WATTS {
            return None;
        }
        self.total += energy;
        Some(watts)
    }

    /// Energy counted over usable intervals since the first value.
    pub fn total(&self) -> Joules {
        self.total
    }

    /// How long ago (at `at`) the interval the next update measures began.
    pub fn since(&self, at: Duration) -> Option<Duration> {
        self.baseline.map(|(t0, _)| at.saturating_sub(t0))
    }

    /// True once a counter value has been seen: the GPU has an energy counter.
    pub fn has_started(&self) -> bool {
        self.baseline.is_some()
    }
}

/// Zeus's `infer_gpu_counter_update_period` over `(time, counter value)` samples taken as fast
/// as possible: drop the first [`PERIOD_PROBE_WARMUP`] samples, note the times at which the value
/// changed, and take the shortest time between two changes. `None` when the counter changed
/// fewer than twice (then use [`DEFAULT_COUNTER_UPDATE_PERIOD`]).
pub fn infer_counter_update_period(samples: &[(Duration, u64)]) -> Option<Duration> {
    let samples = samples.get(PERIOD_PROBE_WARMUP..)?;
    let (_, mut prev) = *samples.first()?;
    let mut changed_at = Vec::new();
    for &(t, v) in samples {
        if v != prev {
            changed_at.push(t);
            prev = v;
        }
    }
    changed_at
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .filter(|d| !d.is_zero())
        .min()
}

/// Polls GPU `index`'s energy counter (or, without one, its power reading) as fast as possible,
/// up to [`PERIOD_PROBE_SAMPLES`] times or [`PERIOD_PROBE_MAX`], with `now` as the clock.
pub fn probe_counter<G: Gpus + ?Sized>(
    gpus: &G,
    index: u32,
    now: &mut dyn FnMut() -> Duration,
) -> Vec<(Duration, u64)> {
    let use_energy = matches!(gpus.total_energy_mj(index), Ok(Some(_)));
    let start = now();
    let mut samples = Vec::with_capacity(PERIOD_PROBE_SAMPLES);
    while samples.len() < PERIOD_PROBE_SAMPLES {
        let value = if use_energy {
            gpus.total_energy_mj(index)
        } else {
            gpus.power_mw(index).map(|p| p.map(u64::from))
        };
        let t = now();
        match value {
            Ok(Some(v)) => samples.push((t, v)),
            _ => break,
        }
        if t.saturating_sub(start) >= PERIOD_PROBE_MAX {
            break;
        }
    }
    samples
}

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

/// What does not change while NVML is open, asked once per GPU: its name and PCI bus id. `None`
/// while not yet known (a failed query is asked again at the next read).
#[derive(Debug, Clone, Default)]
struct Fixed {
    name: Option<Option<String>>,
    pci_bus_id: Option<Option<String>>,
}

impl Fixed {
    fn fill<G: Gpus + ?Sized>(&mut self, gpus: &G, i: u32) {
        if self.name.is_none() {
            self.name = gpus.name(i).ok();
        }
        if self.pci_bus_id.is_none() {
            self.pci_bus_id = gpus.pci_bus_id(i).ok();
        }
    }
}

type Opener<G> = Box<dyn FnMut() -> Result<G, Error> + Send>;

/// The NVML source over any [`Gpus`]: [`NvmlGpus`] in the app, a fake in tests.
pub struct NvmlSource<G: Gpus> {
    pci: NvidiaFunctions,
    gpus: Option<G>,
    /// One per GPU, from NVML's device count asked once after it opened.
    fixed: Option<Vec<Fixed>>,
    opener: Option<Opener<G>>,
    counters: BTreeMap<u32, EnergyCounter>,
    update_period: Duration,
    state: Vec<GpuState>,
    /// Per GPU, the newest per-process sample seen ([`Source::process_use`]).
    process_seen: BTreeMap<u32, u64>,
}

impl<G: Gpus> NvmlSource<G> {
    /// A source over GPUs that are already open. `root` is where the runtime-PM check looks.
    pub fn from_gpus(root: &Path, gpus: G) -> Self {
        Self::build(NvidiaFunctions::scan(root), Some(gpus), None)
    }

    /// A source that opens its GPUs with `opener` at the first read that finds them awake.
    pub fn lazy(root: &Path, opener: impl FnMut() -> Result<G, Error> + Send + 'static) -> Self {
        Self::build(NvidiaFunctions::scan(root), None, Some(Box::new(opener)))
    }

    fn build(pci: NvidiaFunctions, gpus: Option<G>, opener: Option<Opener<G>>) -> Self {
        NvmlSource {
            pci,
            gpus,
            fixed: None,
            opener,
            counters: BTreeMap::new(),
            update_period: DEFAULT_COUNTER_UPDATE_PERIOD,
            state: Vec::new(),
            process_seen: BTreeMap::new(),
        }
    }

    /// The counter update period in use (measured, or [`DEFAULT_COUNTER_UPDATE_PERIOD`]).
    pub fn counter_update_period(&self) -> Duration {
        self.update_period
    }

    pub fn set_counter_update_period(&mut self, period: Duration) {
        self.update_period = period;
    }

    /// Sample no faster than this: half the counter update period, so that every interval
    /// sees the counter tick at least once.
    pub fn min_sampling_interval(&self) -> Duration {
        self.update_period / 2
    }

    /// Measures the update period on each distinct GPU model and keeps the shortest, as Zeus
    /// does. `now` is the clock (the app passes a monotonic one; tests a fake).
    pub fn measure_counter_update_period(&mut self, now: &mut dyn FnMut() -> Duration) {
        let Some(gpus) = &self.gpus else { return };
        let count = gpus.count().unwrap_or(0);
        let mut seen: Vec<Option<String>> = Vec::new();
        let mut best: Option<Duration> = None;
        for i in 0..count {
            let name = gpus.name(i).ok().flatten();
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            if let Some(p) = infer_counter_update_period(&probe_counter(gpus, i, now)) {
                best = Some(best.map_or(p, |b| b.min(p)));
            }
        }
        self.update_period = best.unwrap_or(DEFAULT_COUNTER_UPDATE_PERIOD);
    }

    /// What the last read found per GPU.
    pub fn state(&self) -> &[GpuState] {
        &self.state
    }

    /// Opens the GPUs with the opener if that has not happened yet, and returns them.
    fn open(&mut self) -> Result<&G, Error> {
        if self.gpus.is_none() {
            if let Some(opener) = self.opener.as_mut() {
                self.gpus = Some(opener()?);
            }
        }
        self.gpus
            .as_ref()
            .ok_or_else(|| Error::Unavailable("NVML was never opened".into()))
    }

    /// One read: a `gpu` reading per GPU and the per-GPU state (see the module docs). Per GPU it
    /// asks NVML for what changes (energy, power fields, limit, utilisation, memory; the power
    /// reading only where the energy gives no watts); the count, names and bus ids only once.
    pub fn sample(&mut self, at: Stamp) -> Result<Sample, Error> {
        self.pci.check()?;
        let min_interval = self.min_sampling_interval();
        if self.fixed.is_none() {
            let count = self.open()?.count()?;
            if count == 0 {
                return Err(Error::Unavailable("NVML reports no NVIDIA GPU".into()));
            }
            self.fixed = Some(vec![Fixed::default(); count as usize]);
        }
        let (Some(gpus), Some(fixed)) = (self.gpus.as_ref(), self.fixed.as_mut()) else {
            return Err(Error::Unavailable("NVML was never opened".into()));
        };
        let mut readings = Vec::new();
        let mut states = Vec::new();
        let mut first_error = None;
        for (i, fixed) in (0u32..).zip(fixed.iter_mut()) {
            fixed.fill(gpus, i);
            let counter = self.counters.entry(i).or_default();
            let gpu = read_gpu(gpus, i, fixed, at, counter, min_interval);
            match &gpu.error {
                Some(e) => {
                    first_error.get_or_insert_with(|| e.clone());
                }
                None => readings.push(Reading {
                    domain: Domain::Gpu,
                    device: Some(i.to_string()),
                    watts: gpu.watts,
                    energy_counter: counter.has_started().then(|| counter.total()),
                    source: SOURCE_ID.to_string(),
                    quality: Quality::Measured,
                    at,
                }),
            }
            states.push(gpu);
        }
        if readings.is_empty() {
            if let Some(e) = first_error {
                return Err(Error::Transient(e));
            }
        }
        let mut state = Map::new();
        state.insert(
            "gpus".into(),
            Value::Array(states.iter().map(GpuState::to_json).collect()),
        );
        self.state = states;
        Ok(Sample { readings, state })
    }
}

/// Reads one GPU. A failed power query becomes `GpuState::error`; the other fields are optional
/// extras whose failure only leaves them out.
fn read_gpu<G: Gpus + ?Sized>(
    gpus: &G,
    i: u32,
    fixed: &Fixed,
    at: Stamp,
    counter: &mut EnergyCounter,
    min_interval: Duration,
) -> GpuState {
    let mut s = GpuState {
        index: i,
        name: fixed.name.clone().flatten(),
        pci_bus_id: fixed.pci_bus_id.clone().flatten(),
        enforced_power_limit: gpus
            .enforced_limit_mw(i)
            .ok()
            .flatten()
            .map(|mw| Watts::from_milliwatts(f64::from(mw))),
        utilisation: gpus.utilisation(i).ok().flatten(),
        memory: gpus.memory(i).ok().flatten(),
        ..GpuState::default()
    };
    let fields = gpus.power_fields(i).unwrap_or_default();
    let plausible = |mw: Option<u32>| {
        mw.map(|mw| Watts::from_milliwatts(f64::from(mw)))
            .filter(|w| w.is_plausible() && w.0 <= MAX_GPU_WATTS)
    };
    s.power_instant = plausible(fields.instant_mw);
    s.power_average = plausible(fields.average_mw);
    let energy = gpus.total_energy_mj(i);
    let interval = counter.since(at.monotonic);
    let from_energy = match &energy {
        Ok(Some(mj)) => counter.update(at.monotonic, *mj, min_interval),
        _ => None,
    };
    if let Some(w) = from_energy {
        // The counter ticks every update period (min_interval is half of it): over a few ticks,
        // one tick more or less is a large part of the mean (0 W, then twice the draw, at a
        // steady load), so such an interval's watts are the instant field where there is one.
        // The energy is the counter's either way.
        let short = interval.is_some_and(|d| d < min_interval * 2 * COUNTER_UPDATES_FOR_WATTS);
        match s.power_instant.filter(|_| short) {
            Some(instant) => {
                s.watts = Some(instant);
                s.power_from = Some(PowerFrom::Instant);
            }
            None => {
                s.watts = Some(w);
                s.power_from = Some(PowerFrom::EnergyCounter);
            }
        }
        return s;
    }
    match gpus.power_mw(i) {
        Ok(Some(mw)) => {
            let w = Watts::from_milliwatts(f64::from(mw));
            if w.is_plausible() && w.0 <= MAX_GPU_WATTS {
                s.watts = Some(w);
                s.power_from = Some(PowerFrom::PowerUsage);
            }
        }
        Ok(None) => {}
        Err(e) => {
            // Without a power reading, a working energy counter still makes this GPU readable
            // (its first interval simply has no watts yet).
            if !matches!(energy, Ok(Some(_))) {
                s.error = Some(format!("GPU {i}: {e}"));
            }
        }
    }
    s
}

impl NvmlSource<NvmlGpus> {
    /// The real source. When every NVIDIA GPU is runtime-suspended, NVML is not opened now but
    /// at the first read that finds one awake. Otherwise NVML opens at once and the counter
    /// update period is measured; a missing library or driver is `Unavailable` with the reason.
    pub fn new(root: &Path) -> Result<Self, Error> {
        let pci = NvidiaFunctions::scan(root);
        if pci.check().is_err() {
            return Ok(NvmlSource::build(pci, None, Some(Box::new(NvmlGpus::open))));
        }
        let mut source = NvmlSource::build(pci, Some(NvmlGpus::open()?), None);
        source.measure_counter_update_period(&mut monotonic_clock());
        Ok(source)
    }
}

fn monotonic_clock() -> impl FnMut() -> Duration {
    let origin = Instant::now();
    move || origin.elapsed()
}

impl<G: Gpus> Source for NvmlSource<G> {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn min_interval(&self) -> Option<Duration> {
        Some(self.min_sampling_interval())
    }

    /// Each GPU as last read: name, utilisation, memory, enforced limit, NVML's instant and
    /// one-second-average power, and the counter update period in use.
    fn details(&self) -> Option<Value> {
        if self.state.is_empty() {
            return None;
        }
        Some(json!({
            "gpus": self.state.iter().map(GpuState::to_json).collect::<Vec<_>>(),
            "counter_update_period_ms": self.update_period.as_secs_f64() * 1000.0,
        }))
    }

    /// Each GPU's use by processes since the last call; nothing before the GPUs are open or
    /// while they are all runtime-suspended (asking would wake them, as a read would).
    fn process_use(&mut self) -> Vec<wattbar_core::programs::DeviceUse> {
        if self.pci.check().is_err() {
            return Vec::new();
        }
        let (Some(gpus), Some(fixed)) = (self.gpus.as_ref(), self.fixed.as_ref()) else {
            return Vec::new();
        };
        (0u32..)
            .zip(fixed.iter())
            .map(|(i, _)| {
                let since = self.process_seen.get(&i).copied();
                let asked = gpus.process_samples(i, since.unwrap_or(0));
                let (used, newest) = processes::device_use(SOURCE_ID, i, since, asked);
                if let Some(t) = newest {
                    self.process_seen.insert(i, t);
                }
                used
            })
            .collect()
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let opened_now = self.gpus.is_none();
        match self.sample(at) {
            Ok(sample) => {
                if opened_now {
                    // A lazily opened GPU: measure its update period once it is awake.
                    self.measure_counter_update_period(&mut monotonic_clock());
                }
                Ok(sample.readings)
            }
            // The GPU will wake up; the chain must keep asking (it drops unavailable sources).
            Err(Error::Unavailable(reason)) if reason == SUSPENDED_REASON => {
                Err(Error::Transient(reason).into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

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

    fn device(&self, index: u32) -> Result<nvml_wrapper::Device<'_>, Error> {
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

fn query_error(index: u32, what: &str, e: NvmlError) -> Error {
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

/// One GPU row of `nvidia-smi --query-gpu=… --format=csv`: present values by column name.
///
/// Column names lose their unit (`power.draw [W]` → `power.draw`) and values lose it too
/// (`39.32 W` → `39.32`). A missing value (`[N/A]`, `N/A`, `[Not Supported]`, `[Requested
/// functionality has been deprecated]`, any other `[…]` marker) is left out, so it reads as
/// absent, never 0.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SmiRow {
    values: BTreeMap<String, String>,
}

impl SmiRow {
    pub fn text(&self, column: &str) -> Option<&str> {
        self.values.get(column).map(String::as_str)
    }

    pub fn number(&self, column: &str) -> Option<f64> {
        self.text(column)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    }
}

fn is_missing(value: &str) -> bool {
    value.is_empty() || value == "N/A" || (value.starts_with('[') && value.ends_with(']'))
}

/// Splits a header cell `power.draw [W]` into (`power.draw`, Some(`W`)).
fn split_unit(header: &str) -> (&str, Option<&str>) {
    match header
        .trim()
        .strip_suffix(']')
        .and_then(|h| h.rsplit_once(" ["))
    {
        Some((name, unit)) => (name, Some(unit)),
        None => (header.trim(), None),
    }
}

fn parse_rows(
    lines: impl Iterator<Item = (usize, String)>,
    columns: &[(&str, Option<&str>)],
) -> Result<Vec<SmiRow>, Error> {
    let mut rows = Vec::new();
    for (n, line) in lines {
        // ", " and not ",": names such as "GeForce RTX 2080" hold spaces, and some values commas.
        let cells: Vec<&str> = line.split(", ").collect();
        if cells.len() != columns.len() {
            return Err(Error::Parse {
                what: "nvidia-smi CSV",
                line: Some(n),
                message: format!(
                    "{} values where there are {} columns",
                    cells.len(),
                    columns.len()
                ),
            });
        }
        let mut values = BTreeMap::new();
        for ((name, unit), cell) in columns.iter().zip(cells) {
            let mut v = cell.trim();
            if let Some(unit) = unit {
                v = v
                    .strip_suffix(unit)
                    .map(str::trim_end)
                    .filter(|s| !s.is_empty())
                    .unwrap_or(v);
            }
            if !is_missing(v) {
                values.insert((*name).to_string(), v.to_string());
            }
        }
        rows.push(SmiRow { values });
    }
    Ok(rows)
}

fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r').to_string()))
        .filter(|(_, l)| !l.trim().is_empty())
}

/// Parses `nvidia-smi --query-gpu=… --format=csv` (header line, then one row per GPU).
pub fn parse_query_gpu_csv(text: &str) -> Result<Vec<SmiRow>, Error> {
    let mut lines = numbered_lines(text);
    let (_, header) = lines.next().ok_or_else(|| Error::Parse {
        what: "nvidia-smi CSV",
        line: Some(1),
        message: "no header".into(),
    })?;
    let columns: Vec<(&str, Option<&str>)> = header.split(", ").map(split_unit).collect();
    parse_rows(lines, &columns)
}

/// Parses `--format=csv,noheader,nounits` output; `columns` are the `--query-gpu` fields in order.
pub fn parse_query_gpu_csv_noheader(text: &str, columns: &[&str]) -> Result<Vec<SmiRow>, Error> {
    let columns: Vec<(&str, Option<&str>)> = columns.iter().map(|c| (*c, None)).collect();
    parse_rows(numbered_lines(text), &columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_update_period_is_the_shortest_time_between_changes_after_warm_up() {
        // Polled every 5 ms; the value changes every 100 ms from t = 100 ms on. The first ten
        // samples (0–45 ms) hold a jump at 20 ms that must be ignored as warm-up.
        let samples: Vec<(Duration, u64)> = (0..100u64)
            .map(|k| {
                let t = k * 5;
                let v = if t < 20 { 1 } else { 2 + t / 100 };
                (ms(t), v)
            })
            .collect();
        assert_eq!(infer_counter_update_period(&samples), Some(ms(100)));
    }

    #[test]
    fn a_counter_that_changes_less_than_twice_has_no_inferred_period() {
        let flat: Vec<(Duration, u64)> = (0..50u64).map(|k| (ms(k), 7)).collect();
        assert_eq!(infer_counter_update_period(&flat), None);
        let once: Vec<(Duration, u64)> = (0..50u64).map(|k| (ms(k), k / 30)).collect();
        assert_eq!(infer_counter_update_period(&once), None);
        assert_eq!(infer_counter_update_period(&flat[..5]), None);
    }

    #[test]
    fn uneven_updates_give_the_fastest_one() {
        let mut samples: Vec<(Duration, u64)> = (0..10u64).map(|k| (ms(k), 0)).collect();
        samples.extend([
            (ms(10), 0),
            (ms(30), 5),
            (ms(80), 9),
            (ms(100), 12),
            (ms(150), 12),
        ]);
        assert_eq!(infer_counter_update_period(&samples), Some(ms(20)));
    }

    #[test]
    fn a_counter_reset_is_a_new_baseline_not_a_negative_interval() {
        let mut c = EnergyCounter::default();
        let min = ms(50);
        assert_eq!(c.update(ms(0), 1_000_000, min), None);
        // 700 J in 2 s = 350 W.
        assert_eq!(c.update(ms(2_000), 1_700_000, min), Some(Watts(350.0)));
        // Driver reload: the counter restarts near 0.
        assert_eq!(c.update(ms(3_000), 4_000, min), None);
        assert_eq!(c.total(), Joules(700.0));
        // 100 J in 1 s from the new baseline.
        assert_eq!(c.update(ms(4_000), 104_000, min), Some(Watts(100.0)));
        assert_eq!(c.total(), Joules(800.0));
    }

    #[test]
    fn an_interval_shorter_than_the_minimum_keeps_the_baseline() {
        let mut c = EnergyCounter::default();
        let min = ms(50);
        assert_eq!(c.update(ms(1_000), 0, min), None);
        assert_eq!(c.update(ms(1_010), 0, min), None);
        assert_eq!(c.update(ms(1_000), 0, min), None);
        // From the 1 000 ms baseline: 60 J over 0.2 s = 300 W.
        assert_eq!(c.update(ms(1_200), 60_000, min), Some(Watts(300.0)));
    }

    #[test]
    fn a_kilowatt_jump_beyond_any_gpu_is_dropped() {
        let mut c = EnergyCounter::default();
        assert_eq!(c.update(ms(0), 0, ms(50)), None);
        assert_eq!(c.update(ms(1_000), 10_000_000, ms(50)), None);
        assert_eq!(c.total(), Joules(0.0));
        assert_eq!(c.update(ms(2_000), 10_500_000, ms(50)), Some(Watts(500.0)));
    }

    #[test]
    fn only_nvidia_display_controllers_count() {
        assert!(is_nvidia_display("0x10de\n", "0x030000\n"));
        assert!(is_nvidia_display("0x10de", "0x030200"));
        assert!(!is_nvidia_display("0x10de", "0x040300"));
        assert!(!is_nvidia_display("0x8086", "0x030000"));
    }

    #[test]
    fn header_units_are_split_off_the_column_name() {
        assert_eq!(split_unit("power.draw [W]"), ("power.draw", Some("W")));
        assert_eq!(split_unit(" name"), ("name", None));
    }

    #[test]
    fn a_row_with_a_wrong_number_of_values_names_its_line() {
        let err = parse_query_gpu_csv("name, power.draw [W]\nA, 1 W, 2\n")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("nvidia-smi CSV line 2: 3 values where there are 2 columns")
        );
        assert!(parse_query_gpu_csv("").is_err());
    }
}
