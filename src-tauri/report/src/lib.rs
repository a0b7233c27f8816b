//! Wattbar's reports, drawn with plotters: power over time per domain, energy per day with its
//! cost, and energy per model.
//!
//! Rules:
//! - Pure drawing: the caller passes the figures and the local time offset; nothing here reads a
//!   clock, a file or the ledger.
//! - Overlapping domains are drawn as lines, never stacked: a CPU package already contains its
//!   cores, and the whole system contains both.
//! - A missing reading is a gap in its line, never a drop to 0 W.
//! - Printable: white background, titles, axis labels with units, local times, legends.
//! - No system fonts: DejaVu Sans is embedded and registered before anything is drawn.

mod draw;

use std::path::Path;

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
    fn panels(&self) -> usize {
        1 + usize::from(!self.days.is_empty()) + usize::from(!self.models.is_empty())
    }

    /// A size that gives each chart room: 1400 px wide, 520 px per chart plus the title.
    pub fn default_size(&self) -> (u32, u32) {
        (1400, TITLE_HEIGHT + 520 * self.panels() as u32)
    }
}

/// The height of the title band at the top.
const TITLE_HEIGHT: u32 = 80;
/// The smallest picture a report is drawn at.
pub const MIN_SIZE: (u32, u32) = (1200, 600);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("a report is at least 1200×600 pixels, not {0}×{1}")]
    TooSmall(u32, u32),
    #[error("the report could not be drawn: {0}")]
    Draw(String),
}

fn check(size: (u32, u32)) -> Result<(), Error> {
    if size.0 < MIN_SIZE.0 || size.1 < MIN_SIZE.1 {
        return Err(Error::TooSmall(size.0, size.1));
    }
    Ok(())
}

/// The report as an SVG document.
pub fn svg(report: &Report, size: (u32, u32)) -> Result<String, Error> {
    check(size)?;
    draw::font()?;
    let mut out = String::new();
    {
        let backend = plotters::prelude::SVGBackend::with_string(&mut out, size);
        draw::report(backend, report)?;
    }
    Ok(out)
}

/// The report as a PNG file at `path`.
pub fn png(report: &Report, size: (u32, u32), path: &Path) -> Result<(), Error> {
    check(size)?;
    draw::font()?;
    let backend = plotters::prelude::BitMapBackend::new(path, size);
    draw::report(backend, report)
}

#[cfg(test)]
mod tests;
