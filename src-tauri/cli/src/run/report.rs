//! A run's `report.svg`: its power per domain over time with the phases shaded and the marks
//! drawn, titled with what ran and what it drew.

use super::events::{self, Event};
use super::meter::State;
use super::summary::Summary;
use anyhow::Result;
use chrono::Offset;
use wattbar_report::{Line, Mark, Report, Span};

/// The lines of the power chart: the headline first (`total`), then the best reading of each
/// domain and device, as the engine ranked them.
pub fn power_lines(states: &[State]) -> Vec<Line> {
    let mut total = Line {
        name: "total".into(),
        points: Vec::new(),
    };
    let mut lines: Vec<Line> = Vec::new();
    for s in states {
        let Some(t) = s.at else { continue };
        total.points.push((t, s.watts));
        let mut seen: Vec<String> = Vec::new();
        for item in &s.breakdown {
            let name = match &item.device {
                Some(d) => format!("{} {d} ({})", item.domain, item.source),
                None => format!("{} ({})", item.domain, item.source),
            };
            let key = format!("{}/{:?}", item.domain, item.device);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.points.push((t, item.watts)),
                None => lines.push(Line {
                    name,
                    points: vec![(t, item.watts)],
                }),
            }
        }
    }
    // A reading that is the total itself is drawn once, as the total.
    lines.retain(|l| l.points != total.points);
    std::iter::once(total).chain(lines).collect()
}

pub fn svg(summary: &Summary, events: &[(usize, u32, Event)], states: &[State]) -> Result<String> {
    let runs: Vec<_> = summary.results.iter().flat_map(|c| c.runs.iter()).collect();
    let several = runs.len() > 1;
    let mut spans = Vec::new();
    let mut marks = Vec::new();
    for r in &runs {
        let mine: Vec<Event> = events
            .iter()
            .filter(|(c, n, _)| {
                summary.results.get(*c).map(|x| &x.command) == Some(&r.command) && *n == r.run
            })
            .map(|(_, _, e)| e.clone())
            .collect();
        for p in events::phases(&mine, r.start, r.end) {
            spans.push(Span {
                name: if several {
                    format!("{} #{}: {}", r.command, r.run, p.name)
                } else {
                    p.name
                },
                from: p.from,
                to: p.to,
            });
        }
        for e in mine.iter().filter(|e| e.kind == "mark") {
            marks.push(Mark {
                t: e.ts,
                name: e.name().unwrap_or("mark").to_string(),
            });
        }
        if several {
            marks.push(Mark {
                t: r.start,
                name: format!("{} #{}", r.command, r.run),
            });
        }
    }
    if let Some(b) = &summary.baseline {
        if let Some(first) = runs.first() {
            spans.insert(
                0,
                Span {
                    name: "idle baseline".into(),
                    from: first.start - b.seconds,
                    to: first.start,
                },
            );
        }
    }
    let title = match summary.results.as_slice() {
        [one] => format!("Wattbar run: {}", shorten(&one.command, 90)),
        many => format!("Wattbar run: {} commands compared", many.len()),
    };
    let subtitle = runs
        .iter()
        .take(3)
        .map(|r| {
            let energy = r
                .gross_joules
                .map_or("not measured".to_string(), |j| format!("{j:.1} J"));
            let peak = r
                .peak_watts
                .map(|p| format!(", peak {p:.1} W"))
                .unwrap_or_default();
            format!("{energy} in {:.3} s{peak}", r.seconds)
        })
        .collect::<Vec<_>>()
        .join("  ·  ")
        + &format!("  —  {}", summary.measured);
    let report = Report {
        title,
        subtitle,
        offset: chrono::Local::now().offset().fix(),
        power: power_lines(states),
        spans,
        marks,
        days: Vec::new(),
        currency: String::new(),
        models: Vec::new(),
    };
    Ok(wattbar_report::svg(&report, report.default_size())?)
}

/// At most `max` characters, with an ellipsis when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
