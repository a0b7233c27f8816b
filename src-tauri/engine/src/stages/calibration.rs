//! Calibration, the engine's side: one [`Calibration`] learns the line from the machine's parts
//! to a whole-machine reference while both read, and stands in for the reference when it is
//! gone ([`wattbar_core::calibration`] has the maths and the rules of a fit).
//!
//! Rules:
//! - Windows follow one (reference scope, parts) at a time: when the reference's scope or the
//!   parts summed change (another plug, a GPU joined), what was learned of the old pair is
//!   dropped, and the last accepted fit stays until a new one is made.
//! - A fit is tried at each completed window; a refusal keeps the last fit and says why.
//! - A new fit is written with the next batch, and read back at start.

use serde::Serialize;
use std::sync::Arc;
use wattbar_core::calibration::{Learned, Learner, Refusal, Window, MIN_WINDOWS};
use wattbar_core::{Scope, Snapshot, Watts};

/// What readers see of calibration.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CalibrationView {
    /// The fit in use; `None` before any was accepted.
    pub learned: Option<Learned>,
    /// Why the last try was refused, while no newer fit was accepted since.
    pub refusal: Option<String>,
    /// Windows of both figures kept now, and how many a fit needs.
    pub windows: usize,
    pub windows_needed: usize,
    /// The reference and parts the windows are of, while learning.
    pub learning: Option<(Scope, Vec<String>)>,
    /// The parts' own mean absolute percentage error against the reference over the kept
    /// windows (a fraction): the error the fit removes.
    pub before_mape: Option<f64>,
    /// The headline is calibrated now: the reference is gone and the fit stands in for it.
    pub standing_in: bool,
    /// The calibrated headline's bound, watts, while it stands in.
    pub bound_watts: Option<f64>,
}

#[derive(Debug, Default)]
pub struct Calibration {
    learner: Learner,
    /// The reference scope and the parts the learner's windows are of.
    learning: Option<(Scope, Vec<String>)>,
    learned: Option<Learned>,
    refusal: Option<Refusal>,
    /// A fit made since the last [`Calibration::take_fresh`].
    fresh: bool,
    /// Rebuilt only when something in it changed: at rest, nothing is built per sample.
    view: Arc<CalibrationView>,
}

impl Calibration {
    /// Starts from the fit the ledger kept, if any.
    pub fn new(restored: Option<Learned>) -> Calibration {
        let mut c = Calibration {
            learned: restored,
            ..Calibration::default()
        };
        c.view = Arc::new(c.view_of(None));
        c
    }

    /// Observes `snapshot`, taken at wall-clock `unix`, and returns it with a calibrated
    /// headline where the reference is gone and a fit stands in for it.
    pub fn take(&mut self, snapshot: Snapshot, unix: f64) -> Snapshot {
        let reference = snapshot.reference();
        let parts = snapshot.components();
        let mut changed = false;
        if let (Some((_, scope)), Some((_, coverage))) = (&reference, &parts) {
            if self
                .learning
                .as_ref()
                .is_none_or(|(s, c)| s != scope || *c != coverage.covers)
            {
                self.learner.reset();
                self.learning = Some((*scope, coverage.covers.clone()));
                changed = true;
            }
        }
        let t = snapshot.at.monotonic.as_secs_f64();
        if self
            .learner
            .observe(t, reference.map(|r| r.0), parts.map(|p| p.0))
        {
            self.refit(unix);
            changed = true;
        }
        let Some(learned) = &self.learned else {
            if changed {
                self.view = Arc::new(self.view_of(None));
            }
            return snapshot;
        };
        let out = learned.stand_in(snapshot);
        let bound = learned.bound(&out);
        if changed || bound.is_some() || self.view.standing_in {
            self.view = Arc::new(self.view_of(bound));
        }
        out
    }

    fn refit(&mut self, unix: f64) {
        let Some((reference, covers)) = self.learning.clone() else {
            return;
        };
        match self.learner.fit() {
            Ok(fit) => {
                self.learned = Some(Learned {
                    fit,
                    reference,
                    covers,
                    fitted_unix: unix,
                });
                self.refusal = None;
                self.fresh = true;
            }
            Err(r) => self.refusal = Some(r),
        }
    }

    /// A fit made since the last call, to be written.
    pub fn take_fresh(&mut self) -> Option<Learned> {
        if !std::mem::take(&mut self.fresh) {
            return None;
        }
        self.learned.clone()
    }

    /// What readers see, as of the last sample.
    pub fn view(&self) -> Arc<CalibrationView> {
        Arc::clone(&self.view)
    }

    fn view_of(&self, bound: Option<Watts>) -> CalibrationView {
        CalibrationView {
            learned: self.learned.clone(),
            refusal: self.refusal.map(|r| r.to_string()),
            windows: self.learner.windows().len(),
            windows_needed: MIN_WINDOWS,
            learning: self.learning.clone(),
            before_mape: before_mape(self.learner.windows()),
            standing_in: bound.is_some(),
            bound_watts: bound.map(|b| b.0),
        }
    }
}

/// The parts' mean absolute percentage error against the reference, over `windows`.
pub fn before_mape(windows: &[Window]) -> Option<f64> {
    let errors: Vec<f64> = windows
        .iter()
        .filter(|w| w.reference_watts > 0.0)
        .map(|w| (w.components_watts - w.reference_watts).abs() / w.reference_watts)
        .collect();
    (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64)
}
