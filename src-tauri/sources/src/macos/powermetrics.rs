//! `powermetrics`: Apple's own per-component power figures (source `powermetrics`, measured,
//! root only).
//!
//! Input, detected by [`parse_powermetrics`]: a `-f plist` stream (records separated by NUL
//! bytes; a single record may have none) or the text format (records start with
//! `*** Sampled system activity`). One [`PowerRecord`] per record.
//!
//! Plist rule: watts = `processor.<x>_energy` mJ ÷ `elapsed_ns` for cpu, gpu, ane (and dram when
//! present); `<x>_power` mW only where the energy is missing. `processor.combined_power` is
//! CPU + GPU + ANE. The `gpu` dictionary's own `gpu_energy` belongs to the GPU sampler's window
//! and is not used (it disagrees with `processor.gpu_power`).
//!
//! Text rule: `CPU Power`, `GPU Power`, `ANE Power`, `DRAM Power` (mW); `GPU Power` is printed
//! twice per record (processor and GPU blocks): the first wins, never the sum. macOS 12 has no
//! `Combined Power` line but a `Package Power` (the SoC, DRAM included), domain `soc`. Intel
//! Macs print `Intel energy model derived package power (CPUs+GT+SA): 8.53W`: the CPU package
//! with its iGPU and system agent, domain `cpu`.
//!
//! None of these is a whole-system figure, so this source never emits domain `system`;
//! `Combined Power` is state (`combined_watts`), as the chain sums the parts itself.

use crate::error::Error;
use crate::sample::Sample;
use serde_json::{json, Map};
use std::time::Duration;
use wattbar_core::{Domain, Quality, Reading, Stamp, Watts};

pub const SOURCE_ID: &str = "powermetrics";
/// Sampling interval the reader asks `powermetrics` for.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// What one powermetrics record says about power.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PowerRecord {
    /// The record's sampling interval.
    pub elapsed: Option<Duration>,
    pub machine_model: Option<String>,
    pub cpu: Option<Watts>,
    pub gpu: Option<Watts>,
    pub ane: Option<Watts>,
    pub dram: Option<Watts>,
    /// `Combined Power (CPU + GPU + ANE)` / `combined_power`.
    pub combined: Option<Watts>,
    /// macOS 12 `Package Power`: the SoC, DRAM included.
    pub package: Option<Watts>,
    /// Intel `derived package power (CPUs+GT+SA)`.
    pub intel_package: Option<Watts>,
}

impl PowerRecord {
    pub fn to_sample(&self, at: Stamp) -> Sample {
        let mut readings = Vec::new();
        let mut push = |domain, w: Option<Watts>| {
            if let Some(w) = w.filter(|w| w.is_plausible()) {
                readings.push(Reading::power(domain, w, SOURCE_ID, Quality::Measured, at));
            }
        };
        push(Domain::Cpu, self.cpu.or(self.intel_package));
        push(Domain::Gpu, self.gpu);
        push(Domain::Ane, self.ane);
        push(Domain::Dram, self.dram);
        push(Domain::Soc, self.package);

        let mut state = Map::new();
        if let Some(e) = self.elapsed {
            state.insert("elapsed_s".into(), json!(e.as_secs_f64()));
        }
        if let Some(m) = &self.machine_model {
            state.insert("machine_model".into(), json!(m));
        }
        if let Some(c) = self.combined {
            state.insert("combined_watts".into(), json!(c.0));
        }
        Sample { readings, state }
    }
}

fn parse_err(line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        what: "powermetrics",
        line,
        message: message.into(),
    }
}

/// Parses powermetrics output, plist stream or text (detected), into one record per sample.
pub fn parse_powermetrics(text: &str) -> Result<Vec<PowerRecord>, Error> {
    let t = text.trim_start_matches(|c: char| c == '\0' || c.is_whitespace());
    let records = if t.starts_with("<?xml") || t.starts_with("<plist") {
        parse_plist_stream(t)?
    } else {
        parse_text(text)?
    };
    if records.is_empty() {
        return Err(parse_err(None, "no sample records"));
    }
    Ok(records)
}

fn parse_plist_stream(text: &str) -> Result<Vec<PowerRecord>, Error> {
    text.split('\0')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .enumerate()
        .map(|(i, r)| {
            parse_plist_record(r).map_err(|m| parse_err(None, format!("record {}: {m}", i + 1)))
        })
        .collect()
}

fn parse_plist_record(text: &str) -> Result<PowerRecord, String> {
    // The plist crate builds without recursion but drops its tree recursively.
    super::plist_xml::check_nesting(text)?;
    let value =
        plist::Value::from_reader_xml(text.as_bytes()).map_err(|e| format!("bad plist: {e}"))?;
    let root = value
        .as_dictionary()
        .ok_or("the record is not a dictionary")?;
    let elapsed_ns = root
        .get("elapsed_ns")
        .and_then(plist::Value::as_unsigned_integer)
        .filter(|ns| *ns > 0);
    let processor = root
        .get("processor")
        .and_then(plist::Value::as_dictionary)
        .ok_or("no `processor` dictionary (run with --samplers cpu_power)")?;
    let number = |key: &str| {
        processor.get(key).and_then(|v| match v {
            plist::Value::Integer(i) => i.as_signed().map(|i| i as f64),
            plist::Value::Real(r) => Some(*r),
            _ => None,
        })
    };
    // mJ over ns: mJ / (ns / 1e9) = mW; ÷ 1e3 for W.
    let watts = |name: &str| {
        let from_energy = elapsed_ns.and_then(|ns| {
            number(&format!("{name}_energy")).map(|mj| Watts(mj / (ns as f64 / 1e9) / 1e3))
        });
        from_energy.or_else(|| number(&format!("{name}_power")).map(Watts::from_milliwatts))
    };
    Ok(PowerRecord {
        elapsed: elapsed_ns.map(Duration::from_nanos),
        machine_model: root
            .get("hw_model")
            .and_then(plist::Value::as_string)
            .map(str::to_string),
        cpu: watts("cpu"),
        gpu: watts("gpu"),
        ane: watts("ane"),
        dram: watts("dram"),
        combined: number("combined_power").map(Watts::from_milliwatts),
        package: None,
        intel_package: None,
    })
}

/// `37 mW`, `8.53W`, `1.2 W` → watts.
fn power_value(s: &str) -> Option<Watts> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("mW") {
        (n, 1e-3)
    } else {
        (s.strip_suffix('W')?, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| Watts(v * scale))
}

/// `(1015.86ms elapsed)` in a record header.
fn elapsed_of(header: &str) -> Option<Duration> {
    let before = header.split("ms elapsed)").next()?;
    let num = before.rsplit('(').next()?;
    num.trim()
        .parse::<f64>()
        .ok()
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1e3).ok())
}

fn parse_text(text: &str) -> Result<Vec<PowerRecord>, Error> {
    let mut model: Option<String> = None;
    let mut records: Vec<PowerRecord> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(m) = line.strip_prefix("Machine model:") {
            model = Some(m.trim().to_string());
            continue;
        }
        if line.starts_with("*** Sampled system activity") {
            records.push(PowerRecord {
                elapsed: elapsed_of(line),
                machine_model: model.clone(),
                ..PowerRecord::default()
            });
            continue;
        }
        let Some((label, value)) = line.split_once(':') else {
            continue;
        };
        let Some(record) = records.last_mut() else {
            continue;
        };
        let field = match label {
            "CPU Power" => &mut record.cpu,
            "GPU Power" => &mut record.gpu,
            "ANE Power" => &mut record.ane,
            "DRAM Power" => &mut record.dram,
            "Package Power" => &mut record.package,
            "Combined Power (CPU + GPU + ANE)" => &mut record.combined,
            "Intel energy model derived package power (CPUs+GT+SA)" => &mut record.intel_package,
            _ => continue,
        };
        let w = power_value(value).ok_or_else(|| {
            parse_err(
                Some(i + 1),
                format!("{label}: {:?} is not a power", value.trim()),
            )
        })?;
        // GPU Power appears in the processor block and again in the GPU block: keep the first.
        if field.is_none() {
            *field = Some(w);
        }
    }
    Ok(records)
}

/// Whether this process runs as root (powermetrics refuses otherwise).
#[cfg(target_os = "macos")]
fn is_root() -> Result<bool, Error> {
    Ok(super::command::run_command("id", &["-u"])?.trim() == "0")
}

/// Runs `powermetrics` once for `interval` and parses its plist record.
#[cfg(target_os = "macos")]
pub fn read_powermetrics(interval: Duration) -> Result<PowerRecord, Error> {
    let ms = interval.as_millis().max(100).to_string();
    let out = super::command::run_command(
        "powermetrics",
        &[
            "-f",
            "plist",
            "-i",
            &ms,
            "-n",
            "1",
            "--samplers",
            "cpu_power,gpu_power,ane_power",
        ],
    )?;
    parse_powermetrics(&out)?
        .pop()
        .ok_or_else(|| Error::Transient("powermetrics printed no record".into()))
}

/// powermetrics as a [`Source`](wattbar_core::Source); it samples in a background thread.
#[cfg(target_os = "macos")]
pub struct PowermetricsSource {
    interval: Duration,
    worker: Option<crate::background::Background<PowerRecord>>,
}

#[cfg(target_os = "macos")]
impl PowermetricsSource {
    pub fn new(interval: Duration) -> Self {
        PowermetricsSource {
            interval,
            worker: None,
        }
    }
}

#[cfg(target_os = "macos")]
impl wattbar_core::Source for PowermetricsSource {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[
            Domain::Cpu,
            Domain::Gpu,
            Domain::Ane,
            Domain::Dram,
            Domain::Soc,
        ])
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        if self.worker.is_none() {
            if !is_root()? {
                return Err(Error::Unavailable(
                    "powermetrics needs root: run Wattbar with sudo to use it; the macmon \
                     source gives the same breakdown without root"
                        .into(),
                )
                .into());
            }
            let interval = self.interval;
            self.worker = Some(crate::background::Background::spawn(
                SOURCE_ID,
                crate::background::STALE_AFTER,
                move || Ok(move || read_powermetrics(interval)),
            ));
        }
        match self.worker.as_mut() {
            Some(w) => Ok(w.latest(at)?.to_sample(at).readings),
            None => Err(Error::Transient("powermetrics has not started".into()).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Vec<PowerRecord> {
        parse_powermetrics(text).unwrap_or_else(|e| panic!("{e}"))
    }

    const PLIST_RECORD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\">\n<dict>\n<key>elapsed_ns</key><integer>500000000</integer>\n<key>processor</key>\n<dict>\n<key>cpu_energy</key><integer>1000</integer>\n<key>cpu_power</key><real>1999</real>\n<key>gpu_power</key><real>250</real>\n<key>dram_energy</key><integer>100</integer>\n<key>combined_power</key><real>2250</real>\n</dict>\n</dict>\n</plist>\n";

    #[test]
    fn energy_over_elapsed_wins_over_the_printed_power() {
        let r = &records(PLIST_RECORD)[0];
        // 1000 mJ over 0.5 s = 2 W, not the printed 1.999 W.
        assert_eq!(r.cpu, Some(Watts(2.0)));
        // No gpu_energy: the printed 250 mW.
        assert_eq!(r.gpu, Some(Watts(0.25)));
        // DRAM is read when present: 100 mJ / 0.5 s.
        assert_eq!(r.dram, Some(Watts(0.2)));
        assert_eq!(r.ane, None);
        assert_eq!(r.combined, Some(Watts(2.25)));
    }

    #[test]
    fn a_nul_separated_stream_gives_one_record_each() {
        let stream = format!("{PLIST_RECORD}\0{PLIST_RECORD}\0");
        assert_eq!(records(&stream).len(), 2);
    }

    #[test]
    fn gpu_power_printed_twice_is_counted_once() {
        let text = "*** Sampled system activity (x) (1000.00ms elapsed) ***\n\
                    CPU Power: 37 mW\nGPU Power: 3 mW\n**** GPU usage ****\nGPU Power: 5 mW\n";
        let r = &records(text)[0];
        assert_eq!(r.gpu, Some(Watts(0.003)));
        assert_eq!(r.elapsed, Some(Duration::from_secs(1)));
        let s = r.to_sample(Stamp::default());
        assert_eq!(
            s.readings
                .iter()
                .filter(|r| r.domain == Domain::Gpu)
                .count(),
            1
        );
        assert!(s.readings.iter().all(|r| r.domain != Domain::System));
    }

    #[test]
    fn garbage_is_a_parse_error() {
        assert!(parse_powermetrics("").is_err());
        assert!(parse_powermetrics("Machine model: Mac\n").is_err());
        assert!(
            parse_powermetrics("*** Sampled system activity (1ms elapsed)\nCPU Power: lots\n")
                .is_err()
        );
        assert!(parse_powermetrics("<?xml version=\"1.0\"?><plist><dict></dict></plist>").is_err());
    }
}
