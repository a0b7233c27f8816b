//! The sampler chain: asks sources from most to least trustworthy and builds one [`Snapshot`].
//!
//! Headline policy:
//! 0. the wall meter (a smart plug) while it reads: the socket is the whole machine, its power
//!    supply's loss included. When it stops, the headline falls back to the rules below in the
//!    same sample;
//! 1. the first whole-system reading (domain `system`) from the most trusted source that has one
//!    (e.g. SMC system power, then battery `SystemLoad`, then battery V×I while discharging);
//! 2. otherwise a platform-wide reading (RAPL `psys`);
//! 3. otherwise the sum of component readings (CPU, GPU, ANE, DRAM). Each domain comes whole from
//!    the most trusted source that reported it (RAPL's packages, not RAPL plus the CPU proxy), so
//!    nothing is counted twice. The sum is as good as its worst part;
//! 4. otherwise no headline: absent, never 0 W.
//!
//! A candidate of better quality beats the order above: measured parts beat a heuristic
//! whole-system guess.
//!
//! Ownership: each domain is owned by the most trusted source that gave it a usable reading, and
//! each of that source's devices in the domain counts once. The snapshot carries that choice
//! ([`Snapshot::owners`], [`Snapshot::headline_parts`]) so that energy metering counts exactly
//! what the headline shows, never a domain twice (RAPL plus the CPU estimate, NVML plus the
//! Ollama heuristic).
//!
//! Reading: a source is read only when it could add something to the snapshot; better sources
//! that cover what it gives leave it standing by ([`pace`] has the rules and the counters). A
//! source that answers `Unavailable` is not asked again; its reason stays in every snapshot. A
//! `Transient` failure is listed, and the source is asked again, sooner or later ([`pace`]).
//!
//! A measured reading whose counter stops while the machine is busy is left out as stalled, so
//! its domain falls to the next source until it moves again ([`stall`] has the rule).

mod pace;
pub mod part;
mod select;
pub mod stall;
#[cfg(test)]
mod tests;

pub use pace::{is_consumption, ReadCounter, SLOW_PACE};
pub use part::Part;
pub use select::{headline, owners};
pub use stall::Stalled;

use crate::error::Error;
use crate::reading::Battery;
use crate::reading::{Domain, Quality, Reading, Source, Stamp};
use crate::units::Watts;
use pace::Pace;
use select::{components_headline, headline_with_parts, sensors_headline, usable};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// A source that gave nothing this sample, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unavailable {
    pub source: String,
    pub reason: String,
    /// False when the source failed only this time and will be asked again.
    pub permanent: bool,
}

/// What `wattbar-cli sources` prints for one source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    pub id: String,
    pub quality: Quality,
    pub available: bool,
    pub reason: Option<String>,
    /// Readings it gave in the snapshot.
    pub readings: usize,
    /// Left unread in normal sampling: better sources gave everything it would.
    #[serde(default)]
    pub standby: bool,
    /// What the source saw beyond its readings, where it says (see [`Source::details`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// Everything known about the machine's power at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub at: Stamp,
    /// Whole-system power, if any source (or sum of sources) could give it.
    pub headline: Option<Reading>,
    /// Every reading of this sample, best source first.
    pub breakdown: Vec<Reading>,
    pub unavailable: Vec<Unavailable>,
    /// Readings left out because their counter stopped while the machine was busy ([`stall`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalled: Vec<Stalled>,
    /// The supply as the first battery-aware source saw it; `None` without a battery source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery: Option<Battery>,
    /// Each battery's health, from the same source as [`Snapshot::battery`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery_health: Option<std::sync::Arc<[crate::battery::Health]>>,
    /// The readings that count, one per (domain, device), from each domain's owner.
    #[serde(default)]
    pub owners: Vec<Part>,
    /// What the headline is made of: one whole-system reading, or the parts of a sum.
    #[serde(default)]
    pub headline_parts: Vec<Part>,
    /// The longest [`Source::answer_period`] among the headline's parts: its energy between
    /// samples closer than this is interpolated between the device's answers. `None`: every
    /// sample is a new measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_period_seconds: Option<f64>,
}

impl Snapshot {
    /// A snapshot of `readings` (best source first) with the headline and owners the chain
    /// would choose.
    pub fn of(at: Stamp, breakdown: Vec<Reading>) -> Snapshot {
        let owners = owners(&breakdown);
        let (headline, headline_parts) = match headline_with_parts(&breakdown, &owners, at) {
            Some((h, parts)) => (Some(h), parts),
            None => (None, Vec::new()),
        };
        Snapshot {
            at,
            headline,
            breakdown,
            unavailable: Vec::new(),
            stalled: Vec::new(),
            battery: None,
            battery_health: None,
            owners,
            headline_parts,
            answer_period_seconds: None,
        }
    }

    pub fn headline_watts(&self) -> Option<Watts> {
        self.headline.as_ref().and_then(|r| r.watts)
    }

    /// The wall meter's watts, while it reads.
    pub fn wall_watts(&self) -> Option<Watts> {
        self.breakdown
            .iter()
            .find(|r| r.domain == Domain::Wall && self.owners.iter().any(|p| p.is(r)))
            .and_then(|r| r.watts)
    }

    /// The headline the machine's own sensors give (the wall meter left out) and what it covers:
    /// the headline itself without a plug, the figure a plug is compared with beside one.
    pub fn sensors(&self) -> Option<(Watts, crate::scope::Coverage)> {
        let (reading, parts) = sensors_headline(&self.breakdown, &self.owners, self.at)?;
        Some((reading.watts?, crate::scope::Coverage::of_parts(&parts)?))
    }

    /// The wall meter's watts and the sensors' (with what they cover), while both read: what
    /// the sensors miss is the difference.
    pub fn wall_and_sensors(&self) -> Option<(Watts, Watts, crate::scope::Coverage)> {
        let wall = self.wall_watts()?;
        let (sensors, coverage) = self.sensors()?;
        Some((wall, sensors, coverage))
    }

    /// The sum of the machine's parts and what it covers, whatever the headline is.
    pub fn components(&self) -> Option<(Watts, crate::scope::Coverage)> {
        let (reading, parts) = components_headline(&self.breakdown, &self.owners, self.at)?;
        Some((reading.watts?, crate::scope::Coverage::of_parts(&parts)?))
    }

    /// A measured figure of the whole machine beside its parts, and its scope: the wall meter's,
    /// else a measured whole-system reading (battery discharge, SMC, RAPL `psys`). What
    /// calibration learns the parts against.
    pub fn reference(&self) -> Option<(Watts, crate::scope::Scope)> {
        if let Some(w) = self.wall_watts() {
            return Some((w, crate::scope::Scope::Wall));
        }
        self.breakdown
            .iter()
            .filter(|r| matches!(r.domain, Domain::System | Domain::Platform))
            .filter(|r| r.quality == Quality::Measured && self.owners.iter().any(|p| p.is(r)))
            .find_map(|r| r.watts.filter(|w| w.is_plausible()))
            .map(|w| (w, crate::scope::Scope::System))
    }

    /// What the headline covers; `None` without a headline.
    pub fn coverage(&self) -> Option<crate::scope::Coverage> {
        self.headline.as_ref()?;
        crate::scope::Coverage::of_parts(&self.headline_parts)
    }

    /// The reading of `part` in this snapshot.
    pub fn reading(&self, part: &Part) -> Option<&Reading> {
        self.breakdown.iter().find(|r| part.is(r))
    }
}

struct Slot {
    source: Box<dyn Source>,
    gone: Option<String>,
    pace: Pace,
}

/// A monotonic stopwatch for timing reads; core has no clock of its own.
pub type Timer = Box<dyn Fn() -> Duration + Send>;

/// Sources in priority order.
pub struct Chain {
    slots: Vec<Slot>,
    counters: Arc<[ReadCounter]>,
    /// The counters of sources taken out, kept so that one set again counts on from them.
    retired: Vec<ReadCounter>,
    timer: Option<Timer>,
    stalls: stall::StallWatch,
}

impl Chain {
    /// Sources are sorted by their quality, best first; equal qualities keep the given order.
    pub fn new(mut sources: Vec<Box<dyn Source>>) -> Self {
        sources.sort_by_key(|s| s.quality());
        let counters = sources.iter().map(|s| ReadCounter::new(s.id())).collect();
        Chain {
            slots: sources
                .into_iter()
                .map(|source| Slot {
                    source,
                    gone: None,
                    pace: Pace::default(),
                })
                .collect(),
            counters,
            retired: Vec::new(),
            timer: None,
            stalls: stall::StallWatch::default(),
        }
    }

    /// Puts `source` in the place of the source with the same id, or adds it after the sources
    /// of its quality or better; `None` takes that source out. What was counted of its reads
    /// goes on (a counter never goes back).
    pub fn set_source(&mut self, id: &str, source: Option<Box<dyn Source>>) {
        let at = self.slots.iter().position(|s| s.source.id() == id);
        let mut counters: Vec<ReadCounter> =
            self.counters.iter().map(ReadCounter::carried).collect();
        match (at, source) {
            (Some(i), Some(source)) => {
                self.slots[i] = Slot {
                    source,
                    gone: None,
                    pace: Pace::default(),
                };
            }
            (Some(i), None) => {
                self.slots.remove(i);
                self.retired.push(counters.remove(i));
            }
            (None, Some(source)) => {
                let i = self
                    .slots
                    .iter()
                    .position(|s| s.source.quality() > source.quality())
                    .unwrap_or(self.slots.len());
                let counter = match self.retired.iter().position(|c| c.id == source.id()) {
                    Some(r) => self.retired.remove(r),
                    None => ReadCounter::new(source.id()),
                };
                counters.insert(i, counter);
                self.slots.insert(
                    i,
                    Slot {
                        source,
                        gone: None,
                        pace: Pace::default(),
                    },
                );
            }
            (None, None) => return,
        }
        self.counters = counters.into();
    }

    /// Times every read with `timer` (the engine's monotonic clock).
    pub fn with_timer(mut self, timer: Timer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Each source's reads so far, in priority order; the same counters until a source is set
    /// ([`Chain::set_source`]), whose new counters go on from these.
    pub fn counters(&self) -> Arc<[ReadCounter]> {
        Arc::clone(&self.counters)
    }

    /// Tells the sources the pace the engine samples at now; those that sample in a thread of
    /// their own follow it rather than run faster.
    pub fn set_pace(&mut self, interval: Duration) {
        for slot in self.slots.iter_mut().filter(|s| s.gone.is_none()) {
            slot.source.pace(interval);
        }
    }

    /// The longest of the sources' minimum intervals: sampling faster than this only re-reads
    /// values the hardware has not updated yet.
    pub fn min_interval(&self) -> Option<std::time::Duration> {
        self.slots
            .iter()
            .filter(|s| s.gone.is_none())
            .filter_map(|s| s.source.min_interval())
            .max()
    }

    /// What each live source says of its devices' use by processes since the last call
    /// ([`Source::process_use`]).
    pub fn process_use(&mut self) -> Vec<crate::programs::DeviceUse> {
        self.slots
            .iter_mut()
            .filter(|s| s.gone.is_none())
            .flat_map(|s| s.source.process_use())
            .collect()
    }

    /// Every source's id, best first.
    pub fn ids(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| s.source.id().to_string())
            .collect()
    }

    /// Every source in priority order with what the given snapshot (taken from this chain)
    /// says of it.
    pub fn status(&self, snapshot: &Snapshot) -> Vec<SourceStatus> {
        self.slots
            .iter()
            .map(|slot| {
                let id = slot.source.id();
                let failure = snapshot.unavailable.iter().find(|u| u.source == id);
                let stalled = snapshot.stalled.iter().find(|s| s.source == id);
                SourceStatus {
                    id: id.to_string(),
                    quality: slot.source.quality(),
                    available: failure.is_none(),
                    reason: failure
                        .map(|u| u.reason.clone())
                        .or_else(|| stalled.map(|s| s.reason.clone())),
                    readings: snapshot.breakdown.iter().filter(|r| r.source == id).count(),
                    standby: failure.is_none() && slot.pace.standby,
                    details: slot.source.details(),
                }
            })
            .collect()
    }

    /// One sample, reading only the sources that could add something ([`pace`]).
    pub fn sample(&mut self, at: Stamp) -> Snapshot {
        self.sample_reading(at, false)
    }

    /// One sample that reads every source still available, for diagnostics
    /// (`wattbar-cli sources`): what each would give, not only what the headline needs.
    pub fn sample_every_source(&mut self, at: Stamp) -> Snapshot {
        self.sample_reading(at, true)
    }

    fn sample_reading(&mut self, at: Stamp, every: bool) -> Snapshot {
        let mut breakdown: Vec<Reading> = Vec::new();
        let mut unavailable = Vec::new();
        let mut battery = None;
        let mut battery_health = None;
        let mut stalled = Vec::new();
        // A still counter's evidence: the CPU estimate is read in this sample.
        let wants_evidence = self.stalls.wants_evidence();
        // Consumption domains the sources read so far in this sample gave usable readings of.
        let mut covered: Vec<Domain> = Vec::new();
        for (slot, counter) in self.slots.iter_mut().zip(self.counters.iter()) {
            let id = counter.id.as_str();
            if let Some(reason) = &slot.gone {
                unavailable.push(Unavailable {
                    source: id.to_string(),
                    reason: reason.clone(),
                    permanent: true,
                });
                continue;
            }
            let from = breakdown.len();
            let evidence = wants_evidence
                && stall::is_cpu_estimate(slot.source.quality(), slot.source.domains());
            if slot.pace.due(at.monotonic, slot.source.domains(), &covered) || every || evidence {
                let started = self.timer.as_ref().map(|t| t());
                let result = slot.source.read(at);
                let took = match (&self.timer, started) {
                    (Some(t), Some(s)) => t().saturating_sub(s),
                    _ => Duration::ZERO,
                };
                let has_battery = slot.source.battery().is_some();
                match result {
                    Ok(readings) => {
                        slot.pace
                            .read(at.monotonic, took, counter, Ok(&readings), has_battery);
                        breakdown.extend(self.stalls.screen(at.monotonic, readings, &mut stalled));
                    }
                    Err(Error::Unavailable(reason)) => {
                        slot.pace
                            .read(at.monotonic, took, counter, Err(&reason), has_battery);
                        slot.gone = Some(reason.clone());
                        unavailable.push(Unavailable {
                            source: id.to_string(),
                            reason,
                            permanent: true,
                        });
                    }
                    Err(other) => {
                        let reason = other.to_string();
                        slot.pace
                            .read(at.monotonic, took, counter, Err(&reason), has_battery);
                        unavailable.push(Unavailable {
                            source: id.to_string(),
                            reason,
                            permanent: false,
                        });
                    }
                }
            } else if let Some(reason) = &slot.pace.failing {
                // Waiting out its failures: the last reason is still why it gives nothing.
                unavailable.push(Unavailable {
                    source: id.to_string(),
                    reason: reason.clone(),
                    permanent: false,
                });
            }
            for r in &breakdown[from..] {
                if is_consumption(r.domain) && usable(r).is_some() && !covered.contains(&r.domain) {
                    covered.push(r.domain);
                }
            }
            // Asked even after a transient failure or while standing by: a battery gauge that
            // cannot measure the draw on mains still knows it is on mains.
            if battery.is_none() && slot.gone.is_none() {
                battery = slot.source.battery();
                battery_health = slot.source.battery_health();
            }
        }
        self.stalls.end_sample(at.monotonic, &breakdown);
        let snapshot = Snapshot::of(at, breakdown);
        let answer_period_seconds = snapshot
            .headline_parts
            .iter()
            .filter_map(|part| {
                let k = self.counters.iter().position(|c| c.id == part.source)?;
                self.slots.get(k)?.source.answer_period()
            })
            .max()
            .map(|p| p.as_secs_f64());
        Snapshot {
            unavailable,
            stalled,
            battery,
            battery_health,
            answer_period_seconds,
            ..snapshot
        }
    }
}
