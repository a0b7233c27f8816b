//! Readings: one value from one source, with where it came from and how far to trust it.
//!
//! Absent is not zero: a reading that is not a measurement has `watts: None`, and a source that
//! cannot read at all returns an [`Error`] with its reason instead of a reading.

use crate::error::Error;
use crate::units::{Joules, Watts};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// What part of the machine a reading covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// The whole machine.
    System,
    Cpu,
    Gpu,
    /// Apple Neural Engine.
    Ane,
    Dram,
    Soc,
    /// Power into (charging) the battery.
    Battery,
    /// Power drawn from the mains adapter.
    Adapter,
    /// A platform-wide figure such as RAPL `psys`.
    Platform,
    /// AC input at the socket, from a smart plug: beside the machine's own sensors, never
    /// summed with them.
    Wall,
}

impl Domain {
    /// Every domain, in the order above.
    pub const ALL: [Domain; 10] = [
        Domain::System,
        Domain::Cpu,
        Domain::Gpu,
        Domain::Ane,
        Domain::Dram,
        Domain::Soc,
        Domain::Battery,
        Domain::Adapter,
        Domain::Platform,
        Domain::Wall,
    ];

    /// The domain named `name` (as [`Domain::as_str`] writes it).
    pub fn named(name: &str) -> Option<Domain> {
        Domain::ALL.into_iter().find(|d| d.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Domain::System => "system",
            Domain::Cpu => "cpu",
            Domain::Gpu => "gpu",
            Domain::Ane => "ane",
            Domain::Dram => "dram",
            Domain::Soc => "soc",
            Domain::Battery => "battery",
            Domain::Adapter => "adapter",
            Domain::Platform => "platform",
            Domain::Wall => "wall",
        }
    }

    /// Domains that are parts of the machine's draw and may be summed into a system figure
    /// (never together with a whole-system reading, and never battery or adapter power).
    pub fn is_component(self) -> bool {
        matches!(self, Domain::Cpu | Domain::Gpu | Domain::Ane | Domain::Dram)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a battery source says about the machine's supply.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Battery {
    /// True when no adapter is supplying the machine.
    pub on_battery: bool,
    /// State of charge, 0–100, when known.
    pub percent: Option<f64>,
}

/// How far a value can be trusted. Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quality {
    /// Read from a hardware sensor or energy counter.
    Measured,
    /// The machine's own sensors mapped onto a whole-machine reference (a plug, a battery) that
    /// was measured beside them and is gone now: a line learned on this machine, with a bound
    /// from its held-out error ([`crate::calibration`]).
    Calibrated,
    /// Computed from a model of the hardware (e.g. CPU utilisation × a power model).
    Estimated,
    /// A rule of thumb (e.g. the size of the loaded model).
    Heuristic,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Measured => "measured",
            Quality::Calibrated => "calibrated",
            Quality::Estimated => "estimated",
            Quality::Heuristic => "heuristic",
        }
    }
}

impl fmt::Display for Quality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When something happened. The engine reads its clocks once per sample and passes this in.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
pub struct Stamp {
    /// Monotonic time since an origin the engine chose; integration uses only this.
    #[serde(with = "duration_secs")]
    pub monotonic: Duration,
    /// Wall-clock time, seconds since the Unix epoch; for display and storage only.
    pub unix_seconds: f64,
}

impl Stamp {
    pub fn new(monotonic: Duration, unix_seconds: f64) -> Self {
        Stamp {
            monotonic,
            unix_seconds,
        }
    }
}

mod duration_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

/// One value from one source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub domain: Domain,
    /// Which device within the domain (`"0"` for GPU 0, `"package-1"`), when there are several.
    pub device: Option<String>,
    /// Power now; `None` when this reading is not a power measurement.
    pub watts: Option<Watts>,
    /// A monotonically increasing hardware energy counter, when the source has one.
    pub energy_counter: Option<Joules>,
    /// Stable id of the source, e.g. `cpu-proxy`, `rapl`, `nvml`.
    pub source: String,
    pub quality: Quality,
    pub at: Stamp,
}

impl Reading {
    pub fn power(
        domain: Domain,
        watts: Watts,
        source: impl Into<String>,
        quality: Quality,
        at: Stamp,
    ) -> Self {
        Reading {
            domain,
            device: None,
            watts: Some(watts),
            energy_counter: None,
            source: source.into(),
            quality,
            at,
        }
    }

    pub fn with_device(mut self, device: impl Into<String>) -> Self {
        self.device = Some(device.into());
        self
    }
}

/// A power source. Each sample the chain calls [`Source::read`] with the time of the sample.
pub trait Source: Send {
    /// Stable id, shown to the user next to every value this source produced.
    fn id(&self) -> &str;
    /// The best quality this source can give; the chain asks better sources first.
    fn quality(&self) -> Quality;
    /// Read now. `Err(Unavailable)` means "never on this machine, and here is why";
    /// `Err(Transient)` means "not this time".
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, Error>;
    /// The shortest useful interval between reads, when the hardware updates slower than some
    /// intervals a person may choose (NVML's energy counter, for one).
    fn min_interval(&self) -> Option<Duration> {
        None
    }
    /// How often this source can give a new value, where that is slower than the sampler may
    /// read it (a plug answers about once a second): between two answers its energy is
    /// interpolated, not measured, and the bound of any window says so. `None`: every read is a
    /// new measurement.
    fn answer_period(&self) -> Option<Duration> {
        None
    }
    /// The supply state seen by the last successful read, for sources that watch a battery.
    fn battery(&self) -> Option<Battery> {
        None
    }
    /// Each battery's health as the last successful read saw it, for sources that watch a
    /// battery; the same `Arc` until a figure changes, so that readers can tell news cheaply.
    fn battery_health(&self) -> Option<std::sync::Arc<[crate::battery::Health]>> {
        None
    }
    /// The domains this source can give, when it knows before its first read. The chain leaves
    /// a source unread while better ones cover all of them; `None` means "read me to find out".
    fn domains(&self) -> Option<&'static [Domain]> {
        None
    }
    /// The engine samples every `interval` now: a source that samples in a thread of its own
    /// follows it instead of running faster than anyone reads.
    fn pace(&mut self, _interval: Duration) {}
    /// What the last read saw beyond its readings (a GPU's utilisation and memory, NVML's own
    /// power fields), for `wattbar-cli sources` to show; never part of the energy.
    fn details(&self) -> Option<serde_json::Value> {
        None
    }
    /// Each process's use of the devices this source meters since the last call (a GPU's
    /// per-process utilisation), for energy per program; empty where it cannot tell. Asked
    /// every few seconds, not at every read.
    fn process_use(&mut self) -> Vec<crate::programs::DeviceUse> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quality_orders_measured_before_estimated_before_heuristic() {
        assert!(Quality::Measured < Quality::Estimated);
        assert!(Quality::Estimated < Quality::Heuristic);
    }

    #[test]
    fn readings_serialise_with_lowercase_labels() {
        let r = Reading::power(
            Domain::Cpu,
            Watts(12.5),
            "cpu-proxy",
            Quality::Estimated,
            Stamp::new(Duration::from_secs(3), 1_700_000_000.0),
        );
        let v = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(v["domain"], "cpu");
        assert_eq!(v["quality"], "estimated");
        assert_eq!(v["watts"], 12.5);
        assert_eq!(v["at"]["monotonic"], 3.0);
    }
}
