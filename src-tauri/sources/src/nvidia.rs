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

mod counter;
mod limits;
mod nvml;
mod processes;
mod runtime_pm;
mod smi_csv;
mod state;
pub use counter::*;
pub use limits::*;
pub use nvml::*;
pub use processes::ProcessSample;
pub use runtime_pm::*;
pub use smi_csv::*;
pub use state::*;

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

#[cfg(test)]
mod tests;
