//! A run's `report.svg`: its power per domain over time with the phases shaded and the marks
//! drawn, titled with what ran and what it drew.

use super::events::{self, Event};
use super::samples::State;
use super::summary::Summary;
use super::trace::RunTrace;
use anyhow::Result;
use chrono::Offset;
use wattbar_report::{Line, Mark, Report, Span};

/// At most this many points a line: a chart some 1200 pixels wide shows no more, and a run of
/// hours has hundreds of thousands of samples.
const MAX_POINTS: f64 = 2000.0;

/// A line's points, each the mean of a bucket of `width` seconds from `from` when `width` is
/// positive, else each sample as it is. A bucket with no reading at all is a gap.
struct Points {
    from: f64,
    width: f64,
    points: Vec<(f64, Option<f64>)>,
    open: Option<(i64, f64, u32)>,
}

impl Points {
    fn new(from: f64, width: f64) -> Points {
        Points {
            from,
            width,
            points: Vec::new(),
            open: None,
        }
    }

    fn push(&mut self, t: f64, watts: Option<f64>) {
        if self.width <= 0.0 {
            self.points.push((t, watts));
            return;
        }
        // The first state at or after the end closes the last interval: it joins the last bucket.
        let last = MAX_POINTS as i64 - 1;
        let bucket = (((t - self.from) / self.width).floor() as i64).clamp(0, last);
        if self.open.is_some_and(|(b, _, _)| b != bucket) {
            self.flush();
        }
        let (_, sum, n) = self.open.get_or_insert((bucket, 0.0, 0));
        if let Some(w) = watts {
            *sum += w;
            *n += 1;
        }
    }

    fn flush(&mut self) {
        if let Some((b, sum, n)) = self.open.take() {
            let middle = self.from + (b as f64 + 0.5) * self.width;
            self.points
                .push((middle, (n > 0).then(|| sum / f64::from(n))));
        }
    }

    fn done(mut self) -> Vec<(f64, Option<f64>)> {
        self.flush();
        self.points
    }
}

/// The lines of the power chart from `from` to `to`: the headline first (`total`), then the
/// best reading of each domain and device, as the engine ranked them. When the period holds
/// more than [`MAX_POINTS`] sampling intervals, each line is averaged over that many buckets.
pub fn power_lines(
    states: impl Iterator<Item = State>,
    from: f64,
    to: f64,
    interval_seconds: f64,
) -> Vec<Line> {
    let span = to - from;
    let width = if interval_seconds > 0.0 && span / interval_seconds > MAX_POINTS {
        span / MAX_POINTS
    } else {
        0.0
    };
    let mut total = Points::new(from, width);
    let mut lines: Vec<(String, Points)> = Vec::new();
    for s in states {
        let Some(t) = s.at else { continue };
        total.push(t, s.watts);
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
            match lines.iter_mut().find(|(n, _)| *n == name) {
                Some((_, points)) => points.push(t, item.watts),
                None => {
                    let mut points = Points::new(from, width);
                    points.push(t, item.watts);
                    lines.push((name, points));
                }
            }
        }
    }
    let total = Line {
        name: "total".into(),
        points: total.done(),
    };
    let mut lines: Vec<Line> = lines
        .into_iter()
        .map(|(name, points)| Line {
            name,
            points: points.done(),
        })
        .collect();
    // A reading that is the total itself is drawn once, as the total.
    lines.retain(|l| l.points != total.points);
    std::iter::once(total).chain(lines).collect()
}

pub fn svg(summary: &Summary, kept: &RunTrace) -> Result<String> {
    let events = &kept.events;
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
        power: power_lines(kept.states(), kept.from, kept.to, summary.interval_seconds),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::run::samples::Item;
    use wattbar_core::Quality;

    /// A state at `t` with a headline of `watts` and a cpu reading of half of it.
    fn state(t: f64, watts: Option<f64>) -> State {
        State {
            at: Some(t),
            watts,
            quality: Some(Quality::Measured),
            source: Some("replay".into()),
            domain: Some("system".into()),
            breakdown: vec![Item {
                domain: "cpu".into(),
                device: None,
                watts: watts.map(|w| w / 2.0),
                source: "replay".into(),
                quality: Quality::Measured,
                total_joules: None,
            }],
            unavailable: Vec::new(),
            session_joules: 0.0,
            battery: None,
            interval_ms: 100,
            period_ms: Some(100),
        }
    }

    #[test]
    fn a_short_run_draws_every_sample() {
        let states = (0..50).map(|k| state(f64::from(k) * 0.1, Some(100.0 + f64::from(k))));
        let lines = power_lines(states, 0.0, 5.0, 0.1);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].points.len(), 50);
        assert_eq!(lines[0].points[7], (0.7000000000000001, Some(107.0)));
        assert_eq!(lines[1].points[7].1, Some(53.5));
    }

    #[test]
    fn an_hour_at_10_hz_is_drawn_as_2000_means_with_its_gap_kept() {
        // 36 000 samples: 50 W, 250 W from 600 s to 900 s, nothing read from 1800 s to 1900 s.
        let states = (0..36_000).map(|k| {
            let t = f64::from(k) * 0.1;
            let watts = if (1800.0..1900.0).contains(&t) {
                None
            } else if (600.0..900.0).contains(&t) {
                Some(250.0)
            } else {
                Some(50.0)
            };
            state(t, watts)
        });
        let lines = power_lines(states, 0.0, 3600.0, 0.1);
        let total = &lines[0].points;
        // Buckets of 3600 s / 2000 = 1.8 s, drawn at their middles.
        assert_eq!(total.len(), 2000);
        assert!((total[0].0 - 0.9).abs() < 1e-9);
        // 600 s starts bucket 333.33…: that bucket is one third 50 W and two thirds 250 W.
        let at = |t: f64| {
            total
                .iter()
                .find(|p| (p.0 - t).abs() < 0.9)
                .and_then(|p| p.1)
        };
        assert_eq!(at(300.0), Some(50.0));
        assert_eq!(at(700.0), Some(250.0));
        let mixed = total[333].1.unwrap_or_default();
        assert!(
            (mixed - (6.0 * 50.0 + 12.0 * 250.0) / 18.0).abs() < 1e-6,
            "{mixed}"
        );
        // The 100 s with no reading are gaps, never 0 W.
        assert_eq!(at(1850.0), None);
        assert!(total.iter().filter_map(|p| p.1).all(|w| w >= 50.0));
        let gaps = total.iter().filter(|p| p.1.is_none()).count();
        assert!((55..=56).contains(&gaps), "{gaps} gaps");
        // The cpu line is bucketed the same way.
        assert_eq!(lines[1].points.len(), 2000);
        assert_eq!(lines[1].points[400].1, Some(125.0));
    }
}
