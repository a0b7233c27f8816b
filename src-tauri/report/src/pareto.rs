//! A figure against energy, one point per profile run, with the efficient front: accuracy
//! against energy per query (`profile compare`), or tokens/s against energy per unit (a sweep's
//! steps).
//!
//! Rules: each group of runs that may be ranked together is its own colour; a run's figure
//! carries its interval as a vertical bar and its energy's bound as a horizontal one; the front
//! is a line through its runs, cheapest first, and is named in the legend; a run whose figure or
//! energy is unknown is not drawn (the table lists it). The vertical axis runs to 1.05 for
//! figures up to 1 (accuracy), else 15 % above the highest.

use super::draw::{err, COLORS, FAMILY};
use super::error::Error;
use plotters::prelude::*;

/// One run on the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoPoint {
    pub label: String,
    /// Energy per query (or per unit), joules.
    pub x: f64,
    /// The energy is within this many joules of the truth; `None` where not known (no bar).
    pub x_bound: Option<f64>,
    /// The figure: accuracy, tokens/s.
    pub y: f64,
    /// The figure's interval.
    pub low: f64,
    pub high: f64,
    pub efficient: bool,
}

/// Runs that may be ranked together.
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoGroup {
    pub name: String,
    pub points: Vec<ParetoPoint>,
}

/// The chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Pareto {
    pub title: String,
    /// What the axes are, in words with their units.
    pub x_desc: String,
    pub y_desc: String,
    pub groups: Vec<ParetoGroup>,
}

pub(crate) fn pareto<DB: DrawingBackend>(backend: DB, p: &Pareto) -> Result<(), Error> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let all = || p.groups.iter().flat_map(|g| g.points.iter());
    let max_j = all()
        .map(|q| q.x + q.x_bound.unwrap_or(0.0))
        .fold(0.0, f64::max);
    let x_max = if max_j > 0.0 { max_j * 1.15 } else { 1.0 };
    let max_y = all().map(|q| q.high.max(q.y)).fold(0.0, f64::max);
    let y_max = if max_y > 1.0 { max_y * 1.15 } else { 1.05 };
    let mut chart = ChartBuilder::on(&root)
        .caption(p.title.clone(), (FAMILY, 24))
        .margin(24)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(p.x_desc.as_str())
        .y_desc(p.y_desc.as_str())
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for (k, g) in p.groups.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        chart
            .draw_series(g.points.iter().map(|q| {
                PathElement::new(vec![(q.x, q.low), (q.x, q.high)], color.stroke_width(1))
            }))
            .map_err(err)?;
        chart
            .draw_series(
                g.points
                    .iter()
                    .filter_map(|q| Some((q, q.x_bound?)))
                    .map(|(q, b)| {
                        PathElement::new(
                            vec![(q.x - b, q.y), (q.x + b, q.y)],
                            color.stroke_width(1),
                        )
                    }),
            )
            .map_err(err)?;
        chart
            .draw_series(
                g.points
                    .iter()
                    .map(|q| Circle::new((q.x, q.y), 5, color.filled())),
            )
            .map_err(err)?
            .label(g.name.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.filled()));
        chart
            .draw_series(g.points.iter().map(|q| {
                Text::new(
                    q.label.clone(),
                    (q.x, q.y),
                    (FAMILY, 13).into_font().color(&BLACK),
                )
            }))
            .map_err(err)?;
        let mut front: Vec<(f64, f64)> = g
            .points
            .iter()
            .filter(|q| q.efficient)
            .map(|q| (q.x, q.y))
            .collect();
        front.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !front.is_empty() {
            chart
                .draw_series(LineSeries::new(front, color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{}: efficient front", g.name))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FAMILY, 13))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
