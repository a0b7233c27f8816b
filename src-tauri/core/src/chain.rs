//! The sampler chain: asks sources from most to least trustworthy and builds one [`Snapshot`].
//!
//! Headline policy:
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
//! A source that answers `Unavailable` is not asked again; its reason stays in every snapshot.
//! A `Transient` failure is listed for that sample and the source is asked again next time.

use crate::error::Error;
use crate::policy::Battery;
use crate::reading::{Domain, Quality, Reading, Source, Stamp};
use crate::units::Watts;
use serde::{Deserialize, Serialize};

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
}

/// One (domain, device) as one source reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Part {
    pub domain: Domain,
    pub device: Option<String>,
    pub source: String,
}

impl Part {
    pub fn of(r: &Reading) -> Part {
        Part {
            domain: r.domain,
            device: r.device.clone(),
            source: r.source.clone(),
        }
    }

    pub fn is(&self, r: &Reading) -> bool {
        self.domain == r.domain && self.device == r.device && self.source == r.source
    }
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
    /// The supply as the first battery-aware source saw it; `None` without a battery source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery: Option<Battery>,
    /// The readings that count, one per (domain, device), from each domain's owner.
    #[serde(default)]
    pub owners: Vec<Part>,
    /// What the headline is made of: one whole-system reading, or the parts of a sum.
    #[serde(default)]
    pub headline_parts: Vec<Part>,
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
            battery: None,
            owners,
            headline_parts,
        }
    }

    pub fn headline_watts(&self) -> Option<Watts> {
        self.headline.as_ref().and_then(|r| r.watts)
    }

    /// The reading of `part` in this snapshot.
    pub fn reading(&self, part: &Part) -> Option<&Reading> {
        self.breakdown.iter().find(|r| part.is(r))
    }
}

struct Slot {
    source: Box<dyn Source>,
    gone: Option<String>,
}

/// Sources in priority order.
pub struct Chain {
    slots: Vec<Slot>,
}

impl Chain {
    /// Sources are sorted by their quality, best first; equal qualities keep the given order.
    pub fn new(mut sources: Vec<Box<dyn Source>>) -> Self {
        sources.sort_by_key(|s| s.quality());
        Chain {
            slots: sources
                .into_iter()
                .map(|source| Slot { source, gone: None })
                .collect(),
        }
    }

    pub fn source_ids(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| s.source.id().to_string())
            .collect()
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

    /// Every source in priority order with what the given snapshot (taken from this chain)
    /// says of it.
    /// Every source's id, best first.
    pub fn ids(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| s.source.id().to_string())
            .collect()
    }

    pub fn status(&self, snapshot: &Snapshot) -> Vec<SourceStatus> {
        self.slots
            .iter()
            .map(|slot| {
                let id = slot.source.id();
                let failure = snapshot.unavailable.iter().find(|u| u.source == id);
                SourceStatus {
                    id: id.to_string(),
                    quality: slot.source.quality(),
                    available: failure.is_none(),
                    reason: failure.map(|u| u.reason.clone()),
                    readings: snapshot.breakdown.iter().filter(|r| r.source == id).count(),
                }
            })
            .collect()
    }

    pub fn sample(&mut self, at: Stamp) -> Snapshot {
        let mut breakdown = Vec::new();
        let mut unavailable = Vec::new();
        let mut battery = None;
        for slot in &mut self.slots {
            if let Some(reason) = &slot.gone {
                unavailable.push(Unavailable {
                    source: slot.source.id().to_string(),
                    reason: reason.clone(),
                    permanent: true,
                });
                continue;
            }
            match slot.source.read(at) {
                Ok(readings) => breakdown.extend(readings),
                Err(Error::Unavailable(reason)) => {
                    unavailable.push(Unavailable {
                        source: slot.source.id().to_string(),
                        reason: reason.clone(),
                        permanent: true,
                    });
                    slot.gone = Some(reason);
                }
                Err(other) => unavailable.push(Unavailable {
                    source: slot.source.id().to_string(),
                    reason: other.to_string(),
                    permanent: false,
                }),
            }
            // Asked even after a transient failure: a battery gauge that cannot measure the
            // draw on mains still knows it is on mains.
            if battery.is_none() && slot.gone.is_none() {
                battery = slot.source.battery();
            }
        }
        Snapshot {
            unavailable,
            battery,
            ..Snapshot::of(at, breakdown)
        }
    }
}

fn usable(r: &Reading) -> Option<Watts> {
    r.watts.filter(|w| w.is_plausible())
}

/// For each domain, the first source (readings are best source first) with a usable reading;
/// each of its devices in that domain once.
pub fn owners(readings: &[Reading]) -> Vec<Part> {
    let mut owner: Vec<(Domain, &str)> = Vec::new();
    for r in readings.iter().filter(|r| usable(r).is_some()) {
        if !owner.iter().any(|(d, _)| *d == r.domain) {
            owner.push((r.domain, &r.source));
        }
    }
    let mut parts: Vec<Part> = Vec::new();
    for r in readings.iter().filter(|r| usable(r).is_some()) {
        let from_owner = owner
            .iter()
            .any(|(d, s)| *d == r.domain && *s == r.source.as_str());
        let repeated = parts
            .iter()
            .any(|p| p.domain == r.domain && p.device == r.device);
        if from_owner && !repeated {
            parts.push(Part::of(r));
        }
    }
    parts
}

/// The headline from readings ordered best source first (see the module docs).
pub fn headline(readings: &[Reading], at: Stamp) -> Option<Reading> {
    headline_with_parts(readings, &owners(readings), at).map(|(h, _)| h)
}

fn headline_with_parts(
    readings: &[Reading],
    owners: &[Part],
    at: Stamp,
) -> Option<(Reading, Vec<Part>)> {
    let mut candidates: Vec<(Reading, Vec<Part>)> = [Domain::System, Domain::Platform]
        .into_iter()
        .filter_map(|whole| {
            readings
                .iter()
                .find(|r| r.domain == whole && owners.iter().any(|p| p.is(r)))
                .map(|r| (r.clone(), vec![Part::of(r)]))
        })
        .collect();
    candidates.extend(component_sum(readings, owners, at));
    // A better quality wins; among equals, the order above (system, platform, sum).
    let best = candidates.iter().map(|(r, _)| r.quality).min()?;
    candidates.into_iter().find(|(r, _)| r.quality == best)
}

fn component_sum(readings: &[Reading], owners: &[Part], at: Stamp) -> Option<(Reading, Vec<Part>)> {
    // An APU's SoC figure includes its CPU: it stands in for the CPU only when nothing measures
    // the CPU itself, and is never added to it.
    let has_cpu = owners.iter().any(|p| p.domain == Domain::Cpu);
    let parts: Vec<&Reading> = readings
        .iter()
        .filter(|r| r.domain.is_component() || (r.domain == Domain::Soc && !has_cpu))
        .filter(|r| owners.iter().any(|p| p.is(r)))
        .collect();
    if parts.is_empty() {
        return None;
    }
    let total = parts
        .iter()
        .filter_map(|r| usable(r))
        .fold(Watts(0.0), |a, b| a + b);
    let quality = parts
        .iter()
        .map(|r| r.quality)
        .max()
        .unwrap_or(Quality::Heuristic);
    let mut sources: Vec<&str> = Vec::new();
    for p in &parts {
        if !sources.contains(&p.source.as_str()) {
            sources.push(&p.source);
        }
    }
    Some((
        Reading::power(Domain::System, total, sources.join("+"), quality, at),
        parts.iter().map(|r| Part::of(r)).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    type Canned = Result<Vec<(Domain, Option<&'static str>, f64)>, Error>;

    struct Fixed {
        id: &'static str,
        quality: Quality,
        result: Canned,
        calls: Arc<AtomicUsize>,
    }

    impl Source for Fixed {
        fn id(&self) -> &str {
            self.id
        }
        fn quality(&self) -> Quality {
            self.quality
        }
        fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let quality = self.quality;
            let id = self.id;
            self.result.clone().map(|v| {
                v.into_iter()
                    .map(|(d, dev, w)| {
                        let r = Reading::power(d, Watts(w), id, quality, at);
                        match dev {
                            Some(dev) => r.with_device(dev),
                            None => r,
                        }
                    })
                    .collect()
            })
        }
    }

    fn counted(
        id: &'static str,
        quality: Quality,
        result: Canned,
    ) -> (Box<dyn Source>, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let source = Box::new(Fixed {
            id,
            quality,
            result,
            calls: calls.clone(),
        });
        (source, calls)
    }

    fn fixed(id: &'static str, quality: Quality, result: Canned) -> Box<dyn Source> {
        counted(id, quality, result).0
    }

    fn t(s: u64) -> Stamp {
        Stamp::new(Duration::from_secs(s), s as f64)
    }

    #[test]
    fn a_measured_system_reading_beats_an_estimate_given_first() {
        let mut chain = Chain::new(vec![
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, None, 9.0)]),
            ),
            fixed(
                "smc",
                Quality::Measured,
                Ok(vec![(Domain::System, None, 14.2)]),
            ),
        ]);
        let snap = chain.sample(t(1));
        let head = snap.headline.unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(14.2)));
        assert_eq!(head.source, "smc");
        assert_eq!(head.quality, Quality::Measured);
        assert_eq!(snap.breakdown.len(), 2);
    }

    #[test]
    fn components_sum_once_each_and_take_the_worst_quality() {
        let mut chain = Chain::new(vec![
            fixed(
                "rapl",
                Quality::Measured,
                Ok(vec![(Domain::Cpu, Some("package-0"), 20.0)]),
            ),
            fixed(
                "nvml",
                Quality::Measured,
                Ok(vec![(Domain::Gpu, Some("0"), 100.0)]),
            ),
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, Some("package-0"), 35.0)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(120.0)));
        assert_eq!(head.quality, Quality::Measured);
        assert_eq!(head.source, "rapl+nvml");
    }

    #[test]
    fn a_domain_comes_whole_from_its_best_source() {
        // RAPL's two packages and the CPU proxy's whole-CPU estimate must not add up.
        let mut chain = Chain::new(vec![
            fixed(
                "rapl",
                Quality::Measured,
                Ok(vec![
                    (Domain::Cpu, Some("package-0"), 20.0),
                    (Domain::Cpu, Some("package-1"), 22.0),
                ]),
            ),
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, None, 35.0)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(42.0)));
        assert_eq!(head.source, "rapl");
    }

    #[test]
    fn the_snapshot_names_each_domains_owner_and_the_headlines_parts() {
        // RAPL beats the CPU estimate, NVML beats the Ollama heuristic: the owners are exactly
        // what the headline adds up, so metering them cannot count a domain twice.
        let mut chain = Chain::new(vec![
            fixed(
                "ollama",
                Quality::Heuristic,
                Ok(vec![(Domain::Gpu, None, 80.0)]),
            ),
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, None, 35.0)]),
            ),
            fixed(
                "rapl",
                Quality::Measured,
                Ok(vec![(Domain::Cpu, Some("package-0"), 20.0)]),
            ),
            fixed(
                "nvml",
                Quality::Measured,
                Ok(vec![(Domain::Gpu, Some("0"), 250.0)]),
            ),
        ]);
        let snap = chain.sample(t(1));
        let part = |domain, device: &str, source: &str| Part {
            domain,
            device: Some(device.to_string()),
            source: source.to_string(),
        };
        let expected = vec![
            part(Domain::Cpu, "package-0", "rapl"),
            part(Domain::Gpu, "0", "nvml"),
        ];
        assert_eq!(snap.owners, expected);
        assert_eq!(snap.headline_parts, expected);
        assert_eq!(snap.headline_watts(), Some(Watts(270.0)));
    }

    #[test]
    fn psys_is_used_only_without_a_system_reading_and_never_added_to_parts() {
        let mut chain = Chain::new(vec![
            fixed(
                "rapl",
                Quality::Measured,
                Ok(vec![
                    (Domain::Cpu, Some("package-0"), 20.0),
                    (Domain::Platform, Some("psys"), 31.0),
                ]),
            ),
            fixed(
                "power-supply",
                Quality::Measured,
                Ok(vec![(Domain::System, None, 36.5)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(36.5)));
        let mut no_battery = Chain::new(vec![fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![
                (Domain::Cpu, Some("package-0"), 20.0),
                (Domain::Platform, Some("psys"), 31.0),
            ]),
        )]);
        let head = no_battery
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(31.0)));
    }

    #[test]
    fn measured_parts_beat_a_heuristic_whole_system_guess() {
        let mut chain = Chain::new(vec![
            fixed(
                "ollama-heuristic",
                Quality::Heuristic,
                Ok(vec![(Domain::System, None, 16.0)]),
            ),
            fixed(
                "nvml",
                Quality::Measured,
                Ok(vec![(Domain::Gpu, Some("0"), 250.0)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(250.0)));
        assert_eq!(head.quality, Quality::Measured);
    }

    #[test]
    fn an_apu_soc_figure_is_never_added_to_the_cpu() {
        let mut both = Chain::new(vec![
            fixed(
                "rapl",
                Quality::Measured,
                Ok(vec![(Domain::Cpu, Some("package-0"), 9.0)]),
            ),
            fixed(
                "hwmon",
                Quality::Measured,
                Ok(vec![(Domain::Soc, Some("amdgpu"), 9.1)]),
            ),
        ]);
        let head = both
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(9.0)));
        let mut soc_only = Chain::new(vec![fixed(
            "hwmon",
            Quality::Measured,
            Ok(vec![(Domain::Soc, Some("amdgpu"), 9.1)]),
        )]);
        let head = soc_only
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(9.1)));
    }

    struct Slow;

    impl Source for Slow {
        fn id(&self) -> &str {
            "nvml"
        }
        fn quality(&self) -> Quality {
            Quality::Measured
        }
        fn read(&mut self, _at: Stamp) -> Result<Vec<Reading>, Error> {
            Ok(Vec::new())
        }
        fn min_interval(&self) -> Option<Duration> {
            Some(Duration::from_millis(250))
        }
    }

    #[test]
    fn the_chain_knows_the_slowest_sources_minimum_interval() {
        let chain = Chain::new(vec![
            Box::new(Slow),
            fixed("cpu-proxy", Quality::Estimated, Ok(vec![])),
        ]);
        assert_eq!(chain.min_interval(), Some(Duration::from_millis(250)));
        assert_eq!(Chain::new(Vec::new()).min_interval(), None);
    }

    #[test]
    fn an_estimated_part_makes_the_sum_estimated() {
        let mut chain = Chain::new(vec![
            fixed(
                "nvml",
                Quality::Measured,
                Ok(vec![(Domain::Gpu, Some("0"), 100.0)]),
            ),
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, None, 35.0)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(135.0)));
        assert_eq!(head.quality, Quality::Estimated);
    }

    #[test]
    fn no_source_means_no_headline_not_zero_watts() {
        let mut chain = Chain::new(vec![fixed(
            "rapl",
            Quality::Measured,
            Err(Error::Unavailable("energy_uj is root-only".into())),
        )]);
        let snap = chain.sample(t(1));
        let status = chain.status(&snap);
        assert_eq!(status.len(), 1);
        assert!(!status[0].available);
        assert_eq!(status[0].reason.as_deref(), Some("energy_uj is root-only"));
        assert!(snap.headline.is_none());
        assert_eq!(snap.unavailable.len(), 1);
        assert_eq!(snap.unavailable[0].source, "rapl");
        assert!(snap.unavailable[0].reason.contains("root-only"));
    }

    #[test]
    fn nan_readings_never_become_the_headline() {
        let mut chain = Chain::new(vec![
            fixed(
                "smc",
                Quality::Measured,
                Ok(vec![(Domain::System, None, f64::NAN)]),
            ),
            fixed(
                "cpu-proxy",
                Quality::Estimated,
                Ok(vec![(Domain::Cpu, None, 7.0)]),
            ),
        ]);
        let head = chain
            .sample(t(1))
            .headline
            .unwrap_or_else(|| panic!("no headline"));
        assert_eq!(head.watts, Some(Watts(7.0)));
        assert_eq!(head.source, "cpu-proxy");
    }

    #[test]
    fn an_unavailable_source_is_not_asked_again_but_stays_listed() {
        let (source, calls) = counted(
            "rapl",
            Quality::Measured,
            Err(Error::Unavailable("no powercap".into())),
        );
        let mut chain = Chain::new(vec![source]);
        chain.sample(t(1));
        let snap = chain.sample(t(2));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(snap.unavailable.len(), 1);
        assert!(snap.unavailable[0].permanent);
        assert_eq!(snap.unavailable[0].reason, "no powercap");
    }

    #[test]
    fn a_transient_failure_is_listed_and_retried() {
        let (source, calls) = counted(
            "nvml",
            Quality::Measured,
            Err(Error::Transient("busy".into())),
        );
        let mut chain = Chain::new(vec![source]);
        let first = chain.sample(t(1));
        let second = chain.sample(t(2));
        assert!(!first.unavailable[0].permanent);
        assert_eq!(second.unavailable.len(), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
