//! One sampling interval as the meter measured it: the unit every window, share and bound is
//! made of.

use crate::meter::Method;
use crate::reading::Quality;
use crate::scope::{Coverage, Scope};
use serde::{Deserialize, Serialize};

/// One sampling interval: what the meter measured between two samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Elapsed-clock seconds.
    pub start: f64,
    pub end: f64,
    /// Wall-clock seconds at the same two instants.
    pub unix_start: f64,
    pub unix_end: f64,
    /// Headline energy; `None` where no headline was measured (not covered, never 0 J).
    pub joules: Option<f64>,
    /// Energy per breakdown domain.
    pub by_domain: Vec<(String, f64)>,
    pub quality: Option<Quality>,
    pub source: Option<String>,
    /// How the headline energy was found; `None` where not known (rebuilt from stored samples).
    pub method: Option<Method>,
    /// Where the headline's source answers less often than it is sampled (a plug): how often,
    /// and the power its last answer said. The energy within was interpolated between answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered: Option<Answered>,
    /// What the headline covered; `None` where not known. Rebuilt from stored samples, its
    /// scope alone (samples keep no parts), or nothing for samples kept before scopes were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// A slow source's answers, as an interval saw them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// The source gives a new value at most this often
    /// ([`Snapshot::answer_period_seconds`](crate::chain::Snapshot::answer_period_seconds)).
    pub period_seconds: f64,
    /// The power its last answer said, at the interval's end.
    pub watts: f64,
}

impl Interval {
    pub(crate) fn seconds(&self) -> f64 {
        self.end - self.start
    }

    /// The part of this interval before `unix` (its energy in proportion), so that stored
    /// intervals never overlap the ones kept in memory from `unix` on; `None` when none is.
    pub fn before(mut self, unix: f64) -> Option<Interval> {
        if self.unix_start >= unix {
            return None;
        }
        if self.unix_end > unix {
            let span = self.unix_end - self.unix_start;
            let kept = (unix - self.unix_start) / span;
            self.joules = self.joules.map(|j| j * kept);
            for (_, j) in &mut self.by_domain {
                *j *= kept;
            }
            self.end = self.start + (self.end - self.start) * kept;
            self.unix_end = unix;
        }
        Some(self)
    }

    /// The scope of what the headline covered, when known.
    pub fn scope(&self) -> Option<Scope> {
        self.coverage.as_ref().map(|c| c.scope)
    }

    /// Mean headline watts, when measured.
    pub fn watts(&self) -> Option<f64> {
        let s = self.seconds();
        self.joules.filter(|_| s > 0.0).map(|j| j / s)
    }
}

/// Which of an interval's two clocks a span is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeline {
    /// The engine's elapsed seconds (`start`, `end`).
    Elapsed,
    /// Unix seconds (`unix_start`, `unix_end`).
    Wall,
}

/// The coverage energy over `from..to` (`to: None` is open) is taken in: that of the latest
/// measured interval overlapping it. Figures of different scope are different quantities, never
/// added: intervals of any other scope count as not measured. (Within one scope the parts
/// covered may differ, a GPU appearing, as the ledger's sums allow; the latest's are named.)
pub fn span_coverage<'a>(
    intervals: impl DoubleEndedIterator<Item = &'a Interval>,
    timeline: Timeline,
    from: f64,
    to: Option<f64>,
) -> Option<Coverage> {
    intervals
        .rev()
        .find(|i| {
            let (start, end) = match timeline {
                Timeline::Elapsed => (i.start, i.end),
                Timeline::Wall => (i.unix_start, i.unix_end),
            };
            i.joules.is_some() && end > from && to.is_none_or(|t| start < t)
        })
        .and_then(|i| i.coverage.clone())
}

/// One-second counter intervals from `t0` (elapsed seconds; the wall clock is 1.7e9 later) with
/// the given watts, half of each the GPU's: the tests' measured machine.
#[cfg(test)]
pub(crate) fn trace(t0: f64, watts: &[f64]) -> Vec<Interval> {
    watts
        .iter()
        .enumerate()
        .map(|(k, &w)| {
            let start = t0 + k as f64;
            Interval {
                start,
                end: start + 1.0,
                unix_start: 1.7e9 + start,
                unix_end: 1.7e9 + start + 1.0,
                joules: Some(w),
                by_domain: vec![("gpu".into(), w / 2.0)],
                quality: Some(Quality::Measured),
                source: Some("rapl".into()),
                method: Some(Method::Counter),
                answered: None,
                coverage: Some(Coverage::of_domain(crate::reading::Domain::System, None)),
            }
        })
        .collect()
}
