//! GPUs (and server power meters) through hwmon: `root/sys/class/hwmon/hwmon*`.
//!
//! Rules:
//! - Power: `powerN_input`, else `powerN_average`, in µW. `powerN_cap`, `_max` and `_crit` are
//!   limits, reported as state, never as readings.
//! - Energy: `energyN_input` is a µJ counter: watts need two reads. A counter that reads 0, or
//!   has never moved between reads, is unsupported (the xe driver on Linux 6.16 reads 0 for
//!   `card`; a real counter has counted since boot).
//! - One figure per device: never add two channels of one device (an APU's two PPT channels
//!   measure the same SoC). A device's first power channel wins; without one, its first moving
//!   energy counter.
//! - Devices: `amdgpu` is a GPU, except on an APU, where its PPT is the whole SoC including the
//!   CPU cores (kernel amdgpu docs): domain `soc`, which the chain never adds to a CPU figure.
//!   An amdgpu with no `power1_cap` is taken as an APU (discrete cards expose their board power
//!   cap; APUs do not), or with `in1_label` = vddnb. `i915`, `xe` and `nouveau` are GPUs. `acpi_power_meter` measures the whole
//!   server: domain `system`. Other devices are skipped.
//! - `name` may be NUL-padded: NULs and whitespace are trimmed.

use super::sysfs::{clean, read_attr_bytes};
use crate::error::Error;
use crate::sample::Sample;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::counter::CounterTotal;
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "hwmon";
const CLASS: &str = "sys/class/hwmon";
/// Larger than any GPU or server draws: a bigger value is a broken counter.
pub const MAX_DEVICE_WATTS: f64 = 5000.0;

/// The files of one hwmon device, by name, values trimmed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Device {
    pub dir: String,
    pub name: String,
    pub files: BTreeMap<String, String>,
}

pub fn read_device(dir: &Path) -> Option<Device> {
    let name = clean(&read_attr_bytes(&dir.join("name")).ok()?);
    let files = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with("power") || f.starts_with("energy") || f == "in1_label")
        .filter_map(|f| read_attr_bytes(&dir.join(&f)).ok().map(|b| (f, clean(&b))))
        .collect();
    Some(Device {
        dir: dir.file_name()?.to_string_lossy().into_owned(),
        name,
        files,
    })
}

pub fn read_devices(root: &Path) -> Result<Vec<Device>, Error> {
    let base = root.join(CLASS);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
        .map_err(|e| Error::Unavailable(format!("no hwmon under {}: {e}", base.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    Ok(dirs.iter().filter_map(|d| read_device(d)).collect())
}

/// An amdgpu on an APU: it reports the northbridge voltage (`in1_label` = vddnb, from
/// amdgpu_pm.c) or, lacking that file, no board power cap (discrete cards always have one).
pub fn is_apu(device: &Device) -> bool {
    device.files.get("in1_label").is_some_and(|l| l == "vddnb")
        || !device.files.contains_key("power1_cap")
}

/// The domain a device measures, or `None` for devices Wattbar does not read.
pub fn domain(device: &Device) -> Option<Domain> {
    match device.name.as_str() {
        "amdgpu" if is_apu(device) => Some(Domain::Soc),
        "amdgpu" | "i915" | "xe" | "nouveau" => Some(Domain::Gpu),
        "acpi_power_meter" => Some(Domain::System),
        _ => None,
    }
}

fn channels(device: &Device, kind: &str, suffix: &str) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = device
        .files
        .iter()
        .filter_map(|(f, v)| {
            let n = f.strip_prefix(kind)?.strip_suffix(suffix)?.parse().ok()?;
            Some((n, v.parse().ok()?))
        })
        .collect();
    out.sort();
    out
}

/// The device's instantaneous power: first channel with `_input`, else `_average`.
pub fn power(device: &Device) -> Option<Watts> {
    let inputs = channels(device, "power", "_input");
    let averages = channels(device, "power", "_average");
    let (_, uw) = inputs.first().or(averages.first())?;
    Some(Watts::from_microwatts(*uw as f64))
}

/// Energy counters `(channel, µJ)` in channel order.
pub fn energy_counters(device: &Device) -> Vec<(u32, u64)> {
    channels(device, "energy", "_input")
}

/// Limits (`powerN_cap`, `_max`, `_crit`) in watts, as state.
pub fn limits(device: &Device) -> serde_json::Map<String, serde_json::Value> {
    device
        .files
        .iter()
        .filter(|(f, _)| {
            f.starts_with("power")
                && (f.ends_with("_cap") || f.ends_with("_max") || f.ends_with("_crit"))
        })
        .filter_map(|(f, v)| {
            v.parse::<f64>()
                .ok()
                .map(|uw| (f.clone(), serde_json::json!(uw / 1e6)))
        })
        .collect()
}

/// Counter state kept between reads.
#[derive(Debug, Clone, Default)]
struct CounterState {
    first: u64,
    at: Duration,
    total: CounterTotal,
}

/// The hwmon source.
pub struct Hwmon {
    root: PathBuf,
    counters: HashMap<(String, u32), CounterState>,
    layout: Option<Layout>,
}

/// Reads between two full scans of `sys/class/hwmon`, which catch a GPU plugged in meanwhile.
const RESCAN_EVERY: u32 = 300;

/// The devices Wattbar reads, with the paths of their changing values (`*_input`, `*_average`):
/// labels and limits are read once, so a tick costs one read per value.
struct Layout {
    root: PathBuf,
    devices: Vec<(Device, Vec<(String, PathBuf)>)>,
    reads: u32,
}

impl Layout {
    fn discover(root: &Path) -> Result<(Layout, Vec<Device>), Error> {
        let devices: Vec<Device> = read_devices(root)?
            .into_iter()
            .filter(|d| domain(d).is_some())
            .collect();
        let base = root.join(CLASS);
        let layout = Layout {
            root: root.to_path_buf(),
            devices: devices
                .iter()
                .map(|d| {
                    let values = d
                        .files
                        .keys()
                        .filter(|f| f.ends_with("_input") || f.ends_with("_average"))
                        .map(|f| (f.clone(), base.join(&d.dir).join(f)))
                        .collect();
                    (d.clone(), values)
                })
                .collect(),
            reads: 0,
        };
        Ok((layout, devices))
    }

    fn read(&mut self) -> Option<Vec<Device>> {
        self.reads += 1;
        if self.reads >= RESCAN_EVERY {
            return None;
        }
        self.devices
            .iter()
            .map(|(device, values)| {
                let mut d = device.clone();
                for (file, path) in values {
                    d.files
                        .insert(file.clone(), clean(&read_attr_bytes(path).ok()?));
                }
                Some(d)
            })
            .collect()
    }
}

impl Hwmon {
    pub fn new(root: &Path) -> Self {
        Hwmon {
            root: root.to_path_buf(),
            counters: HashMap::new(),
            layout: None,
        }
    }

    /// Reads every device under `root` (the source's own, or another for `probe --then`).
    pub fn sample_root(&mut self, root: &Path, at: Stamp) -> Result<Sample, Error> {
        let cached = self
            .layout
            .as_mut()
            .filter(|l| l.root == root)
            .and_then(Layout::read);
        let devices = match cached {
            Some(devices) => devices,
            None => {
                let (layout, devices) = Layout::discover(root)?;
                self.layout = Some(layout);
                devices
            }
        };
        let mut sample = Sample::default();
        for device in &devices {
            let Some(domain) = domain(device) else {
                continue;
            };
            let limits = limits(device);
            if !limits.is_empty() {
                sample.state.insert(
                    format!("{}_limits_w", device.dir),
                    serde_json::Value::Object(limits),
                );
            }
            let reading = |watts: Option<Watts>, counter: Option<Joules>| Reading {
                domain,
                device: Some(format!("{}:{}", device.name, device.dir)),
                watts,
                energy_counter: counter,
                source: SOURCE_ID.to_string(),
                quality: Quality::Measured,
                at,
            };
            if let Some(w) = power(device) {
                sample.readings.push(reading(Some(w), None));
                continue;
            }
            let mut chosen = None;
            let mut waiting = None;
            for (ch, uj) in energy_counters(device) {
                let key = (device.dir.clone(), ch);
                let state = self.counters.entry(key).or_insert(CounterState {
                    first: uj,
                    at: at.monotonic,
                    total: CounterTotal::new(),
                });
                let seconds = at.monotonic.saturating_sub(state.at).as_secs_f64();
                let moved = uj != state.first;
                state.at = at.monotonic;
                let watts = state.total.update(
                    at.monotonic,
                    Joules::from_microjoules(uj as f64),
                    None,
                    MAX_DEVICE_WATTS,
                );
                let never_moved = uj == 0 || (seconds > 0.0 && !moved);
                if never_moved {
                    sample.state.insert(
                        format!("{}_energy{ch}", device.dir),
                        "unsupported: the counter never moves".into(),
                    );
                    continue;
                }
                if seconds == 0.0 {
                    waiting.get_or_insert((state.total.total(), ch));
                    continue;
                }
                if chosen.is_none() {
                    chosen = Some(reading(watts, state.total.total()));
                }
            }
            if let Some(r) = chosen {
                sample.readings.push(r);
            } else if let Some((total, _)) = waiting {
                sample.readings.push(reading(None, total));
            }
        }
        if sample.readings.is_empty() && sample.state.is_empty() {
            return Err(Error::Unavailable("no GPU or power meter in hwmon".into()));
        }
        Ok(sample)
    }
}

impl Source for Hwmon {
    fn id(&self) -> &str {
        SOURCE_ID
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let root = self.root.clone();
        Ok(self.sample_root(&root, at)?.readings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_device_still_reads_fresh_values_every_tick() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dev = root.path().join(CLASS).join("hwmon0");
        std::fs::create_dir_all(&dev).unwrap_or_else(|e| panic!("{e}"));
        let write =
            |f: &str, v: &str| std::fs::write(dev.join(f), v).unwrap_or_else(|e| panic!("{e}"));
        write("name", "xe\n");
        write("energy1_input", "1000000\n");
        let mut source = Hwmon::new(root.path());
        let at = |s: u64| Stamp::new(Duration::from_secs(s), s as f64);
        let first = source
            .sample_root(root.path(), at(0))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.readings[0].watts, None);
        write("energy1_input", "3000000\n");
        let second = source
            .sample_root(root.path(), at(1))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(second.readings[0].watts, Some(Watts(2.0)));
        write("energy1_input", "3500000\n");
        let third = source
            .sample_root(root.path(), at(2))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(third.readings[0].watts, Some(Watts(0.5)));
    }
}
