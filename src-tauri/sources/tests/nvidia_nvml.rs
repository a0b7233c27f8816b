//! The NVML source's logic, fed through a fake `Gpus` with the values of real `nvidia-smi`
//! captures (tests/fixtures/nvidia-smi/, expected values in its SOURCES.md).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wattbar_core::{Domain, Joules, Quality, Source, Stamp, Watts};
use wattbar_sources::nvidia::{
    check_runtime_pm, nvidia_runtime_pm, parse_query_gpu_csv, parse_query_gpu_csv_noheader,
    GpuState, Gpus, Memory, NvidiaRuntimePm, NvmlSource, PowerFields, PowerFrom, ProcessSample,
    SmiRow, Utilisation, SUSPENDED_REASON,
};
use wattbar_sources::{Error, Sample};

const MIB: u64 = 1024 * 1024;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/nvidia-smi")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rows(name: &str) -> Vec<SmiRow> {
    parse_query_gpu_csv(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn at(secs: f64) -> Stamp {
    Stamp::new(Duration::from_secs_f64(secs), 1_700_000_000.0 + secs)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// One GPU as the fake reports it.
#[derive(Debug, Clone, Default)]
struct FakeGpu {
    name: Option<String>,
    energy_mj: Option<u64>,
    power_mw: Option<u32>,
    limit_mw: Option<u32>,
    utilisation: Option<Utilisation>,
    memory: Option<Memory>,
    bus_id: Option<String>,
    fields: PowerFields,
    /// NVML's per-process samples; `None`: not supported.
    processes: Option<Vec<ProcessSample>>,
}

impl FakeGpu {
    /// What NVML would answer on the GPU of one nvidia-smi row (no energy counter: nvidia-smi
    /// does not print it; tests that need one set it).
    fn from_row(row: &SmiRow) -> Self {
        let mw = |col: &str| row.number(col).map(|w| (w * 1000.0).round() as u32);
        let utilisation = match (
            row.number("utilization.gpu"),
            row.number("utilization.memory"),
        ) {
            (Some(g), Some(m)) => Some(Utilisation {
                gpu_percent: g as u32,
                memory_percent: m as u32,
            }),
            _ => None,
        };
        let memory = match (row.number("memory.used"), row.number("memory.total")) {
            (Some(u), Some(t)) => Some(Memory {
                used_bytes: u as u64 * MIB,
                total_bytes: t as u64 * MIB,
            }),
            _ => None,
        };
        FakeGpu {
            name: row.text("name").map(str::to_string),
            energy_mj: None,
            power_mw: mw("power.draw"),
            limit_mw: mw("enforced.power.limit").or(mw("power.limit")),
            utilisation,
            memory,
            bus_id: row.text("pci.bus_id").map(str::to_string),
            processes: None,
            // nvidia-smi prints NVML's instant and average power fields in these columns.
            fields: PowerFields {
                instant_mw: mw("power.draw.instant"),
                average_mw: mw("power.draw.average"),
            },
        }
    }
}

/// One call to the fake: the query and the GPU's index (`count` has none).
type Asked = (&'static str, Option<u32>);

/// A fake NVML whose GPUs the test can change between reads, noting every call in order.
#[derive(Clone, Default)]
struct FakeGpus {
    gpus: Arc<Mutex<Vec<FakeGpu>>>,
    calls: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl FakeGpus {
    fn new(gpus: Vec<FakeGpu>) -> Self {
        FakeGpus {
            gpus: Arc::new(Mutex::new(gpus)),
            calls: Arc::new(AtomicUsize::new(0)),
            asked: Arc::default(),
        }
    }

    /// The calls since the last time this was asked.
    fn take_asked(&self) -> Vec<Asked> {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(|e| panic!("{e}")))
    }

    fn note(&self, what: &'static str, index: Option<u32>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.asked
            .lock()
            .unwrap_or_else(|e| panic!("{e}"))
            .push((what, index));
    }

    fn set(&self, index: usize, gpu: FakeGpu) {
        self.gpus.lock().unwrap_or_else(|e| panic!("{e}"))[index] = gpu;
    }

    fn get<T>(
        &self,
        what: &'static str,
        index: u32,
        f: impl FnOnce(&FakeGpu) -> T,
    ) -> Result<T, Error> {
        self.note(what, Some(index));
        let gpus = self.gpus.lock().unwrap_or_else(|e| panic!("{e}"));
        gpus.get(index as usize)
            .map(f)
            .ok_or_else(|| Error::Transient(format!("no GPU {index}")))
    }
}

impl Gpus for FakeGpus {
    fn count(&self) -> Result<u32, Error> {
        self.note("count", None);
        Ok(self.gpus.lock().unwrap_or_else(|e| panic!("{e}")).len() as u32)
    }
    fn name(&self, i: u32) -> Result<Option<String>, Error> {
        self.get("name", i, |g| g.name.clone())
    }
    fn total_energy_mj(&self, i: u32) -> Result<Option<u64>, Error> {
        self.get("total_energy_mj", i, |g| g.energy_mj)
    }
    fn power_mw(&self, i: u32) -> Result<Option<u32>, Error> {
        self.get("power_mw", i, |g| g.power_mw)
    }
    fn enforced_limit_mw(&self, i: u32) -> Result<Option<u32>, Error> {
        self.get("enforced_limit_mw", i, |g| g.limit_mw)
    }
    fn utilisation(&self, i: u32) -> Result<Option<Utilisation>, Error> {
        self.get("utilisation", i, |g| g.utilisation)
    }
    fn memory(&self, i: u32) -> Result<Option<Memory>, Error> {
        self.get("memory", i, |g| g.memory)
    }
    fn pci_bus_id(&self, i: u32) -> Result<Option<String>, Error> {
        self.get("pci_bus_id", i, |g| g.bus_id.clone())
    }
    fn power_fields(&self, i: u32) -> Result<PowerFields, Error> {
        self.get("power_fields", i, |g| g.fields)
    }
    /// As NVML: only the samples newer than `since_us`.
    fn process_samples(&self, i: u32, since_us: u64) -> Result<Option<Vec<ProcessSample>>, Error> {
        self.get("process_samples", i, |g| {
            g.processes.as_ref().map(|all| {
                all.iter()
                    .filter(|s| s.timestamp_us > since_us)
                    .copied()
                    .collect()
            })
        })
    }
}

fn no_sysfs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nvidia-smi/no-sysfs-here")
}

fn sample(source: &mut NvmlSource<FakeGpus>, secs: f64) -> Sample {
    source
        .sample(at(secs))
        .unwrap_or_else(|e| panic!("read at {secs} s: {e}"))
}

/// What the source reads from the GPU of one capture row.
fn read_row(row: &SmiRow) -> (Sample, GpuState) {
    let mut source =
        NvmlSource::from_gpus(&no_sysfs(), FakeGpus::new(vec![FakeGpu::from_row(row)]));
    let s = sample(&mut source, 1.0);
    let state = source.state()[0].clone();
    (s, state)
}

/// Checks one capture row: watts (from the power reading), enforced limit, utilisation
/// (`None` = absent) and memory in MiB.
fn check_row(
    row: &SmiRow,
    watts: f64,
    limit: f64,
    utilisation: Option<(u32, u32)>,
    memory_mib: (u64, u64),
) {
    let (s, state) = read_row(row);
    assert_eq!(s.readings.len(), 1);
    let r = &s.readings[0];
    assert_eq!(r.domain, Domain::Gpu);
    assert_eq!(r.device.as_deref(), Some("0"));
    assert_eq!(r.source, "nvml");
    assert_eq!(r.quality, Quality::Measured);
    let w = r.watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, watts), "{w} W, expected {watts} W");
    assert_eq!(state.power_from, Some(PowerFrom::PowerUsage));
    // nvidia-smi shows no energy counter, so the fake has none: no counter, not 0 J.
    assert_eq!(r.energy_counter, None);
    let l = state.enforced_power_limit.unwrap_or(Watts(-1.0)).0;
    assert!(close(l, limit), "limit {l} W, expected {limit} W");
    assert_eq!(
        state.utilisation,
        utilisation.map(|(g, m)| Utilisation {
            gpu_percent: g,
            memory_percent: m
        })
    );
    assert_eq!(
        state.memory,
        Some(Memory {
            used_bytes: memory_mib.0 * MIB,
            total_bytes: memory_mib.1 * MIB
        })
    );
    let json = &s.state["gpus"][0];
    assert!(close(json["watts"].as_f64().unwrap_or(-1.0), watts));
    assert!(close(
        json["enforced_power_limit_watts"].as_f64().unwrap_or(-1.0),
        limit
    ));
    assert_eq!(json["power_from"], "power-usage");
    assert_eq!(
        json.get("utilisation_gpu_percent").and_then(|v| v.as_u64()),
        utilisation.map(|(g, _)| u64::from(g))
    );
    assert_eq!(json["memory_total_bytes"], memory_mib.1 * MIB);
}

#[test]
fn h100_power_draw_goes_from_69_85_w_idle_to_631_95_w_under_load() {
    let r = rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv");
    assert_eq!(r.len(), 2);
    check_row(&r[0], 69.85, 700.0, Some((0, 0)), (0, 81559));
    check_row(&r[1], 631.95, 700.0, Some((100, 11)), (19818, 81559));
    assert_eq!(r[1].number("power.draw.instant"), Some(625.68));
    assert_eq!(r[1].text("name"), Some("NVIDIA H100 80GB HBM3"));
}

#[test]
fn sources_shows_each_gpu_with_nvmls_own_power_fields() {
    // What `wattbar-cli sources` prints comes from the chain's status of each source.
    let row = &rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1];
    let source = NvmlSource::from_gpus(&no_sysfs(), FakeGpus::new(vec![FakeGpu::from_row(row)]));
    let mut chain = wattbar_core::Chain::new(vec![Box::new(source)]);
    let snapshot = chain.sample(at(1.0));
    let status = chain.status(&snapshot);
    let nvml = status
        .iter()
        .find(|s| s.id == "nvml")
        .unwrap_or_else(|| panic!("no nvml in {status:?}"));
    let details = nvml
        .details
        .as_ref()
        .unwrap_or_else(|| panic!("no details: {nvml:?}"));
    let gpu = &details["gpus"][0];
    assert_eq!(gpu["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu["power_instant_watts"], 625.68);
    assert_eq!(gpu["power_average_watts"], 631.95);
    assert_eq!(gpu["enforced_power_limit_watts"], 700.0);
    assert!(details["counter_update_period_ms"]
        .as_f64()
        .is_some_and(|ms| ms > 0.0));
}

#[test]
fn nvml_instant_and_average_power_are_kept_apart_and_never_added() {
    // The H100 under load: power.draw 631.95 W, the average field 631.95 W, the instant 625.68 W.
    let (s, state) = read_row(&rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1]);
    assert_eq!(
        s.readings.len(),
        1,
        "one reading per GPU: the fields are not parts"
    );
    assert_eq!(s.readings[0].watts, Some(Watts(631.95)));
    assert_eq!(state.power_instant, Some(Watts(625.68)));
    assert_eq!(state.power_average, Some(Watts(631.95)));
    let json = &s.state["gpus"][0];
    assert_eq!(json["power_instant_watts"], 625.68);
    assert_eq!(json["power_average_watts"], 631.95);
    // Turing has no average field: absent, not 0 W.
    let (_, turing) =
        read_row(&rows("nvidia-geforce-rtx-2080-super__595.71.05.power-columns.csv")[0]);
    assert_eq!(
        (turing.power_average, turing.power_instant),
        (None, Some(Watts(39.32)))
    );
}

#[test]
fn h100_in_mig_mode_has_no_utilisation_rather_than_zero() {
    let r = rows("nvidia-h100-mig__590.48.01.power-columns.csv");
    assert_eq!(r[0].text("utilization.gpu"), None);
    check_row(&r[0], 71.15, 700.0, None, (59, 81559));
    check_row(&r[1], 433.78, 700.0, None, (11125, 81559));
    assert_eq!(r[1].number("power.draw.instant"), Some(447.35));
    let (s, _) = read_row(&r[1]);
    assert!(s.state["gpus"][0].get("utilisation_gpu_percent").is_none());
}

#[test]
fn h200_power_draw_goes_from_77_71_w_to_627_40_w() {
    let r = rows("nvidia-h200__590.48.01.power-columns.csv");
    check_row(&r[0], 77.71, 700.0, Some((0, 0)), (0, 143771));
    check_row(&r[1], 627.40, 700.0, Some((100, 7)), (32362, 143771));
    assert_eq!(r[0].number("power.draw.instant"), Some(78.21));
    assert_eq!(r[1].number("power.draw.instant"), Some(626.26));
}

#[test]
fn h200_in_mig_mode_goes_from_78_28_w_to_295_01_w_without_utilisation() {
    let r = rows("nvidia-h200-mig__590.48.01.power-columns.csv");
    check_row(&r[0], 78.28, 700.0, None, (55, 143771));
    check_row(&r[1], 295.01, 700.0, None, (16959, 143771));
    assert_eq!(r[0].number("power.draw.instant"), Some(78.21));
    assert_eq!(r[1].number("power.draw.instant"), Some(294.14));
}

#[test]
fn rtx_4080_super_power_draw_goes_from_26_20_w_to_84_24_w() {
    let r = rows("nvidia-geforce-rtx-4080-super__595.71.05.power-columns.csv");
    check_row(&r[0], 26.20, 320.0, Some((0, 23)), (596, 16376));
    check_row(&r[1], 84.24, 320.0, Some((7, 2)), (1474, 16376));
    assert_eq!(r[0].number("power.draw.average"), Some(26.20));
    assert_eq!(r[0].number("power.draw.instant"), Some(28.77));
    assert_eq!(r[1].number("power.draw.instant"), Some(86.41));
}

#[test]
fn rtx_2080_super_turing_has_no_average_power_but_a_power_draw() {
    let r = rows("nvidia-geforce-rtx-2080-super__595.71.05.power-columns.csv");
    assert_eq!(r[0].number("power.draw.average"), None);
    assert_eq!(r[0].number("power.draw.instant"), Some(39.32));
    check_row(&r[0], 39.32, 250.0, Some((0, 9)), (214, 8192));
    check_row(&r[1], 111.50, 250.0, Some((8, 3)), (819, 8192));

    let r = rows("nvidia-geforce-rtx-2080-super__610.57.04.power-columns.csv");
    assert_eq!(r[1].number("power.draw.average"), None);
    assert_eq!(r[1].text("driver_version"), Some("610.57.04"));
    check_row(&r[0], 39.17, 250.0, Some((0, 0)), (211, 8192));
    check_row(&r[1], 98.14, 250.0, Some((8, 3)), (815, 8192));
}

#[test]
fn l40s_idle_capture_draws_more_than_its_load_capture() {
    let r = rows("nvidia-l40s__595.80.power-columns.csv");
    check_row(&r[0], 144.97, 350.0, Some((100, 9)), (0, 46068));
    check_row(&r[1], 110.23, 350.0, Some((9, 2)), (1235, 46068));
    assert_eq!(r[0].number("power.draw.instant"), Some(127.67));
    assert_eq!(r[1].number("power.draw.instant"), Some(112.38));
}

#[test]
fn the_full_h100_query_gpu_csv_gives_the_same_values_and_the_pci_bus_id() {
    let idle = rows("nvidia-h100-80gb-hbm3__590.48.01.idle.query-gpu.csv");
    let load = rows("nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv");
    assert_eq!((idle.len(), load.len()), (1, 1));
    check_row(&idle[0], 69.85, 700.0, Some((0, 0)), (0, 81559));
    check_row(&load[0], 631.95, 700.0, Some((100, 11)), (19818, 81559));
    let (_, state) = read_row(&load[0]);
    assert_eq!(state.pci_bus_id.as_deref(), Some("00000000:00:09.0"));
    assert_eq!(state.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(load[0].number("power.max_limit"), Some(700.0));
    assert_eq!(load[0].number("power.min_limit"), Some(200.0));
}

#[test]
fn the_rtx_2080_noheader_nounits_csv_draws_176_98_w() {
    // The --query-gpu list of the capture (tests/fixtures/nvidia-smi/SOURCES.md).
    let columns = [
        "power.limit",
        "power.min_limit",
        "power.max_limit",
        "memory.total",
        "vbios_version",
        "driver_version",
        "name",
        "gpu_uuid",
        "power.draw",
        "temperature.gpu",
        "temperature.memory",
        "clocks.current.graphics",
        "clocks.sm",
        "clocks.mem",
        "utilization.gpu",
        "utilization.memory",
        "fan.speed",
        "pcie.link.width.current",
        "pstate",
    ];
    let text = fixture("geforce-rtx-2080__440.64.noheader-nounits.csv");
    let r = parse_query_gpu_csv_noheader(&text, &columns).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.len(), 1);
    let row = &r[0];
    // Split on ", ", not on whitespace: the name keeps its spaces.
    assert_eq!(row.text("name"), Some("GeForce RTX 2080"));
    assert_eq!(row.text("pstate"), Some("P2"));
    assert_eq!(row.text("temperature.memory"), None);
    assert_eq!(row.number("utilization.gpu"), Some(86.0));
    let (s, state) = read_row(row);
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 176.98), "{w}");
    assert_eq!(state.enforced_power_limit, Some(Watts(200.0)));
    assert_eq!(
        state.utilisation,
        Some(Utilisation {
            gpu_percent: 86,
            memory_percent: 55
        })
    );
    // No memory.used in this query: memory is absent, not 0 used.
    assert_eq!(state.memory, None);
}

#[test]
fn the_energy_counter_wins_over_the_power_reading() {
    // An H100 under the captured load: the counter advances at 631.95 W while the power reading
    // shows the instantaneous 625.68 W.
    let load = &rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1];
    let mut gpu = FakeGpu::from_row(load);
    gpu.power_mw = Some(625_680);
    gpu.energy_mj = Some(5_000_000);
    let fake = FakeGpus::new(vec![gpu.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());

    // First read: no interval yet, so the power reading stands in.
    let s = sample(&mut source, 10.0);
    assert_eq!(s.readings[0].watts, Some(Watts(625.68)));
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::PowerUsage));
    assert_eq!(s.readings[0].energy_counter, Some(Joules(0.0)));

    // 2 s later: 631.95 W × 2 s = 1263.9 J = 1 263 900 mJ more.
    gpu.energy_mj = Some(5_000_000 + 1_263_900);
    fake.set(0, gpu.clone());
    let s = sample(&mut source, 12.0);
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 631.95), "{w}");
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::EnergyCounter));
    assert_eq!(s.readings[0].energy_counter, Some(Joules(1263.9)));
}

#[test]
fn over_a_few_counter_updates_the_watts_are_the_instant_field_and_the_energy_the_counters() {
    // The H100 under load (instant 625.68 W), its counter updating every 100 ms and read every
    // 100 ms: ticks land unevenly, two in one interval and none in the next.
    let load = &rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1];
    let mut gpu = FakeGpu::from_row(load);
    gpu.energy_mj = Some(1_000_000);
    let fake = FakeGpus::new(vec![gpu.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());
    source.set_counter_update_period(Duration::from_millis(100));
    sample(&mut source, 10.0);
    // Two ticks of 63.2 J in 100 ms: the counter's mean would say 1264 W.
    gpu.energy_mj = Some(1_000_000 + 126_390);
    fake.set(0, gpu.clone());
    let s = sample(&mut source, 10.1);
    assert_eq!(s.readings[0].watts, Some(Watts(625.68)));
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::Instant));
    // No tick in the next 100 ms: still the instant power, never 0 W.
    let s = sample(&mut source, 10.2);
    assert_eq!(s.readings[0].watts, Some(Watts(625.68)));
    // The energy is the counter's, tick for tick.
    assert_eq!(s.readings[0].energy_counter, Some(Joules(126.39)));
    // Over 2 s (20 updates) the counter's mean is the watts again: 631.95 W × 2 s = 1263.9 J.
    gpu.energy_mj = Some(1_000_000 + 126_390 + 1_263_900);
    fake.set(0, gpu.clone());
    let s = sample(&mut source, 12.2);
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 631.95), "{w}");
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::EnergyCounter));

    // A GPU without the instant field keeps the counter's mean, as before.
    let turing = &rows("nvidia-geforce-rtx-2080-super__595.71.05.power-columns.csv")[0];
    let mut old = FakeGpu::from_row(turing);
    old.fields = PowerFields::default();
    old.energy_mj = Some(1_000);
    let fake = FakeGpus::new(vec![old.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());
    source.set_counter_update_period(Duration::from_millis(100));
    sample(&mut source, 10.0);
    old.energy_mj = Some(1_000 + 3_932);
    fake.set(0, old);
    let s = sample(&mut source, 10.1);
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 39.32), "{w}");
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::EnergyCounter));
}

#[test]
fn a_driver_reload_is_a_new_baseline_and_adds_no_energy() {
    let load = &rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1];
    let mut gpu = FakeGpu::from_row(load);
    gpu.energy_mj = Some(9_000_000);
    let fake = FakeGpus::new(vec![gpu.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());
    sample(&mut source, 0.0);
    gpu.energy_mj = Some(9_000_000 + 631_950);
    fake.set(0, gpu.clone());
    let s = sample(&mut source, 1.0);
    assert_eq!(s.readings[0].energy_counter, Some(Joules(631.95)));

    // The driver reloaded: the counter restarted at 1 000 mJ.
    gpu.energy_mj = Some(1_000);
    fake.set(0, gpu.clone());
    let s = sample(&mut source, 2.0);
    assert_eq!(s.readings[0].energy_counter, Some(Joules(631.95)));
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::PowerUsage));
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 631.95), "the power reading stands in: {w}");

    // From the new baseline: 69.85 J in 1 s.
    gpu.energy_mj = Some(1_000 + 69_850);
    fake.set(0, gpu);
    let s = sample(&mut source, 3.0);
    let w = s.readings[0].watts.unwrap_or(Watts(-1.0)).0;
    assert!(close(w, 69.85), "{w}");
    assert_eq!(source.state()[0].power_from, Some(PowerFrom::EnergyCounter));
}

#[test]
fn a_gpu_with_neither_counter_nor_power_reading_has_no_watts_not_zero() {
    let idle = &rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[0];
    let mut gpu = FakeGpu::from_row(idle);
    gpu.power_mw = None;
    let mut source = NvmlSource::from_gpus(&no_sysfs(), FakeGpus::new(vec![gpu]));
    let s = sample(&mut source, 1.0);
    assert_eq!(s.readings.len(), 1);
    assert_eq!(s.readings[0].watts, None);
    assert!(s.state["gpus"][0].get("watts").is_none());
}

#[test]
fn each_gpu_is_its_own_device() {
    let h100 = FakeGpu::from_row(&rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1]);
    let l40s = FakeGpu::from_row(&rows("nvidia-l40s__595.80.power-columns.csv")[1]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), FakeGpus::new(vec![h100, l40s]));
    let s = source.read(at(1.0)).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(Option<&str>, Option<f64>)> = s
        .iter()
        .map(|r| (r.device.as_deref(), r.watts.map(|w| w.0)))
        .collect();
    assert_eq!(
        got,
        vec![(Some("0"), Some(631.95)), (Some("1"), Some(110.23))]
    );
}

#[test]
fn no_gpu_at_all_is_unavailable() {
    let mut source = NvmlSource::from_gpus(&no_sysfs(), FakeGpus::new(vec![]));
    assert!(matches!(source.sample(at(1.0)), Err(Error::Unavailable(_))));
}

/// A PCI function of a fake sysfs: (name, vendor, class, runtime_status).
type PciFunction<'a> = (&'a str, &'a str, &'a str, Option<&'a str>);

/// A fake sysfs with PCI functions.
fn fake_pci(devices: &[PciFunction]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for device in devices {
        add_pci(dir.path(), *device);
    }
    dir
}

fn add_pci(root: &Path, (name, vendor, class, status): PciFunction) {
    let dev = root.join("sys/bus/pci/devices").join(name);
    std::fs::create_dir_all(dev.join("power")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dev.join("vendor"), format!("{vendor}\n")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dev.join("class"), format!("{class}\n")).unwrap_or_else(|e| panic!("{e}"));
    if let Some(s) = status {
        std::fs::write(dev.join("power/runtime_status"), format!("{s}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

fn set_status(root: &Path, name: &str, status: &str) {
    std::fs::write(
        root.join("sys/bus/pci/devices")
            .join(name)
            .join("power/runtime_status"),
        status,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

const IGPU: PciFunction = ("0000:00:02.0", "0x8086", "0x030000", Some("active"));

#[test]
fn a_suspended_dgpu_is_not_woken() {
    let sys = fake_pci(&[
        IGPU,
        ("0000:01:00.0", "0x10de", "0x030200", Some("suspended")),
        // The card's HDMI audio function is awake but is not a display controller.
        ("0000:01:00.1", "0x10de", "0x040300", Some("active")),
    ]);
    assert_eq!(
        nvidia_runtime_pm(sys.path()),
        NvidiaRuntimePm::AllSuspended(1)
    );
    assert_eq!(
        check_runtime_pm(sys.path()),
        Err(Error::Unavailable(SUSPENDED_REASON.into()))
    );

    let gpu =
        FakeGpu::from_row(&rows("nvidia-geforce-rtx-4080-super__595.71.05.power-columns.csv")[0]);
    let fake = FakeGpus::new(vec![gpu]);
    let mut source = NvmlSource::from_gpus(sys.path(), fake.clone());
    let err = source.read(at(1.0)).err().map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("transient: the NVIDIA GPU is suspended; not waking it")
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0, "NVML was asked");

    // It wakes up (the user started a game): the next read measures it.
    set_status(sys.path(), "0000:01:00.0", "active");
    let readings = source.read(at(2.0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(readings[0].watts, Some(Watts(26.2)));
    assert!(fake.calls.load(Ordering::SeqCst) > 0);
    // Suspended again: energy per program does not wake it to ask which process used it.
    set_status(sys.path(), "0000:01:00.0", "suspended");
    let asked = fake.calls.load(Ordering::SeqCst);
    assert!(source.process_use().is_empty());
    assert_eq!(fake.calls.load(Ordering::SeqCst), asked, "NVML was asked");
}

#[test]
fn a_lazy_source_opens_nvml_only_once_the_dgpu_is_awake() {
    let sys = fake_pci(&[
        IGPU,
        ("0000:01:00.0", "0x10de", "0x030000", Some("suspended")),
    ]);
    let opened = Arc::new(AtomicUsize::new(0));
    let gpu =
        FakeGpu::from_row(&rows("nvidia-geforce-rtx-4080-super__595.71.05.power-columns.csv")[1]);
    let counter = opened.clone();
    let mut source = NvmlSource::lazy(sys.path(), move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(FakeGpus::new(vec![gpu.clone()]))
    });
    assert!(source.read(at(1.0)).is_err());
    assert_eq!(opened.load(Ordering::SeqCst), 0);
    set_status(sys.path(), "0000:01:00.0", "active");
    let readings = source.read(at(2.0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(readings[0].watts, Some(Watts(84.24)));
    assert_eq!(opened.load(Ordering::SeqCst), 1);
}

#[test]
fn one_awake_nvidia_gpu_or_an_unknown_status_allows_nvml() {
    let two = fake_pci(&[
        ("0000:01:00.0", "0x10de", "0x030000", Some("suspended")),
        ("0000:02:00.0", "0x10de", "0x030000", Some("active")),
    ]);
    assert_eq!(nvidia_runtime_pm(two.path()), NvidiaRuntimePm::Awake);
    let unknown = fake_pci(&[("0000:01:00.0", "0x10de", "0x030000", None)]);
    assert_eq!(nvidia_runtime_pm(unknown.path()), NvidiaRuntimePm::Awake);
    let intel_only = fake_pci(&[IGPU]);
    assert_eq!(
        nvidia_runtime_pm(intel_only.path()),
        NvidiaRuntimePm::NoneFound
    );
    assert_eq!(nvidia_runtime_pm(&no_sysfs()), NvidiaRuntimePm::NoneFound);
    assert_eq!(check_runtime_pm(two.path()), Ok(()));
}

/// A GPU whose power reading changes every 50 ms of a fake clock that advances 1 ms per call.
struct TickingGpu {
    clock_ms: Arc<AtomicU64>,
}

impl Gpus for TickingGpu {
    fn count(&self) -> Result<u32, Error> {
        Ok(1)
    }
    fn name(&self, _: u32) -> Result<Option<String>, Error> {
        Ok(Some("NVIDIA L40S".into()))
    }
    fn total_energy_mj(&self, _: u32) -> Result<Option<u64>, Error> {
        Ok(None)
    }
    fn power_mw(&self, _: u32) -> Result<Option<u32>, Error> {
        let t = self.clock_ms.load(Ordering::SeqCst);
        Ok(Some(110_000 + (t / 50) as u32))
    }
    fn enforced_limit_mw(&self, _: u32) -> Result<Option<u32>, Error> {
        Ok(Some(350_000))
    }
    fn utilisation(&self, _: u32) -> Result<Option<Utilisation>, Error> {
        Ok(None)
    }
    fn memory(&self, _: u32) -> Result<Option<Memory>, Error> {
        Ok(None)
    }
    fn pci_bus_id(&self, _: u32) -> Result<Option<String>, Error> {
        Ok(None)
    }
}

#[test]
fn a_counter_updating_every_50_ms_is_sampled_no_faster_than_every_25_ms() {
    let clock_ms = Arc::new(AtomicU64::new(0));
    let mut source = NvmlSource::from_gpus(
        &no_sysfs(),
        TickingGpu {
            clock_ms: clock_ms.clone(),
        },
    );
    assert_eq!(source.min_sampling_interval(), Duration::from_millis(50));
    let tick = clock_ms.clone();
    source.measure_counter_update_period(&mut || {
        Duration::from_millis(tick.fetch_add(1, Ordering::SeqCst) + 1)
    });
    assert_eq!(source.counter_update_period(), Duration::from_millis(50));
    assert_eq!(source.min_sampling_interval(), Duration::from_millis(25));
}

#[test]
fn on_a_machine_without_the_nvidia_driver_the_real_source_is_unavailable_naming_the_library() {
    let driver_present = Path::new("/proc/driver/nvidia").exists();
    match NvmlSource::new(Path::new("/")) {
        Err(Error::Unavailable(reason)) => {
            assert!(!driver_present, "driver present but: {reason}");
            assert!(reason.contains("libnvidia-ml.so.1"), "{reason}");
        }
        Ok(mut source) => {
            assert!(driver_present, "NVML opened without /proc/driver/nvidia");
            let readings = source.read(at(1.0)).unwrap_or_else(|e| panic!("{e}"));
            assert!(readings.iter().all(|r| r.domain == Domain::Gpu));
        }
        Err(other) => panic!("{other}"),
    }
}

#[test]
fn the_bus_is_scanned_once_and_each_read_looks_only_at_the_gpus_it_found() {
    let sys = fake_pci(&[
        IGPU,
        ("0000:01:00.0", "0x10de", "0x030000", Some("suspended")),
    ]);
    let gpu =
        FakeGpu::from_row(&rows("nvidia-geforce-rtx-4080-super__595.71.05.power-columns.csv")[0]);
    let fake = FakeGpus::new(vec![gpu]);
    let mut source = NvmlSource::from_gpus(sys.path(), fake.clone());
    assert!(source.read(at(1.0)).is_err());
    // An awake NVIDIA function that appears after the scan: a read does not walk the bus again,
    // so it is not seen and the sleeping GPU is still left alone; a new scan would see it.
    add_pci(
        sys.path(),
        ("0000:02:00.0", "0x10de", "0x030000", Some("active")),
    );
    assert!(source.read(at(2.0)).is_err());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0, "NVML was asked");
    assert_eq!(nvidia_runtime_pm(sys.path()), NvidiaRuntimePm::Awake);
    // The GPU it found wakes: the next read measures it.
    set_status(sys.path(), "0000:01:00.0", "active");
    let readings = source.read(at(3.0)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(readings[0].watts, Some(Watts(26.2)));
}

#[test]
fn after_the_first_read_nvml_is_asked_only_for_what_changes() {
    // Two GPUs with energy counters. The first read learns the count and each GPU's name and
    // bus id; every later read asks each GPU for its energy, power fields, limit, utilisation
    // and memory, the figures a read reports, and for nothing else.
    let mut h100 =
        FakeGpu::from_row(&rows("nvidia-h100-80gb-hbm3__590.48.01.power-columns.csv")[1]);
    h100.energy_mj = Some(1_000_000);
    h100.bus_id = Some("00000000:00:09.0".into());
    let mut l40s = FakeGpu::from_row(&rows("nvidia-l40s__595.80.power-columns.csv")[1]);
    l40s.energy_mj = Some(5_000_000);
    let fake = FakeGpus::new(vec![h100.clone(), l40s.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());
    sample(&mut source, 1.0);
    let first = fake.take_asked();
    assert_eq!(first.iter().filter(|(q, _)| *q == "count").count(), 1);
    for gpu in [0, 1] {
        for query in ["name", "pci_bus_id"] {
            assert!(
                first.contains(&(query, Some(gpu))),
                "{query} {gpu}: {first:?}"
            );
        }
    }

    let per_read = [
        "enforced_limit_mw",
        "memory",
        "power_fields",
        "total_energy_mj",
        "utilisation",
    ];
    let mut expected: Vec<Asked> = [0, 1]
        .into_iter()
        .flat_map(|gpu| per_read.map(|query| (query, Some(gpu))))
        .collect();
    expected.sort();
    for k in 1..=3u64 {
        // 300 W on the H100 and 110 W on the L40S: 300 J and 110 J a second.
        h100.energy_mj = Some(1_000_000 + k * 300_000);
        l40s.energy_mj = Some(5_000_000 + k * 110_000);
        fake.set(0, h100.clone());
        fake.set(1, l40s.clone());
        let s = sample(&mut source, 1.0 + k as f64);
        let mut asked = fake.take_asked();
        asked.sort();
        assert_eq!(asked, expected, "read {k}");
        let watts: Vec<Option<Watts>> = s.readings.iter().map(|r| r.watts).collect();
        assert_eq!(watts, vec![Some(Watts(300.0)), Some(Watts(110.0))]);
        // What was learnt once is still reported.
        assert_eq!(source.state()[0].name, h100.name);
        assert_eq!(
            source.state()[0].pci_bus_id.as_deref(),
            Some("00000000:00:09.0")
        );
        assert_eq!(source.state()[1].name, l40s.name);
    }
}

fn samples(pid: u32, sm: &[(u64, u32)]) -> Vec<ProcessSample> {
    sm.iter()
        .map(|&(t, sm_percent)| ProcessSample {
            pid,
            timestamp_us: t,
            sm_percent,
        })
        .collect()
}

#[test]
fn two_processes_share_a_gpu_by_their_use_and_each_sample_counts_once() {
    // The H100 of the load capture, with two CUDA processes: 300 at 80 % SM, 400 at 20 %.
    let row = &rows("nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv")[0];
    let mut gpu = FakeGpu::from_row(row);
    let mut all = samples(300, &[(1_000, 80), (2_000, 80)]);
    all.extend(samples(400, &[(1_000, 20), (2_000, 20)]));
    gpu.processes = Some(all.clone());
    let fake = FakeGpus::new(vec![gpu.clone()]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake.clone());
    // Nothing is asked before the GPUs are open, and a read asks nothing per process.
    assert!(source.process_use().is_empty());
    sample(&mut source, 1.0);
    assert!(!fake
        .take_asked()
        .iter()
        .any(|(what, _)| *what == "process_samples"));
    let used = source.process_use();
    assert_eq!(used.len(), 1);
    assert_eq!(
        (used[0].source.as_str(), used[0].device.as_str()),
        ("nvml", "0")
    );
    let by_pid: Vec<(u32, f64)> = used[0].by_pid.iter().map(|(p, u)| (*p, *u)).collect();
    assert_eq!(by_pid, [(300, 160.0), (400, 40.0)]);
    assert_eq!(used[0].none_because, None);
    // Then only the new samples: 400 alone, at 50 %.
    all.extend(samples(400, &[(3_000, 50)]));
    gpu.processes = Some(all);
    fake.set(0, gpu);
    let used = source.process_use();
    let by_pid: Vec<(u32, f64)> = used[0].by_pid.iter().map(|(p, u)| (*p, *u)).collect();
    assert_eq!(by_pid, [(400, 50.0)]);
    // Nothing new: no process used it, and it says so.
    let used = source.process_use();
    assert!(used[0].by_pid.is_empty());
    assert_eq!(
        used[0].none_because.as_deref(),
        Some("no process used GPU 0")
    );
}

#[test]
fn a_gpu_that_cannot_tell_its_processes_says_so() {
    let row = &rows("nvidia-h100-80gb-hbm3__590.48.01.load.query-gpu.csv")[0];
    let fake = FakeGpus::new(vec![FakeGpu::from_row(row)]);
    let mut source = NvmlSource::from_gpus(&no_sysfs(), fake);
    sample(&mut source, 1.0);
    let used = source.process_use();
    assert!(used[0].by_pid.is_empty());
    let why = used[0].none_because.clone().unwrap_or_default();
    assert!(why.contains("does not report its use per process"), "{why}");
}
