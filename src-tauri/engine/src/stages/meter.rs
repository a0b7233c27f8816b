//! The meter, the first stage of each sample: a snapshot is calibrated (a fit stands in for a whole-machine
//! reference that is gone), accounted (session, cost, per domain and part) and becomes the
//! interval since the sample before, which every later stage observes.
//!
//! Rules:
//! - An interval exists only between two samples no further apart than the gap threshold: a
//!   suspend or a stall is a gap, never energy.
//! - Its headline energy is `None` unless both ends measured one of the same scope: absent is
//!   not zero.
//! - The wall clock labels samples and never moves energy; a step of it is said once.

use crate::accounting::{Accounting, LocalWeek, SampleAdded};
use crate::ring::{Ring, Shared};
use crate::stages::calibration::Calibration;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::inference::{Answered, Interval};
use wattbar_core::meter::Method;
use wattbar_core::{Currency, Part, SessionTotals, Snapshot, Stamp};
use wattbar_ledger::store::Row;

/// A wall clock that moved this much more or less than elapsed time was stepped.
const WALL_STEP_SECONDS: f64 = 2.0;

/// Energy and cost as accounted, and the last sample.
pub(crate) struct Meter {
    /// Learns the parts against a whole-machine reference, and stands in for it when it goes.
    pub calibration: Calibration,
    pub accounting: Accounting,
    pub local_week: LocalWeek,
    /// What each owned part has added since the engine started.
    pub part_totals: BTreeMap<Part, f64>,
    pub last: Option<Stamp>,
    pub snapshot: Option<Snapshot>,
    /// The last minutes of headline watts, for sparklines.
    pub recent: Ring<Point>,
}

/// The energy this run accounted, and how.
#[derive(Debug, Clone, Serialize)]
pub struct Energy {
    /// The energy each owned part (domain, device, source) has added since the engine started,
    /// by counter or trapezoid as the ledger counts it: a counter, whose differences between two
    /// states are the energy between them however many samples lie between. A part not here has
    /// added nothing that counts (another source owns its domain).
    pub part_totals: Vec<(Part, f64)>,
    pub session: SessionTotals,
    /// How the last sample's headline energy was found: `counter` or `trapezoid`.
    pub method: Option<Method>,
    /// The flat price the preferences set.
    pub price_per_kwh: f64,
    /// What calibration learned and whether it stands in for the reference now.
    pub calibration: Arc<crate::stages::calibration::CalibrationView>,
    /// Headline watts over the last [`RECENT_WINDOW`], oldest first.
    #[serde(skip)]
    pub history: Shared<Point>,
}

/// One sample, accounted: what every later stage of the sample observes.
pub(crate) struct Sampled {
    pub at: Stamp,
    pub snapshot: Snapshot,
    pub step: SampleAdded,
    /// Since the sample before; `None` for a first sample or after a gap.
    pub interval: Option<Interval>,
    /// Its length; 0 without one.
    pub seconds: f64,
    /// Local time since Monday 00:00, for tariffs.
    pub week_seconds: f64,
}

impl Meter {
    pub fn new(accounting: Accounting, calibration: Calibration) -> Self {
        Meter {
            calibration,
            accounting,
            local_week: LocalWeek::default(),
            part_totals: BTreeMap::new(),
            last: None,
            snapshot: None,
            recent: Ring::default(),
        }
    }

    /// Accounts `snapshot`, taken at `at`.
    pub fn observe(&mut self, at: Stamp, snapshot: Snapshot) -> Sampled {
        let snapshot = self.calibration.take(snapshot, at.unix_seconds);
        let prev = self.last;
        self.notice_wall_step(at);
        let week_seconds = self.local_week.at(at.unix_seconds);
        let step = self.accounting.push(&snapshot, week_seconds);
        if step.clamped {
            tracing::warn!(
                watts = snapshot.headline_watts().map(|w| w.0),
                "absurd power clamped to 100 kW: a broken sensor or a bogus unit"
            );
        }
        // Across a change of scope the two ends measure different things: no headline energy.
        let measured_before = self.snapshot.as_ref().is_some_and(|s| s.headline.is_some())
            && step.headline.scope_change.is_none();
        let prev = prev.filter(|p| {
            at.monotonic.saturating_sub(p.monotonic) <= self.accounting.gap_threshold()
        });
        let seconds = prev.map_or(0.0, |p| {
            at.monotonic.saturating_sub(p.monotonic).as_secs_f64()
        });
        let interval = prev.map(|prev| {
            let headline = snapshot.headline.as_ref().filter(|_| measured_before);
            Interval {
                start: prev.monotonic.as_secs_f64(),
                end: at.monotonic.as_secs_f64(),
                unix_start: prev.unix_seconds,
                unix_end: at.unix_seconds,
                joules: headline.map(|_| step.headline.joules.0),
                by_domain: step
                    .by_domain
                    .iter()
                    .map(|(d, j)| (d.as_str().to_string(), j.0))
                    .collect(),
                quality: headline.map(|h| h.quality),
                source: headline.map(|h| h.source.clone()),
                method: headline.map(|_| step.method),
                answered: headline.and_then(|h| {
                    Some(Answered {
                        period_seconds: snapshot.answer_period_seconds?,
                        watts: h.watts?.0,
                    })
                }),
                coverage: headline.and_then(|_| snapshot.coverage()),
            }
        });
        Sampled {
            at,
            snapshot,
            step,
            interval,
            seconds,
            week_seconds,
        }
    }

    /// What readers see of the energy now, the session priced in `currency`; `price_per_kwh`
    /// is the flat price the preferences set.
    pub fn now(&mut self, currency: &Currency, price_per_kwh: f64) -> Energy {
        Energy {
            part_totals: self
                .part_totals
                .iter()
                .map(|(p, j)| (p.clone(), *j))
                .collect(),
            session: self.accounting.totals(currency),
            method: self.accounting.method(),
            price_per_kwh,
            calibration: self.calibration.view(),
            history: self.recent.shared(),
        }
    }

    /// Keeps `s` as the last sample, once every stage has seen it.
    pub fn keep(&mut self, s: Sampled) {
        remember(
            &mut self.recent,
            Point {
                t: s.at.unix_seconds,
                watts: s.snapshot.headline_watts().map(|w| w.0),
            },
        );
        for (part, joules) in s.step.by_part {
            *self.part_totals.entry(part).or_default() += joules.0;
        }
        self.snapshot = Some(s.snapshot);
    }

    /// Says when the wall clock was stepped (NTP, the user): labels move, energy does not.
    fn notice_wall_step(&mut self, at: Stamp) {
        if let Some(last) = self.last {
            let elapsed = at.monotonic.saturating_sub(last.monotonic).as_secs_f64();
            let wall = at.unix_seconds - last.unix_seconds;
            if (wall - elapsed).abs() > WALL_STEP_SECONDS {
                tracing::info!(
                    seconds = wall - elapsed,
                    "the wall clock was stepped; energy is unaffected"
                );
            }
        }
        self.last = Some(at);
    }
}

impl Sampled {
    /// The ledger's row for this sample, priced in `currency`.
    pub fn row(&self, currency: &str) -> Row {
        let measured = self.interval.as_ref().filter(|i| i.joules.is_some());
        Row {
            t: self.at.unix_seconds,
            seconds: self.seconds,
            start: measured.map(|i| i.unix_start),
            watts: self.snapshot.headline_watts().map(|w| w.0),
            joules: self.step.headline.joules.0,
            cost: self.step.headline.cost,
            scope: self.step.scope,
            quality: measured.and_then(|i| i.quality),
            method: measured.and_then(|i| i.method),
            answered: measured.and_then(|i| i.answered),
            slots: self.step.headline.slots.clone(),
            by_domain: self
                .step
                .by_domain
                .iter()
                .map(|(d, j)| (d.as_str().to_string(), j.0))
                .collect(),
            currency: currency.to_string(),
        }
    }
}

/// One point of the recent-watts history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Wall-clock time, seconds since the Unix epoch.
    pub t: f64,
    /// `None` where no headline could be read: a hole in the line, not a zero.
    pub watts: Option<f64>,
}

/// How much recent history the engine keeps for sparklines.
pub const RECENT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Adds a point and forgets what is older than [`RECENT_WINDOW`] or, after the wall clock went
/// back, newer than the point itself.
pub(crate) fn remember(recent: &mut Ring<Point>, point: Point) {
    while recent.back().is_some_and(|p| p.t > point.t) {
        recent.pop_back();
    }
    recent.push_back(point);
    let oldest = point.t - RECENT_WINDOW.as_secs_f64();
    while recent.front().is_some_and(|p| p.t < oldest) {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_points_older_than_the_window_or_after_a_backward_step_are_forgotten() {
        let mut recent = Ring::default();
        let at = |t: f64| Point {
            t,
            watts: Some(1.0),
        };
        for t in [0.0, 100.0, 200.0, 301.0] {
            remember(&mut recent, at(t));
        }
        let ts = |r: &Ring<Point>| r.iter().map(|p| p.t).collect::<Vec<_>>();
        assert_eq!(ts(&recent), vec![100.0, 200.0, 301.0]);
        // The wall clock went back by 150 s.
        remember(&mut recent, at(151.0));
        assert_eq!(ts(&recent), vec![100.0, 151.0]);
    }
}
