//! macmon: SMC system power and the IOReport CPU/GPU/ANE/DRAM breakdown, without root
//! (source `macmon`, measured).
//!
//! Rule: SMC `PSTR` is the whole-system figure, domain `system`. The live reader reads `PSTR`
//! itself, because macmon's `sys_power` is `max(PSTR, CPU + GPU + ANE)` and would turn an
//! unreadable PSTR into a component sum labelled "system"; `macmon pipe` lines only have that
//! `sys_power`, used as printed unless it equals `all_power` or less (then it is that clamp,
//! not PSTR, and left out); `cpu_power`, `gpu_power`, `ane_power` and `ram_power`
//! are domains cpu, gpu, ane and dram. `all_power` (CPU + GPU + ANE) is state only: the chain
//! sums parts itself.
//!
//! Absent is not zero: macmon reports 0.0 for a channel it cannot read (no SMC key, IOReport
//! zeros on macOS 26/M5), and a real channel idles at exactly 0 too. A channel is therefore
//! unavailable until it has once read non-zero ([`MacmonChannels`] keeps that flag per
//! channel); after that a 0 is a real idle reading. A single record read alone leaves its zeros
//! out.
//!
//! The reader (macOS) runs `macmon::Sampler` in a [`Background`](crate::background::Background) thread,
//! as its handles are not `Send`; [`parse_macmon_json`] reads the lines `macmon pipe` prints
//! (the same fields), so the logic is tested on a real capture anywhere.

use crate::error::Error;
use crate::sample::Sample;
use serde_json::{json, Map, Value};
use std::time::Duration;
use wattbar_core::{Domain, Quality, Reading, Stamp, Watts};

pub const SOURCE_ID: &str = "macmon";
/// The sampling window the reader asks macmon for until the engine sets its pace.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest window: IOReport deltas over less are mostly noise.
pub const MIN_WINDOW: Duration = Duration::from_millis(100);

/// macmon's power figures for one interval, in watts as macmon reports them (0 for unread).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MacmonSample {
    pub sys_power: Option<Watts>,
    pub cpu_power: Option<Watts>,
    pub gpu_power: Option<Watts>,
    pub ane_power: Option<Watts>,
    pub ram_power: Option<Watts>,
    pub all_power: Option<Watts>,
}

/// The channels that become readings, in output order.
const CHANNELS: [Domain; 5] = [
    Domain::System,
    Domain::Cpu,
    Domain::Gpu,
    Domain::Ane,
    Domain::Dram,
];

impl MacmonSample {
    fn channel(&self, domain: Domain) -> Option<Watts> {
        match domain {
            Domain::System => self.sys_power,
            Domain::Cpu => self.cpu_power,
            Domain::Gpu => self.gpu_power,
            Domain::Ane => self.ane_power,
            Domain::Dram => self.ram_power,
            _ => None,
        }
    }

    /// This record alone: zeros are left out, since nothing shows the channel ever moved.
    pub fn to_sample(&self, at: Stamp) -> Sample {
        MacmonChannels::default().to_sample(self, at)
    }

    /// `pstr`: the SMC key read directly, since `Metrics::sys_power` is raised to at least
    /// CPU + GPU + ANE and so reads as a "system" figure even when `PSTR` reads 0.
    #[cfg(target_os = "macos")]
    fn from_metrics(m: &::macmon::Metrics, pstr: Option<f32>) -> Self {
        let w = |v: f32| Some(Watts(f64::from(v)));
        MacmonSample {
            sys_power: pstr.and_then(w),
            cpu_power: w(m.cpu_power),
            gpu_power: w(m.gpu_power),
            ane_power: w(m.ane_power),
            ram_power: w(m.ram_power),
            all_power: w(m.all_power),
        }
    }
}

/// Which channels have ever read non-zero: the rest are unavailable, not 0 W.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MacmonChannels {
    seen_non_zero: [bool; CHANNELS.len()],
}

impl MacmonChannels {
    /// Readings for `sample`, updating the flags first; channels never seen moving are left out.
    pub fn readings(&mut self, sample: &MacmonSample, at: Stamp) -> Vec<Reading> {
        let mut out = Vec::new();
        for (i, domain) in CHANNELS.iter().enumerate() {
            let Some(w) = sample.channel(*domain).filter(|w| w.is_plausible()) else {
                continue;
            };
            if w.0 > 0.0 {
                self.seen_non_zero[i] = true;
            }
            if self.seen_non_zero[i] {
                out.push(Reading::power(*domain, w, SOURCE_ID, Quality::Measured, at));
            }
        }
        out
    }

    /// Channels not (yet) seen moving.
    pub fn unavailable(&self) -> Vec<Domain> {
        CHANNELS
            .iter()
            .zip(self.seen_non_zero)
            .filter(|(_, seen)| !seen)
            .map(|(d, _)| *d)
            .collect()
    }

    /// Readings plus state (`all_power_watts`, `unavailable_channels`).
    pub fn to_sample(&mut self, sample: &MacmonSample, at: Stamp) -> Sample {
        let readings = self.readings(sample, at);
        let mut state = Map::new();
        if let Some(all) = sample.all_power.filter(|w| w.is_plausible()) {
            state.insert("all_power_watts".into(), json!(all.0));
        }
        state.insert(
            "unavailable_channels".into(),
            Value::Array(
                self.unavailable()
                    .into_iter()
                    .map(|d| json!(d.as_str()))
                    .collect(),
            ),
        );
        Sample { readings, state }
    }
}

fn parse_err(line: usize, message: impl Into<String>) -> Error {
    Error::Parse {
        what: "macmon pipe",
        line: Some(line),
        message: message.into(),
    }
}

/// Parses `macmon pipe` output: one JSON object per line, one [`MacmonSample`] each.
pub fn parse_macmon_json(text: &str) -> Result<Vec<MacmonSample>, Error> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| parse_err(i + 1, e.to_string()))?;
        let obj = v
            .as_object()
            .ok_or_else(|| parse_err(i + 1, "not a JSON object"))?;
        let field = |k: &str| -> Result<Option<Watts>, Error> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x
                    .as_f64()
                    .map(|w| Some(Watts(w)))
                    .ok_or_else(|| parse_err(i + 1, format!("{k} {x} is not a number"))),
            }
        };
        let all_power = field("all_power")?;
        // macmon prints max(PSTR, all_power): a value at the clamp is the parts' sum.
        let sys_power = field("sys_power")?
            .filter(|sys| all_power.is_none_or(|all| all.0 <= 0.0 || sys.0 > all.0));
        let sample = MacmonSample {
            sys_power,
            cpu_power: field("cpu_power")?,
            gpu_power: field("gpu_power")?,
            ane_power: field("ane_power")?,
            ram_power: field("ram_power")?,
            all_power,
        };
        if sample.sys_power.is_none() && sample.cpu_power.is_none() {
            return Err(parse_err(
                i + 1,
                "neither sys_power nor cpu_power: not macmon output",
            ));
        }
        out.push(sample);
    }
    if out.is_empty() {
        return Err(parse_err(1, "no samples"));
    }
    Ok(out)
}

/// The window macmon samples over for an engine pace of `interval`, in ms.
pub fn window_ms(interval: Duration) -> u32 {
    u32::try_from(interval.max(MIN_WINDOW).as_millis()).unwrap_or(u32::MAX)
}

/// macmon as a [`Source`](wattbar_core::Source): its sampler runs in a background thread, each
/// window as long as the engine's interval, and only while the chain reads it.
#[cfg(target_os = "macos")]
pub struct MacmonSource {
    worker: crate::background::Background<MacmonSample>,
    channels: MacmonChannels,
    window_ms: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

#[cfg(target_os = "macos")]
impl MacmonSource {
    pub fn new(interval: Duration) -> Self {
        let window = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(window_ms(interval)));
        let window_ms = std::sync::Arc::clone(&window);
        let worker = crate::background::Background::spawn(
            SOURCE_ID,
            crate::background::STALE_AFTER,
            move || {
                let mut sampler = ::macmon::Sampler::new().map_err(|e| {
                    Error::Unavailable(format!(
                        "macmon cannot open SMC/IOReport (Apple Silicon only): {e}"
                    ))
                })?;
                // A second SMC connection of our own, to read PSTR as it is (see `from_metrics`).
                let mut smc = ::macmon::sources::SMC::new().ok();
                Ok(move || {
                    let ms = window.load(std::sync::atomic::Ordering::Relaxed);
                    let metrics = sampler
                        .get_metrics(ms)
                        .map_err(|e| Error::Transient(format!("macmon: {e}")))?;
                    let pstr = smc.as_mut().and_then(|s| s.read_float_val("PSTR").ok());
                    Ok(MacmonSample::from_metrics(&metrics, pstr))
                })
            },
        );
        MacmonSource {
            worker,
            channels: MacmonChannels::default(),
            window_ms,
        }
    }
}

#[cfg(target_os = "macos")]
impl wattbar_core::Source for MacmonSource {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let sample = *self.worker.latest(at)?;
        let readings = self.channels.readings(&sample, at);
        if readings.is_empty() {
            return Err(Error::Transient(
                "macmon has read only zeros so far: no channel is known to work".into(),
            )
            .into());
        }
        Ok(readings)
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&CHANNELS)
    }

    fn pace(&mut self, interval: Duration) {
        self.window_ms
            .store(window_ms(interval), std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watts(s: &Sample, d: Domain) -> Option<f64> {
        s.readings
            .iter()
            .find(|r| r.domain == d)
            .and_then(|r| r.watts)
            .map(|w| w.0)
    }

    #[test]
    fn a_channel_that_never_moves_is_unavailable_not_zero_watts() {
        let zeros = MacmonSample {
            sys_power: Some(Watts(0.0)),
            cpu_power: Some(Watts(0.0)),
            gpu_power: Some(Watts(0.0)),
            ane_power: Some(Watts(0.0)),
            ram_power: Some(Watts(0.0)),
            all_power: Some(Watts(0.0)),
        };
        let mut ch = MacmonChannels::default();
        assert!(ch.readings(&zeros, Stamp::default()).is_empty());
        assert_eq!(ch.unavailable().len(), 5);

        let gpu_moves = MacmonSample {
            gpu_power: Some(Watts(0.5)),
            ..zeros
        };
        let s = ch.to_sample(&gpu_moves, Stamp::default());
        assert_eq!(watts(&s, Domain::Gpu), Some(0.5));
        assert_eq!(watts(&s, Domain::Cpu), None);
        // Once the GPU has moved, its idle 0 W is a real reading.
        let s = ch.to_sample(&zeros, Stamp::default());
        assert_eq!(watts(&s, Domain::Gpu), Some(0.0));
        assert_eq!(
            s.state["unavailable_channels"],
            json!(["system", "cpu", "ane", "dram"])
        );
    }

    #[test]
    fn a_pipe_sys_power_at_the_parts_sum_is_not_taken_for_pstr() {
        let s = parse_macmon_json(
            "{\"sys_power\":0.5,\"all_power\":0.5,\"cpu_power\":0.5}\n\
             {\"sys_power\":9.0,\"all_power\":0.5,\"cpu_power\":0.5}\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s[0].sys_power, None);
        assert_eq!(s[1].sys_power, Some(Watts(9.0)));
    }

    #[test]
    fn garbage_is_a_parse_error() {
        assert!(parse_macmon_json("").is_err());
        assert!(parse_macmon_json("{\"temp\":{}}\n").is_err());
        assert!(parse_macmon_json("[1,2]\n").is_err());
        assert!(parse_macmon_json("{\"sys_power\":\"lots\"}\n").is_err());
        assert!(parse_macmon_json("{\"sys_power\":1.0\n").is_err());
    }
}
