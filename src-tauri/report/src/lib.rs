//! Wattbar's reports, drawn with plotters: power over time per domain, energy per day with its
//! cost, and energy per model; and profile runs' accuracy against their energy ([`pareto_svg`]).
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
mod error;
mod model;
mod pareto;

pub use error::Error;
pub use model::{Day, Line, Mark, ModelEnergy, Report, Span};
pub use pareto::{Pareto, ParetoGroup, ParetoPoint};

use std::path::Path;

/// The smallest picture a report is drawn at.
pub const MIN_SIZE: (u32, u32) = (1200, 600);

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
    Ok(xml_safe(&out))
}

/// Profile runs' accuracy against their energy per query, with each group's efficient front,
/// as an SVG document of 1200×800.
pub fn pareto_svg(chart: &Pareto) -> Result<String, Error> {
    draw::font()?;
    let mut out = String::new();
    {
        let backend = plotters::prelude::SVGBackend::with_string(&mut out, (1200, 800));
        pareto::pareto(backend, chart)?;
    }
    Ok(xml_safe(&out))
}

/// `text` with each character XML forbids replaced: plotters escapes markup but not NUL and most
/// other C0 controls, and a name holding one would make the whole document unreadable.
fn xml_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if xml_char(c) {
                c
            } else {
                char::REPLACEMENT_CHARACTER
            }
        })
        .collect()
}

/// Whether XML 1.0 allows `c` in a document (its `Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
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
