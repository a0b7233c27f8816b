//! What a report shows: the figures the caller passes in, and the size they need.

/// One line of the power chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    /// Unix seconds and watts; `None` is a gap.
    pub points: Vec<(f64, Option<f64>)>,
}

/// A named stretch of time, shaded (a run's phase).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub name: String,
    pub from: f64,
    pub to: f64,
}

/// A moment with a label (a run's mark).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub t: f64,
    pub name: String,
}

/// One day's energy and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    /// Its local date, e.g. `2026-11-23`.
    pub label: String,
    /// `None` when nothing was recorded that day: drawn as "no data", never as 0 kWh.
    pub kwh: Option<f64>,
    pub cost: Option<f64>,
}

/// One model's energy per token.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEnergy {
    pub model: String,
    pub joules_per_token: f64,
    pub requests: u64,
}

/// Everything a report shows. Empty parts are left out.
#[derive(Debug, Clone)]
pub struct Report {
    pub title: String,
    pub subtitle: String,
    /// The reader's time zone as an offset, for the time axis.
    pub offset: chrono::FixedOffset,
    pub power: Vec<Line>,
    pub spans: Vec<Span>,
    pub marks: Vec<Mark>,
    pub days: Vec<Day>,
    pub currency: String,
    pub models: Vec<ModelEnergy>,
}

impl Report {
    /// The charts the report has, in order.
    pub(crate) fn panels(&self) -> usize {
        1 + usize::from(!self.days.is_empty()) + usize::from(!self.models.is_empty())
    }

    /// A size that gives each chart room: 1400 px wide, 520 px per chart plus the title.
    pub fn default_size(&self) -> (u32, u32) {
        (1400, TITLE_HEIGHT + 520 * self.panels() as u32)
    }
}

/// The height of the title band at the top.
pub(crate) const TITLE_HEIGHT: u32 = 80;
