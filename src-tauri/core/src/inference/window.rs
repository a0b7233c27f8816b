//! The energy of a wall-clock window, at the sampling resolution, and how far it may be from the
//! truth.
//!
//! Rule: each measured interval gives the window its energy in proportion to its overlap (the
//! power is taken as constant within an interval). The bound adds, per interval, what
//! [`bound::allowance`] allows for the part the window covers, with the power's spread around
//! it: a window that cuts an interval, an interval found by the trapezoid rule, or one
//! interpolated between a slow device's answers, is known less well than a counter's whole
//! interval. Where an interval does not say how it was measured (rebuilt from the store, which
//! keeps no quality per sample) there is no bound: `None`, never a guess.
//!
//! A window's energy is in one scope, its latest measured interval's ([`span_coverage`]):
//! intervals of another (before the plug was unplugged, say) are not measured for it, and lower
//! its covered fraction.

use super::bound::{self, Cut};
use super::interval::{span_coverage, Interval, Timeline};
use crate::reading::Quality;
use crate::scope::Coverage;
use serde::{Deserialize, Serialize};

/// The energy of a wall-clock window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowEnergy {
    pub from: f64,
    pub to: f64,
    /// Headline joules over the covered part; `None` when nothing of the window was measured.
    pub joules: Option<f64>,
    /// How far `joules` may be from the true energy of the covered part; `None` where the
    /// intervals do not say how they were measured.
    #[serde(default)]
    pub bound_joules: Option<f64>,
    pub by_domain: Vec<(String, f64)>,
    pub mean_watts: Option<f64>,
    /// Intervals that overlap the window.
    pub samples: usize,
    /// Share of the window that measured intervals cover, 0–1.
    pub covered_fraction: f64,
    pub quality: Option<Quality>,
    pub sources: Vec<String>,
    /// What the energy covers; `None` where not known.
    #[serde(default)]
    pub coverage: Option<Coverage>,
}

/// Energy between `from` and `to` (Unix seconds). `intervals` in time order; those just outside
/// the window (one answer period of a slow source) make its bound no narrower than the power's
/// spread there.
pub fn window_energy(intervals: &[Interval], from: f64, to: f64) -> WindowEnergy {
    let mut joules = 0.0;
    let mut bound_joules = Some(0.0);
    let mut covered = 0.0;
    let mut samples = 0;
    let mut by_domain: Vec<(String, f64)> = Vec::new();
    let mut quality = None;
    let mut sources: Vec<String> = Vec::new();
    let coverage = span_coverage(intervals.iter(), Timeline::Wall, from, Some(to));
    let scope = coverage.as_ref().map(|c| c.scope);
    for (k, i) in intervals.iter().enumerate() {
        let span = i.unix_end - i.unix_start;
        let overlap = i.unix_end.min(to) - i.unix_start.max(from);
        if span <= 0.0 || overlap <= 0.0 {
            continue;
        }
        samples += 1;
        let Some(j) = i.joules.filter(|_| i.scope() == scope) else {
            continue;
        };
        let f = overlap / span;
        joules += j * f;
        covered += overlap;
        bound_joules = match (bound_joules, i.quality) {
            (Some(b), Some(q)) => {
                let cut = Cut {
                    dt: span,
                    watts: j / span,
                    seconds: overlap,
                    joules: j * f,
                    method: i.method,
                    quality: Some(q),
                    answered: i.answered,
                };
                Some(b + bound::allowance(&cut, bound::spread_around(intervals, k)))
            }
            _ => None,
        };
        for (d, dj) in &i.by_domain {
            match by_domain.iter_mut().find(|(k, _)| k == d) {
                Some((_, v)) => *v += dj * f,
                None => by_domain.push((d.clone(), dj * f)),
            }
        }
        quality = quality.max(i.quality);
        if let Some(s) = &i.source {
            if !sources.contains(s) {
                sources.push(s.clone());
            }
        }
    }
    let length = to - from;
    WindowEnergy {
        from,
        to,
        joules: (covered > 0.0).then_some(joules),
        bound_joules: bound_joules.filter(|_| covered > 0.0),
        by_domain,
        mean_watts: (covered > 0.0).then(|| joules / covered),
        samples,
        covered_fraction: if length > 0.0 {
            (covered / length).clamp(0.0, 1.0)
        } else {
            0.0
        },
        quality,
        sources,
        coverage,
    }
}

#[cfg(test)]
mod tests;
