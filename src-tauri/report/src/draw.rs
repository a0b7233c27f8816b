//! The drawing itself, for any plotters backend.

use super::error::Error;
use super::model::{Report, TITLE_HEIGHT};
use chrono::TimeZone;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::sync::OnceLock;

static FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
pub(crate) const FAMILY: &str = "sans-serif";
/// A phase or mark is named only where it has this share of the time axis to itself.
const NAME_ROOM: f64 = 0.04;
/// Up to this many marks are drawn dashed; more are drawn as plain lines, far smaller in SVG.
const DASHED_MARKS_UP_TO: usize = 100;

/// Registers the embedded font, once.
pub fn font() -> Result<(), Error> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font is not a font".to_string())
        })
        .clone()
        .map_err(Error::Draw)
}

/// Colours that tell lines apart on paper and on screen.
pub(crate) const COLORS: [RGBColor; 8] = [
    RGBColor(0, 90, 181),
    RGBColor(220, 50, 32),
    RGBColor(0, 140, 70),
    RGBColor(230, 140, 0),
    RGBColor(120, 60, 170),
    RGBColor(0, 160, 170),
    RGBColor(150, 100, 40),
    RGBColor(90, 90, 90),
];

pub(crate) fn err<E: std::fmt::Debug>(e: E) -> Error {
    Error::Draw(format!("{e:?}"))
}

pub fn report<DB: DrawingBackend>(backend: DB, r: &Report) -> Result<(), Error> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, rest) = root.split_vertically(TITLE_HEIGHT);
    top.draw(&Text::new(
        r.title.clone(),
        (24, 14),
        (FAMILY, 28).into_font().color(&BLACK),
    ))
    .map_err(err)?;
    top.draw(&Text::new(
        r.subtitle.clone(),
        (24, 50),
        (FAMILY, 16).into_font().color(&RGBColor(80, 80, 80)),
    ))
    .map_err(err)?;
    let areas = rest.split_evenly((r.panels(), 1));
    let mut areas = areas.iter();
    if let Some(a) = areas.next() {
        power(a, r)?;
    }
    if !r.days.is_empty() {
        if let Some(a) = areas.next() {
            days(a, r)?;
        }
    }
    if !r.models.is_empty() {
        if let Some(a) = areas.next() {
            models(a, r)?;
        }
    }
    root.present().map_err(err)
}

/// A time axis (Unix seconds) whose ticks are the given round local times, so that a week's
/// chart is marked at midnights and a day's at whole hours.
struct LocalTime {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for LocalTime {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let width = self.range.end - self.range.start;
        let share = if width > 0.0 {
            (value - self.range.start) / width
        } else {
            0.0
        };
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.max_num_points() == 0 {
            return Vec::new();
        }
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// Steps between time ticks, seconds: the smallest that gives at most [`MAX_TICKS`] is used.
const TICK_STEPS: [f64; 24] = [
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    900.0,
    1800.0,
    3600.0,
    7200.0,
    10_800.0,
    21_600.0,
    43_200.0,
    86_400.0,
    172_800.0,
    604_800.0,
    2_592_000.0,
];
const MAX_TICKS: f64 = 10.0;

/// Ticks on round local times between `t0` and `t1`: local midnights over a week, whole hours
/// over a day, and so on down to tenths of a second.
pub(crate) fn local_ticks(offset: &chrono::FixedOffset, t0: f64, t1: f64) -> Vec<f64> {
    let shift = f64::from(offset.local_minus_utc());
    let span = t1 - t0;
    let step = TICK_STEPS
        .iter()
        .copied()
        .find(|s| span / s <= MAX_TICKS)
        .unwrap_or(TICK_STEPS[TICK_STEPS.len() - 1]);
    let mut t = ((t0 + shift) / step).ceil() * step - shift;
    let mut ticks = Vec::new();
    while t <= t1 && ticks.len() <= MAX_TICKS as usize {
        ticks.push(t);
        t += step;
    }
    ticks
}

fn local(offset: &chrono::FixedOffset, t: f64) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    let secs = t.floor() as i64;
    let nanos = ((t - t.floor()) * 1e9) as u32;
    offset.timestamp_opt(secs, nanos).single()
}

fn time_label(offset: &chrono::FixedOffset, span: f64, t: f64) -> String {
    let Some(d) = local(offset, t) else {
        return String::new();
    };
    if span <= 20.0 {
        // Tenths of a second: chrono gives milliseconds, the last two digits are cut.
        let mut text = d.format("%H:%M:%S%.3f").to_string();
        text.truncate(text.len().saturating_sub(2));
        text
    } else if span <= 120.0 {
        d.format("%H:%M:%S").to_string()
    } else if span <= 2.0 * 86_400.0 {
        d.format("%H:%M").to_string()
    } else if d.format("%H:%M").to_string() == "00:00" {
        d.format("%a %d %b").to_string()
    } else {
        d.format("%a %d %b %H:%M").to_string()
    }
}

fn power<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &Report) -> Result<(), Error> {
    let all = r.power.iter().flat_map(|l| l.points.iter());
    let (mut t0, mut t1, mut top) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (t, w) in all {
        t0 = t0.min(*t);
        t1 = t1.max(*t);
        if let Some(w) = w.filter(|w| w.is_finite()) {
            top = top.max(w);
        }
    }
    for s in &r.spans {
        t0 = t0.min(s.from);
        t1 = t1.max(s.to);
    }
    if !t0.is_finite() || !t1.is_finite() {
        return nothing(area, "Power", "no power was measured in this period");
    }
    if t1 <= t0 {
        t1 = t0 + 1.0;
    }
    let top = if top > 0.0 { top * 1.12 } else { 1.0 };
    let span = t1 - t0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Power per domain (lines overlap, never stacked)",
            (FAMILY, 20),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(
            LocalTime {
                range: t0..t1,
                ticks: local_ticks(&r.offset, t0, t1),
            },
            0f64..top,
        )
        .map_err(err)?;
    let offset = r.offset;
    let formatter = move |t: &f64| time_label(&offset, span, *t);
    chart
        .configure_mesh()
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&formatter)
        .y_label_formatter(&|w: &f64| format!("{w:.0}"))
        .x_desc(format!("local time (UTC{})", r.offset))
        .y_desc("power (W)")
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    for (i, s) in r.spans.iter().enumerate() {
        let shade = if i % 2 == 0 {
            RGBColor(230, 236, 245)
        } else {
            RGBColor(245, 240, 228)
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(s.from, 0.0), (s.to, top)],
                shade.filled(),
            )))
            .map_err(err)?;
        // A name only where there is room for it.
        if (s.to - s.from) < span * NAME_ROOM {
            continue;
        }
        chart
            .draw_series(std::iter::once(Text::new(
                s.name.clone(),
                (s.from, top * 0.97),
                (FAMILY, 13).into_font().color(&RGBColor(60, 60, 60)),
            )))
            .map_err(err)?;
    }
    for (i, line) in r.power.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if i == 0 { 3 } else { 2 };
        let mut labelled = false;
        for segment in segments(&line.points) {
            let series = chart
                .draw_series(LineSeries::new(segment, color.stroke_width(width)))
                .map_err(err)?;
            if !labelled {
                labelled = true;
                series.label(line.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            }
        }
    }
    // Many marks (one a training step, say) are drawn as plain thin lines, one element each,
    // and a mark is named only where the last named one is far enough away to leave room.
    let many = r.marks.len() > DASHED_MARKS_UP_TO;
    let mut last_named: Option<f64> = None;
    for m in &r.marks {
        if many {
            chart
                .draw_series(LineSeries::new(
                    vec![(m.t, 0.0), (m.t, top)],
                    RGBColor(150, 150, 150).stroke_width(1),
                ))
                .map_err(err)?;
        } else {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(m.t, 0.0), (m.t, top)],
                    6,
                    4,
                    RGBColor(60, 60, 60).stroke_width(1),
                ))
                .map_err(err)?;
        }
        if last_named.is_some_and(|t| (m.t - t).abs() < span * NAME_ROOM) {
            continue;
        }
        last_named = Some(m.t);
        chart
            .draw_series(std::iter::once(Text::new(
                m.name.clone(),
                (m.t, top * 0.90),
                (FAMILY, 13).into_font().color(&BLACK),
            )))
            .map_err(err)?;
    }
    if !r.power.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font((FAMILY, 14))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// The runs of consecutive readings, split at gaps.
pub(crate) fn segments(points: &[(f64, Option<f64>)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for (t, w) in points {
        match w.filter(|w| w.is_finite()) {
            Some(w) => cur.push((*t, w)),
            None if !cur.is_empty() => out.push(std::mem::take(&mut cur)),
            None => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn nothing<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    why: &str,
) -> Result<(), Error> {
    area.draw(&Text::new(
        format!("{title}: {why}"),
        (30, 40),
        (FAMILY, 18).into_font().color(&RGBColor(80, 80, 80)),
    ))
    .map_err(err)
}

/// Vertical bars over categories with a value label above each.
fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    y_desc: &str,
    bars: &[(String, Option<f64>, String)],
) -> Result<(), Error> {
    let top = bars.iter().filter_map(|b| b.1).fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.2 } else { 1.0 };
    let n = bars.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, 0f64..top)
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let label = move |x: &f64| {
        let i = x.floor();
        if (x - i - 0.5).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&label)
        .y_labels(8)
        .y_desc(y_desc)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            let x = i as f64;
            Some(Rectangle::new(
                [(x + 0.15, 0.0), (x + 0.85, b.1?)],
                COLORS[0].filled(),
            ))
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let grey = RGBColor(120, 120, 120);
            let color = if b.1.is_some() { BLACK } else { grey };
            Text::new(
                b.2.clone(),
                (i as f64 + 0.2, b.1.unwrap_or(0.0) + top * 0.03),
                (FAMILY, 13).into_font().color(&color),
            )
        }))
        .map_err(err)?;
    Ok(())
}

fn days<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &Report) -> Result<(), Error> {
    let items: Vec<(String, Option<f64>, String)> = r
        .days
        .iter()
        .map(|d| {
            let text = match (d.kwh, d.cost) {
                (Some(kwh), Some(c)) => format!("{kwh:.3} kWh · {c:.2} {}", r.currency),
                (Some(kwh), None) => format!("{kwh:.3} kWh"),
                (None, _) => "no data".to_string(),
            };
            (d.label.clone(), d.kwh, text)
        })
        .collect();
    bars(
        area,
        "Energy per day, with its cost",
        "energy (kWh)",
        &items,
    )
}

fn models<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &Report) -> Result<(), Error> {
    let items: Vec<(String, Option<f64>, String)> = r
        .models
        .iter()
        .map(|m| {
            (
                m.model.clone(),
                Some(m.joules_per_token),
                format!(
                    "{:.2} J/token · {} requests",
                    m.joules_per_token, m.requests
                ),
            )
        })
        .collect();
    bars(
        area,
        "Energy per token, by model",
        "energy per token (J)",
        &items,
    )
}
