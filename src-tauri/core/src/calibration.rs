//! Calibration: the components headline mapped onto a whole-machine reference, so that a
//! `calibrated` figure can stand in for the reference when it is gone.
//!
//! Rules:
//! - While a reference (a plug at the wall, a discharging battery, RAPL `psys`) and a components
//!   headline (a sum of sensors, or a CPU estimate) are both live, their paired samples are cut
//!   into [`Window`]s of at least [`MIN_WINDOW_SECONDS`], each reduced to time-weighted
//!   (trapezoid) mean watts. A gap longer than [`MAX_GAP_SECONDS`], time going backwards, a
//!   missing side or a non-finite or negative figure ends the window in progress, and a window
//!   cut short is dropped: no mean is ever taken across an interval nobody saw.
//! - [`fit`] finds `reference ≈ a + b · components` by ordinary least squares over the windows,
//!   holding out every [`HOLDOUT_EVERY`]th window (in the order given, which is time order) to
//!   measure the error on windows the line never saw. A calibrated figure is
//!   [`Fit::predict`] with [`Fit::bound`], the largest held-out relative error applied to it.
//! - A fit is refused, in this order, with fewer than [`MIN_WINDOWS`] windows, a load that spans
//!   less than [`MIN_RANGE_FRACTION`] of its mean, components or reference that never change, a
//!   result that is not finite, or R² below [`MIN_R2`]. A refusal says why in a sentence.
//! - The engine owns one [`Learner`], fed every sample; it builds windows with the same code as
//!   [`windows`] and keeps the last [`KEEP_WINDOWS`].
//!
//! Times are seconds on one clock (monotonic, or Unix seconds from a CSV); nothing here reads it.

use crate::chain::{Part, Snapshot};
use crate::energy::DEFAULT_GAP_THRESHOLD;
use crate::reading::{Domain, Quality, Reading};
use crate::scope::Scope;
use crate::units::Watts;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Shortest window: thirty 1 s samples average a ±2 % noise on each down to about 0.2 %.
pub const MIN_WINDOW_SECONDS: f64 = 30.0;

/// Fewest windows for a fit: with one in [`HOLDOUT_EVERY`] held out, nine to fit the line and
/// three to test it.
pub const MIN_WINDOWS: usize = 12;

/// Least R² on the training windows: below it the components explain too little of the
/// reference for a line through them to stand in for it.
pub const MIN_R2: f64 = 0.9;

/// Least load range: (max − min) of the windows' mean components watts, as a fraction of their
/// mean. The offset `a` is an extrapolation to zero load, and its error grows as mean ÷ span: at
/// a quarter it is at most four times the error at the middle of the range. Idle to one busy
/// core spans more than this on any machine, so ordinary use passes within minutes; a steady load
/// (a video, a long render) does not, and a quiet sensor can give it a high R² all the same.
pub const MIN_RANGE_FRACTION: f64 = 0.25;

/// Longest interval inside a window: the energy integrator's gap threshold, so that an interval
/// that adds no energy there is not averaged over here.
pub const MAX_GAP_SECONDS: f64 = DEFAULT_GAP_THRESHOLD.as_secs_f64();

/// One window in this many is held out of the fit (index % 4 == 3): spread across time and, as
/// the load moves, across the range, and the same windows on every run.
pub const HOLDOUT_EVERY: usize = 4;

/// Windows a [`Learner`] keeps: two hours of 30 s windows, long enough to see a range of loads,
/// short enough to follow a machine whose draw drifts (a warming supply, a plug moved).
pub const KEEP_WINDOWS: usize = 240;

/// One paired observation: both figures at time `t` in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub t: f64,
    pub reference: Watts,
    pub components: Watts,
}

/// At least [`MIN_WINDOW_SECONDS`] of pairs with no gap, as time-weighted mean watts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Time of the first pair, in seconds on the pairs' clock.
    pub start: f64,
    pub seconds: f64,
    pub reference_watts: f64,
    pub components_watts: f64,
}

/// Cuts a trace into consecutive windows. Each interval between two pairs belongs to one window:
/// the pair that closes a window also opens the next. A pair at the same time as the one before
/// adds no interval and is skipped.
pub fn windows(pairs: &[Pair]) -> Vec<Window> {
    let mut builder = WindowBuilder::default();
    pairs.iter().filter_map(|&p| builder.push(p)).collect()
}

/// The window in progress: its start, its last pair and the trapezoid integrals so far.
#[derive(Debug, Clone, Copy)]
struct Open {
    start: f64,
    last: Pair,
    reference_joules: f64,
    components_joules: f64,
}

impl Open {
    fn at(pair: Pair) -> Open {
        Open {
            start: pair.t,
            last: pair,
            reference_joules: 0.0,
            components_joules: 0.0,
        }
    }
}

/// The one place windows are cut, for [`windows`] and the [`Learner`] alike.
#[derive(Debug, Clone, Default)]
struct WindowBuilder {
    open: Option<Open>,
}

impl WindowBuilder {
    /// Adds a pair; returns the window it completes, if any.
    fn push(&mut self, pair: Pair) -> Option<Window> {
        let good =
            pair.t.is_finite() && pair.reference.is_plausible() && pair.components.is_plausible();
        if !good {
            self.open = None;
            return None;
        }
        let Some(open) = self.open.as_mut() else {
            self.open = Some(Open::at(pair));
            return None;
        };
        let dt = pair.t - open.last.t;
        if dt == 0.0 {
            return None;
        }
        // Backwards, or a gap: the interval is not joined.
        if !(0.0..=MAX_GAP_SECONDS).contains(&dt) {
            self.open = Some(Open::at(pair));
            return None;
        }
        open.reference_joules += (open.last.reference.0 + pair.reference.0) / 2.0 * dt;
        open.components_joules += (open.last.components.0 + pair.components.0) / 2.0 * dt;
        open.last = pair;
        let seconds = pair.t - open.start;
        if seconds < MIN_WINDOW_SECONDS {
            return None;
        }
        let window = Window {
            start: open.start,
            seconds,
            reference_watts: open.reference_joules / seconds,
            components_watts: open.components_joules / seconds,
        };
        self.open = Some(Open::at(pair));
        Some(window)
    }

    /// Drops the window in progress: the next pair starts a new one.
    fn interrupt(&mut self) {
        self.open = None;
    }
}

/// `reference ≈ offset_watts + slope · components`, with its error on held-out windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub offset_watts: f64,
    pub slope: f64,
    /// On the training windows.
    pub r2: f64,
    /// Mean absolute percentage error on the held-out windows, as a fraction (0.02 = 2 %).
    pub heldout_mape: f64,
    /// Largest absolute percentage error on the held-out windows, as a fraction.
    pub heldout_max_ape: f64,
    /// All windows used, training and held out.
    pub windows: usize,
    /// The range of the windows' mean components watts: outside it a prediction extrapolates.
    pub components_min_watts: f64,
    pub components_max_watts: f64,
}

impl Fit {
    /// The calibrated figure: a + b · components.
    pub fn predict(&self, components: Watts) -> Watts {
        Watts(self.offset_watts + self.slope * components.0)
    }

    /// How far the calibrated figure may be off: the prediction times the largest held-out
    /// relative error.
    pub fn bound(&self, components: Watts) -> Watts {
        Watts(self.predict(components).0.abs() * self.heldout_max_ape)
    }
}

/// Why no fit was made.
#[derive(Debug, Clone, Copy, PartialEq, Error, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Refusal {
    #[error(
        "{need} windows of at least {} s are needed; {have} so far",
        MIN_WINDOW_SECONDS
    )]
    TooFewWindows { have: usize, need: usize },
    #[error(
        "the load varied by {span_watts:.1} W across the windows; at least {need_watts:.1} W is needed"
    )]
    TooNarrowRange { span_watts: f64, need_watts: f64 },
    #[error("the components or the reference never changed, so no line can be fitted")]
    Degenerate,
    #[error(
        "the fit is not a finite number: a window holds a non-finite figure or a held-out reference of 0 W"
    )]
    NonFinite,
    #[error("the reference follows the components too loosely: R² is {r2:.2}, at least {need:.2} is needed")]
    PoorFit { r2: f64, need: f64 },
}

/// Fits `reference ≈ a + b · components` over `windows`, given in time order.
pub fn fit(windows: &[Window]) -> Result<Fit, Refusal> {
    if windows.len() < MIN_WINDOWS {
        return Err(Refusal::TooFewWindows {
            have: windows.len(),
            need: MIN_WINDOWS,
        });
    }
    let components: Vec<f64> = windows.iter().map(|w| w.components_watts).collect();
    let (min, max) = min_max(&components);
    let span_watts = max - min;
    let need_watts = MIN_RANGE_FRACTION * mean(&components);
    if span_watts < need_watts {
        return Err(Refusal::TooNarrowRange {
            span_watts,
            need_watts,
        });
    }

    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (i, w) in windows.iter().enumerate() {
        if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 {
            test.push(w);
        } else {
            train.push(w);
        }
    }
    let xs: Vec<f64> = train.iter().map(|w| w.components_watts).collect();
    let ys: Vec<f64> = train.iter().map(|w| w.reference_watts).collect();
    // Exact comparisons of the raw figures: the sums below would round a constant to a tiny
    // spread, not to zero.
    let (x_min, x_max) = min_max(&xs);
    let (y_min, y_max) = min_max(&ys);
    if x_min == x_max || y_min == y_max {
        return Err(Refusal::Degenerate);
    }

    // Centred sums: the loads sit far from zero, and raw sums of squares would cancel.
    let (x_mean, y_mean) = (mean(&xs), mean(&ys));
    let sxx: f64 = xs.iter().map(|x| (x - x_mean).powi(2)).sum();
    let sxy: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x - x_mean) * (y - y_mean))
        .sum();
    let syy: f64 = ys.iter().map(|y| (y - y_mean).powi(2)).sum();
    let slope = sxy / sxx;
    let offset_watts = y_mean - slope * x_mean;
    let ss_res: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (y - (offset_watts + slope * x)).powi(2))
        .sum();
    let r2 = 1.0 - ss_res / syy;

    let apes: Vec<f64> = test
        .iter()
        .map(|w| {
            let predicted = offset_watts + slope * w.components_watts;
            (predicted - w.reference_watts).abs() / w.reference_watts
        })
        .collect();
    let heldout_mape = mean(&apes);
    let heldout_max_ape = apes.iter().copied().fold(0.0, f64::max);

    let figures = [offset_watts, slope, r2, heldout_mape, heldout_max_ape];
    // f64::max passes over a NaN, so the APEs are checked one by one.
    if !figures.iter().chain(&apes).all(|v| v.is_finite()) {
        return Err(Refusal::NonFinite);
    }
    if r2 < MIN_R2 {
        return Err(Refusal::PoorFit { r2, need: MIN_R2 });
    }
    Ok(Fit {
        offset_watts,
        slope,
        r2,
        heldout_mape,
        heldout_max_ape,
        windows: windows.len(),
        components_min_watts: min,
        components_max_watts: max,
    })
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

/// The online side: fed every sample, keeps the last [`KEEP_WINDOWS`] windows and fits them on
/// demand.
#[derive(Debug, Clone, Default)]
pub struct Learner {
    builder: WindowBuilder,
    windows: Vec<Window>,
}

impl Learner {
    pub fn new() -> Self {
        Learner::default()
    }

    /// One sample at monotonic time `t`. Both figures must be present for the pair to count;
    /// a missing one (either side gone) ends the window in progress, dropped as short. True when
    /// the pair completed a window (a new fit may be made).
    pub fn observe(&mut self, t: f64, reference: Option<Watts>, components: Option<Watts>) -> bool {
        let (Some(reference), Some(components)) = (reference, components) else {
            self.builder.interrupt();
            return false;
        };
        let pair = Pair {
            t,
            reference,
            components,
        };
        let Some(window) = self.builder.push(pair) else {
            return false;
        };
        self.windows.push(window);
        let excess = self.windows.len().saturating_sub(KEEP_WINDOWS);
        self.windows.drain(..excess);
        true
    }

    /// The kept windows, oldest first.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// [`fit`] over the kept windows.
    pub fn fit(&self) -> Result<Fit, Refusal> {
        fit(&self.windows)
    }

    /// Forgets every window: the reference or the components now cover something else (a GPU
    /// joined the sum, another plug), and the old windows describe another line.
    pub fn reset(&mut self) {
        *self = Learner::default();
    }
}

/// A fit learned on this machine, and what it maps: the parts it was learned on onto the
/// reference's scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    pub fit: Fit,
    /// The reference's scope: `wall` (a plug) or `system` (a battery, `psys`).
    pub reference: Scope,
    /// The parts the components figure covered (`cpu-package`, `gpu:0`).
    pub covers: Vec<String>,
    /// Wall-clock seconds when it was fitted.
    pub fitted_unix: f64,
}

/// The source of a calibrated headline.
pub const CALIBRATED_SOURCE: &str = "calibrated";

impl Learned {
    /// `snapshot` with a calibrated headline in the reference's scope standing in for the
    /// reference, when the reference is gone and the very parts the line was learned on read;
    /// otherwise `snapshot` as it was. The figure is [`Fit::predict`] of the parts, quality
    /// [`Quality::Calibrated`], with [`Fit::bound`] ([`Learned::bound`]).
    pub fn stand_in(&self, snapshot: Snapshot) -> Snapshot {
        if snapshot.reference().is_some() {
            return snapshot;
        }
        let Some((parts, coverage)) = snapshot.components() else {
            return snapshot;
        };
        let predicted = self.fit.predict(parts);
        if coverage.covers != self.covers || !predicted.is_plausible() {
            return snapshot;
        }
        let domain = match self.reference {
            Scope::Wall => Domain::Wall,
            Scope::System | Scope::Components => Domain::System,
        };
        let headline = Reading::power(
            domain,
            predicted,
            CALIBRATED_SOURCE,
            Quality::Calibrated,
            snapshot.at,
        );
        Snapshot {
            headline_parts: vec![Part::of(&headline)],
            headline: Some(headline),
            ..snapshot
        }
    }

    /// The bound of a calibrated headline of `snapshot`, when it has one.
    pub fn bound(&self, snapshot: &Snapshot) -> Option<Watts> {
        let h = snapshot.headline.as_ref()?;
        if h.quality != Quality::Calibrated {
            return None;
        }
        let (parts, _) = snapshot.components()?;
        Some(self.fit.bound(parts))
    }
}

#[cfg(test)]
mod tests;
