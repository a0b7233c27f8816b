//! What a run keeps for its output files besides the summary: the events, and the samples of
//! the window it measured.

use super::events::Event;
use super::samples::{Samples, State};

/// What the output files are made of besides the summary: the events, and the samples from
/// `from` to `to`.
pub struct RunTrace {
    pub events: Vec<(usize, u32, Event)>,
    pub samples: Samples,
    pub from: f64,
    pub to: f64,
}

impl RunTrace {
    pub(super) fn nothing() -> RunTrace {
        RunTrace {
            events: Vec::new(),
            samples: Samples::default(),
            from: 0.0,
            to: 0.0,
        }
    }

    pub fn states(&self) -> impl Iterator<Item = State> + '_ {
        self.samples.states(self.from, self.to)
    }
}
