//! A setting a sweep turns, reached: read, listed, set.

use super::gpu::{GpuClock, GpuLimit};
use super::rapl::RaplLimit;
use crate::error::Error;
use crate::os_power::PowerMode;
use serde::{Deserialize, Serialize};

/// A setting a sweep may turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnobKind {
    /// The OS power profile: power-profiles-daemon's on Linux, Low Power Mode on macOS.
    Powermode,
    /// RAPL's package power limit (long-term), on Linux where it may be written.
    RaplLimit,
    /// An NVIDIA GPU's power limit, through NVML, as root.
    PowerLimit,
    /// An NVIDIA GPU's graphics clock, locked or not, through NVML, as root.
    Clocks,
}

impl KnobKind {
    /// What the setting is, in words.
    pub fn describe(self) -> &'static str {
        match self {
            KnobKind::Powermode => "the power profile",
            KnobKind::RaplLimit => "RAPL's package power limit",
            KnobKind::PowerLimit => "GPU 0's power limit",
            KnobKind::Clocks => "GPU 0's graphics clock",
        }
    }

    /// The name on the command line and in the journal.
    pub fn name(self) -> &'static str {
        match self {
            KnobKind::Powermode => "powermode",
            KnobKind::RaplLimit => "rapl-limit",
            KnobKind::PowerLimit => "power-limit",
            KnobKind::Clocks => "clocks",
        }
    }
}

/// A setting, reachable.
pub enum Knob {
    Powermode(PowerMode),
    RaplLimit(RaplLimit),
    PowerLimit(GpuLimit),
    Clocks(GpuClock),
}

impl Knob {
    /// The setting `kind` on this machine, found or said why not.
    pub async fn open(kind: KnobKind) -> Result<Knob, Error> {
        match kind {
            KnobKind::Powermode => Ok(Knob::Powermode(PowerMode::connect(None).await?)),
            KnobKind::RaplLimit => {
                let root = std::env::var_os(crate::setup::SYSFS_ROOT_ENV)
                    .map_or_else(|| std::path::PathBuf::from("/"), std::path::PathBuf::from);
                Ok(Knob::RaplLimit(RaplLimit::open(&root)?))
            }
            KnobKind::PowerLimit => Ok(Knob::PowerLimit(GpuLimit::open()?)),
            KnobKind::Clocks => Ok(Knob::Clocks(GpuClock::open()?)),
        }
    }

    pub fn kind(&self) -> KnobKind {
        match self {
            Knob::Powermode(_) => KnobKind::Powermode,
            Knob::RaplLimit(_) => KnobKind::RaplLimit,
            Knob::PowerLimit(_) => KnobKind::PowerLimit,
            Knob::Clocks(_) => KnobKind::Clocks,
        }
    }

    /// Its value now.
    pub async fn current(&self) -> Result<String, Error> {
        match self {
            Knob::Powermode(p) => p.current().await,
            Knob::RaplLimit(r) => r.current(),
            Knob::PowerLimit(g) => g.current(),
            Knob::Clocks(c) => c.current(),
        }
    }

    /// The values a sweep takes, in the order it takes them: the most power first.
    pub async fn steps(&self) -> Result<Vec<String>, Error> {
        match self {
            Knob::Powermode(p) => p.steps().await,
            Knob::RaplLimit(r) => r.steps(),
            Knob::PowerLimit(g) => g.steps(),
            Knob::Clocks(c) => c.steps(),
        }
    }

    pub async fn set(&self, value: &str) -> Result<(), Error> {
        match self {
            Knob::Powermode(p) => p.set(value).await,
            Knob::RaplLimit(r) => r.set(value),
            Knob::PowerLimit(g) => g.set(value),
            Knob::Clocks(c) => c.set(value),
        }
    }
}
