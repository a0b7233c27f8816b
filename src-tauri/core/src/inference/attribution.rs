//! Splitting measured energy among requests.
//!
//! Rule: within a sampling interval the power is taken as constant (the interval's energy over its
//! length: what a counter or the trapezoid rule gives). The interval is cut at every request's
//! start, first token and end; each piece's energy goes in equal parts to the requests in flight
//! during it, and to nobody when none is. So one request gets the energy of its own window, and
//! overlapping requests add up to the energy of the union of their windows, never more (windows
//! that each take the whole machine's energy count it once per request). Requests settled at
//! different times share through [`Claims`]: what earlier records hold of a piece is theirs, and
//! only the rest is shared ([`attribute_held`]).
//! - A request's energy is in one scope, that of the latest measured interval its window
//!   overlaps ([`span_coverage`]). Of an interval of another scope it takes nothing, and that
//!   time is not measured for it; the others' shares of the piece are as if it took its part.
//! - The idle baseline is taken in the scope of the latest measured interval, and only nets
//!   energy of the same scope.
//!
//! Time is one timeline in seconds (the engine's elapsed clock), given by the caller.

use super::bound::{self, Cut};
use super::claims::Claims;
pub use super::interval::{span_coverage, Answered, Interval, Timeline};
use crate::reading::Quality;
use crate::scope::Coverage;
use serde::Serialize;

/// A request's window on the same timeline; `end: None` while it is still in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start: f64,
    /// The first token: the end of prefill and the start of decode, when known.
    pub split: Option<f64>,
    pub end: Option<f64>,
}

impl Window {
    fn active(&self, a: f64, b: f64) -> bool {
        self.start <= a && self.end.is_none_or(|e| e >= b)
    }
}

/// What one request was given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Share {
    pub joules: f64,
    /// Parts before and after the first token; both 0 when the window has no split.
    pub prefill_joules: f64,
    pub decode_joules: f64,
    /// The request's share of time: each piece's length divided by the requests sharing it.
    /// An idle baseline times this is the request's share of the idle draw.
    pub shared_seconds: f64,
    /// Seconds of the window inside measured intervals.
    pub covered_seconds: f64,
    /// The window's length on the same timeline (0 while it is open).
    pub window_seconds: f64,
    /// The worst quality of the power it was given, and its sources.
    pub quality: Option<Quality>,
    pub sources: Vec<String>,
    /// How far `joules` may be from the true energy of the window's share ([`bound`]).
    pub bound_joules: f64,
    /// The most requests that shared any piece of the window, this one included (1: it had
    /// the machine to itself; records settled before it count too).
    pub shared_by: usize,
    /// The energy of the window that records settled before this one already held.
    pub held_before_joules: f64,
    /// What the energy covers; `None` where not known.
    pub coverage: Option<Coverage>,
}

/// Splits each interval's energy among `windows`, settled together; one [`Share`] per window, in
/// order.
pub fn attribute(intervals: &[Interval], windows: &[Window]) -> Vec<Share> {
    attribute_held(intervals, windows, &[], &[], &mut Claims::default())
}

/// Shares for `settling` (one each, in order), which then hold them in `claims`: of each piece,
/// what `claims` says records settled before hold (those of `settled`) is theirs; the rest goes
/// in equal parts to the windows of `settling` and `open` (in flight, to settle later) active in
/// it.
pub fn attribute_held(
    intervals: &[Interval],
    settling: &[Window],
    open: &[Window],
    settled: &[Window],
    claims: &mut Claims,
) -> Vec<Share> {
    let contenders = settling.len() + open.len();
    let windows: Vec<Window> = settling
        .iter()
        .chain(open)
        .chain(settled)
        .copied()
        .collect();
    let coverages: Vec<Option<Coverage>> = settling
        .iter()
        .map(|w| span_coverage(intervals.iter(), Timeline::Elapsed, w.start, w.end))
        .collect();
    let mut shares: Vec<Share> = settling
        .iter()
        .zip(&coverages)
        .map(|(w, coverage)| Share {
            window_seconds: w.end.map_or(0.0, |e| (e - w.start).max(0.0)),
            coverage: coverage.clone(),
            ..Share::default()
        })
        .collect();
    let mut cuts = Vec::new();
    // Per window settling, this interval's seconds it was in flight and the joules it took.
    let mut taken = vec![(0.0_f64, 0.0_f64); settling.len()];
    for (k, interval) in intervals.iter().enumerate() {
        let (Some(joules), true) = (interval.joules, interval.seconds() > 0.0) else {
            continue;
        };
        let watts = joules / interval.seconds();
        cuts.clear();
        cuts.push(interval.start);
        cuts.push(interval.end);
        for w in &windows {
            for t in [Some(w.start), w.split, w.end].into_iter().flatten() {
                if t > interval.start && t < interval.end {
                    cuts.push(t);
                }
            }
        }
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        taken.iter_mut().for_each(|t| *t = (0.0, 0.0));
        for piece in cuts.windows(2) {
            let (a, b) = (piece[0], piece[1]);
            let active = |i: &usize| windows[*i].active(a, b);
            let n = (0..contenders).filter(active).count();
            if n == 0 {
                continue;
            }
            let sharing = n + (contenders..windows.len()).filter(active).count();
            let free = (watts - claims.held_watts(a, b)).clamp(0.0, watts.max(0.0));
            // The part of the piece's time whose energy is still free, for the idle share.
            let free_fraction = if watts > 0.0 { free / watts } else { 1.0 };
            let part = free * (b - a) / n as f64;
            let mut held_now = 0.0;
            let same = |i: &usize| coverages[*i].as_ref().map(|c| c.scope) == interval.scope();
            for i in (0..settling.len()).filter(active).filter(same) {
                taken[i].0 += b - a;
                taken[i].1 += part;
                held_now += free / n as f64;
                let s = &mut shares[i];
                s.joules += part;
                s.shared_seconds += (b - a) * free_fraction / n as f64;
                s.covered_seconds += b - a;
                s.held_before_joules += (watts - free) * (b - a);
                s.shared_by = s.shared_by.max(sharing);
                match windows[i].split {
                    Some(split) if b <= split => s.prefill_joules += part,
                    Some(_) => s.decode_joules += part,
                    None => {}
                }
                s.quality = s.quality.max(interval.quality);
                if let Some(src) = &interval.source {
                    if !s.sources.contains(src) {
                        s.sources.push(src.clone());
                    }
                }
            }
            claims.hold(a, b, held_now);
        }
        let spread = bound::spread_around(intervals, k);
        for (share, &(seconds, joules)) in shares.iter_mut().zip(&taken) {
            let cut = Cut {
                dt: interval.seconds(),
                watts,
                seconds,
                joules,
                method: interval.method,
                quality: interval.quality,
                answered: interval.answered,
            };
            share.bound_joules += bound::allowance(&cut, spread);
        }
    }
    shares
}

/// Fewest idle intervals a baseline is taken from.
pub const MIN_BASELINE_SAMPLES: usize = 10;

/// The machine's draw with no request in flight.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Baseline {
    pub watts: f64,
    /// How far the idle draw strayed from `watts`: nine idle intervals in ten were within it
    /// (the larger distance from the median to the 5th or the 95th percentile); `None` for a
    /// baseline stored before it was taken.
    #[serde(default)]
    pub spread_watts: Option<f64>,
    /// Idle intervals the median was taken over, and the wall-clock span they cover.
    pub samples: usize,
    pub from: f64,
    pub to: f64,
    pub method: String,
    /// What the idle draw covers; it nets only energy of the same scope. `None` where not
    /// known (a baseline stored before coverage was kept).
    #[serde(default)]
    pub coverage: Option<Coverage>,
}

/// The median draw of the measured intervals during which no window was open; `None` with fewer
/// than [`MIN_BASELINE_SAMPLES`].
pub fn idle_baseline(intervals: &[Interval], windows: &[Window]) -> Option<Baseline> {
    let coverage = span_coverage(intervals.iter(), Timeline::Elapsed, f64::NEG_INFINITY, None);
    let scope = coverage.as_ref().map(|c| c.scope);
    let idle: Vec<&Interval> = intervals
        .iter()
        .filter(|i| i.watts().is_some() && i.scope() == scope)
        .filter(|i| {
            !windows
                .iter()
                .any(|w| w.start < i.end && w.end.is_none_or(|e| e > i.start))
        })
        .collect();
    if idle.len() < MIN_BASELINE_SAMPLES {
        return None;
    }
    let mut watts: Vec<f64> = idle.iter().filter_map(|i| i.watts()).collect();
    let from = idle.first().map_or(0.0, |i| i.unix_start);
    let to = idle.last().map_or(0.0, |i| i.unix_end);
    let middle = median(&mut watts)?;
    // `median` sorted them.
    let at = |q: f64| watts[((watts.len() - 1) as f64 * q).round() as usize];
    let spread_watts = (middle - at(0.05)).max(at(0.95) - middle);
    Some(Baseline {
        watts: middle,
        spread_watts: Some(spread_watts),
        samples: idle.len(),
        from,
        to,
        method: format!(
            "median of {} sampling intervals with no request in flight over {:.0} s",
            idle.len(),
            to - from
        ),
        coverage,
    })
}

impl Baseline {
    /// The idle draw to take from energy of `coverage`; `None` where the two are of different
    /// scopes (the baseline was taken at the wall and the energy is the CPU package's, say).
    /// Within one scope the parts are not compared, as the ledger's sums do not.
    pub fn watts_for(&self, coverage: Option<&Coverage>) -> Option<f64> {
        let scope = |c: Option<&Coverage>| c.map(|c| c.scope);
        (scope(self.coverage.as_ref()) == scope(coverage)).then_some(self.watts)
    }
}

/// The median of finite values; `None` for none.
pub fn median(values: &mut Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::interval::trace;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut vec![5.0, f64::NAN, 1.0, 9.0]), Some(5.0));
        assert_eq!(median(&mut Vec::new()), None);
    }

    #[test]
    fn the_part_of_an_interval_before_a_moment_keeps_its_share_of_the_energy() {
        let i = trace(0.0, &[100.0]).remove(0);
        // 100 J over 1 s; a quarter of it before the moment: 25 J, 12.5 J of it the GPU's.
        let part = i
            .clone()
            .before(1.7e9 + 0.25)
            .unwrap_or_else(|| panic!("none"));
        assert_eq!((part.unix_end, part.end), (1.7e9 + 0.25, 0.25));
        assert_eq!(part.joules, Some(25.0));
        assert_eq!(part.by_domain, vec![("gpu".to_string(), 12.5)]);
        assert!(i.clone().before(1.7e9).is_none());
        assert_eq!(
            i.clone().before(1.7e9 + 5.0).map(|p| p.joules),
            Some(Some(100.0))
        );
    }

    fn window(start: f64, end: f64) -> Window {
        Window {
            start,
            split: None,
            end: Some(end),
        }
    }

    #[test]
    fn one_request_gets_the_energy_of_its_own_window() {
        // 100 W for 2 s, then 300 W for 2 s; the request runs 1.5 s → 3.5 s:
        // 0.5 s × 100 W + 1 s × 300 W... worked piece by piece: [1.5,2) 50 J, [2,3) 300 J,
        // [3,3.5) 150 J = 500 J.
        let i = trace(0.0, &[100.0, 100.0, 300.0, 300.0]);
        let s = &attribute(&i, &[window(1.5, 3.5)])[0];
        assert!((s.joules - 500.0).abs() < 1e-9, "{}", s.joules);
        assert!((s.shared_seconds - 2.0).abs() < 1e-9);
        assert_eq!(s.quality, Some(Quality::Measured));
        assert_eq!(s.sources, vec!["rapl".to_string()]);
    }

    #[test]
    fn overlapping_requests_add_up_to_the_energy_of_their_union() {
        // 200 W for 10 s. A runs 1 → 6 s, B runs 4 → 9 s: union 8 s = 1600 J.
        // Alone: A 3 s (600 J), B 3 s (600 J); together 2 s (400 J) split 200/200.
        let i = trace(0.0, &[200.0; 10]);
        let s = attribute(&i, &[window(1.0, 6.0), window(4.0, 9.0)]);
        assert!((s[0].joules - 800.0).abs() < 1e-9);
        assert!((s[1].joules - 800.0).abs() < 1e-9);
        assert!((s[0].joules + s[1].joules - 1600.0).abs() < 1e-9);
        // Windows that each took the machine's energy would say 1000 + 1000 J.
    }

    #[test]
    fn a_hundred_concurrent_requests_share_the_energy_once() {
        let i = trace(0.0, &[250.0; 4]);
        let ws: Vec<Window> = (0..100).map(|_| window(0.0, 4.0)).collect();
        let total: f64 = attribute(&i, &ws).iter().map(|s| s.joules).sum();
        assert!((total - 1000.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn prefill_and_decode_are_integrated_over_their_own_windows() {
        // Prefill 0 → 1.5 s at 400 W: 1 s × 400 + 0.5 s × 400 = 600 J;
        // decode 1.5 → 4 s: 0.5 s × 400 + 2 s × 150 = 500 J.
        let i = trace(0.0, &[400.0, 400.0, 150.0, 150.0]);
        let w = Window {
            start: 0.0,
            split: Some(1.5),
            end: Some(4.0),
        };
        let s = &attribute(&i, &[w])[0];
        assert!((s.prefill_joules - 600.0).abs() < 1e-9);
        assert!((s.decode_joules - 500.0).abs() < 1e-9);
        assert!((s.joules - 1100.0).abs() < 1e-9);
    }

    #[test]
    fn an_open_window_is_in_flight_to_the_last_interval_and_unmeasured_time_gives_nothing() {
        let mut i = trace(0.0, &[100.0, 100.0, 100.0]);
        i[1].joules = None;
        let s = &attribute(
            &i,
            &[Window {
                start: 0.5,
                split: None,
                end: None,
            }],
        )[0];
        // [0.5,1) 50 J, [1,2) not measured, [2,3) 100 J.
        assert!((s.joules - 150.0).abs() < 1e-9);
        assert!((s.covered_seconds - 1.5).abs() < 1e-9);
    }

    /// 12 s idle at 60 W at the wall, the plug unplugged (1 s measured by nothing), then 12 s
    /// idle at 15 W on the CPU package and a request from 25 s to 31 s at 40 W: the request's
    /// energy is the package's 6 × 40 W = 240 J; the baseline is the package's 15 W, never the median of both (37.5 W),
    /// and it nets nothing measured at the wall.
    #[test]
    fn energy_and_idle_draw_are_taken_in_one_scope() {
        use crate::reading::Domain;
        let mut w = vec![60.0; 12];
        w.push(0.0);
        w.extend([15.0; 12]);
        w.extend([40.0; 6]);
        let mut i = trace(0.0, &w);
        let wall = Coverage::of_domain(Domain::Wall, None);
        let package = Coverage::of_domain(Domain::Cpu, None);
        for (k, interval) in i.iter_mut().enumerate() {
            interval.coverage = Some(if k < 12 {
                wall.clone()
            } else {
                package.clone()
            });
        }
        i[12].joules = None;
        let s = &attribute(&i, &[window(25.0, 31.0)])[0];
        assert!((s.joules - 240.0).abs() < 1e-9, "{}", s.joules);
        assert_eq!(s.coverage.as_ref(), Some(&package));
        // A request from 8 s to 31 s took the package's 18 s (12 idle at 15 W, 6 at 40 W) and
        // nothing of the wall's 4 s: 180 + 240 = 420 J over 18 s of 23.
        let across = &attribute(&i, &[window(8.0, 31.0)])[0];
        assert!((across.joules - 420.0).abs() < 1e-9, "{}", across.joules);
        assert!((across.covered_seconds - 18.0).abs() < 1e-9);

        let b = idle_baseline(&i, &[window(25.0, 31.0)])
            .unwrap_or_else(|| panic!("12 idle intervals of the package"));
        assert_eq!(b.watts, 15.0);
        assert_eq!(b.watts_for(Some(&package)), Some(15.0));
        assert_eq!(b.watts_for(Some(&wall)), None);
    }

    #[test]
    fn the_baseline_is_the_median_of_idle_intervals_only() {
        // 12 idle seconds at 20 W with one 90 W blip, then a request at 300 W.
        let mut w = vec![20.0; 12];
        w[5] = 90.0;
        w.extend([300.0, 300.0]);
        let i = trace(0.0, &w);
        let b =
            idle_baseline(&i, &[window(12.0, 14.0)]).unwrap_or_else(|| panic!("12 idle intervals"));
        assert_eq!(b.watts, 20.0);
        assert_eq!(b.samples, 12);
        // One blip in twelve is beyond the 95th percentile: it does not widen the spread.
        assert_eq!(b.spread_watts, Some(0.0));
        // 20, 21 … 31 W: median 25.5 W; the 5th and 95th percentiles of twelve are the second
        // and eleventh, 21 and 30 W, so nine in ten lie within 4.5 W.
        let rising: Vec<f64> = (20..32).map(f64::from).collect();
        let b = idle_baseline(&trace(0.0, &rising), &[]).unwrap_or_else(|| panic!("12 idle"));
        assert_eq!((b.watts, b.spread_watts), (25.5, Some(4.5)));
        assert!(idle_baseline(&i[..9], &[]).is_none());
    }
}
