//! Which readings count: the owner of each domain, and the headline built from them (rules in
//! the [chain](super) docs).

use super::part::Part;
use crate::reading::{Domain, Quality, Reading, Stamp};
use crate::units::Watts;

pub(super) fn usable(r: &Reading) -> Option<Watts> {
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

pub(super) fn headline_with_parts(
    readings: &[Reading],
    owners: &[Part],
    at: Stamp,
) -> Option<(Reading, Vec<Part>)> {
    choose(
        readings,
        owners,
        at,
        &[Domain::Wall, Domain::System, Domain::Platform],
    )
}

/// The headline the machine's own sensors give, the wall meter left out: what a plug is
/// compared with, and what calibration learns from.
pub(super) fn sensors_headline(
    readings: &[Reading],
    owners: &[Part],
    at: Stamp,
) -> Option<(Reading, Vec<Part>)> {
    choose(readings, owners, at, &[Domain::System, Domain::Platform])
}

/// The sum of the machine's parts alone, no whole-machine reading: what calibration maps onto
/// a reference.
pub(super) fn components_headline(
    readings: &[Reading],
    owners: &[Part],
    at: Stamp,
) -> Option<(Reading, Vec<Part>)> {
    choose(readings, owners, at, &[])
}

fn choose(
    readings: &[Reading],
    owners: &[Part],
    at: Stamp,
    wholes: &[Domain],
) -> Option<(Reading, Vec<Part>)> {
    let mut candidates: Vec<(Reading, Vec<Part>)> = wholes
        .iter()
        .copied()
        .filter_map(|whole| {
            readings
                .iter()
                .find(|r| r.domain == whole && owners.iter().any(|p| p.is(r)))
                .map(|r| (r.clone(), vec![Part::of(r)]))
        })
        .collect();
    candidates.extend(component_sum(readings, owners, at));
    // A better quality wins; among equals, the order above (wall, system, platform, sum).
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
