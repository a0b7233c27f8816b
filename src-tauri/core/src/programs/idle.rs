//! The CPU domain's idle draw: what it draws with its CPUs idle, which belongs to no program.
//!
//! Rules:
//! - Learnt from the windows of the last hour ([`KEEP_SECONDS`], whatever their lengths): each
//!   gives the domain's mean watts and the share of CPU time that was busy.
//! - With at least [`MIN_WINDOWS`] windows almost idle (busy ≤ [`NEAR_IDLE`] of the CPUs and
//!   ≤ [`NEAR_IDLE_CPUS`] of one: on a many-core machine one busy thread is a small share, but
//!   its draw is not idle), the idle draw is the median of their watts: a measured baseline.
//! - Else, on a machine that never rests, with that many windows whose busy shares spread over
//!   at least [`MIN_SPREAD`], it is where a least-squares line of watts on the busy share meets
//!   0 % busy, kept between 0 and the lowest window's draw.
//! - Else it is not known (`None`): the caller falls back to another split. Once known it is
//!   kept while the windows that gave it age out, until newer ones give another.

use std::collections::VecDeque;

/// How much of the past the windows kept cover: an hour.
pub const KEEP_SECONDS: f64 = 3600.0;
/// Fewest windows an idle draw is taken from.
pub const MIN_WINDOWS: usize = 10;
/// The busy share at or below which a window counts as idle.
pub const NEAR_IDLE: f64 = 0.05;
/// The busy CPUs (busy time over wall time) at or below which a window counts as idle.
pub const NEAR_IDLE_CPUS: f64 = 0.25;
/// The spread of busy shares a line is fitted over at least.
pub const MIN_SPREAD: f64 = 0.2;

/// How the idle draw was found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IdleMethod {
    /// The median of windows with the CPUs almost idle.
    Rested { windows: usize },
    /// A line of watts on the busy share, read at 0 % busy.
    Fitted { windows: usize },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleDraw {
    pub watts: f64,
    pub method: IdleMethod,
}

impl IdleDraw {
    pub fn describe(&self) -> String {
        match self.method {
            IdleMethod::Rested { windows } => format!(
                "{:.1} W, the median of {windows} windows with the CPUs at least {:.0} % idle",
                self.watts,
                100.0 * (1.0 - NEAR_IDLE)
            ),
            IdleMethod::Fitted { windows } => format!(
                "{:.1} W, a line of the draw on the busy share over {windows} windows read at \
                 0 % busy (the CPUs were never idle)",
                self.watts
            ),
        }
    }
}

/// Whether a window with this busy share (0–1) of `cpus` CPUs counts as at rest: busy at most
/// [`NEAR_IDLE`] of the time and at most [`NEAR_IDLE_CPUS`] of one CPU.
pub fn at_rest(busy_share: f64, cpus: f64) -> bool {
    busy_share <= NEAR_IDLE && busy_share * cpus <= NEAR_IDLE_CPUS
}

/// Learns the idle draw from windows.
#[derive(Debug, Default)]
pub struct IdleLearner {
    /// Oldest first.
    windows: VecDeque<Seen>,
    known: Option<IdleDraw>,
}

/// One window as the learner keeps it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    watts: f64,
    busy: f64,
    rest: bool,
    seconds: f64,
}

impl IdleLearner {
    /// Adds one window: the domain's energy over `seconds`, its busy share (0–1) and the
    /// number of CPUs.
    pub fn observe(&mut self, joules: f64, seconds: f64, busy_share: f64, cpus: f64) {
        let watts = joules / seconds;
        if !(watts.is_finite() && watts >= 0.0 && (0.0..=1.0).contains(&busy_share)) {
            return;
        }
        self.windows.push_back(Seen {
            watts,
            busy: busy_share,
            rest: at_rest(busy_share, cpus),
            seconds,
        });
        while self.windows.len() > 1
            && self.windows.iter().map(|w| w.seconds).sum::<f64>() > KEEP_SECONDS
        {
            self.windows.pop_front();
        }
        if let Some(d) = self.rested().or_else(|| self.fitted()) {
            self.known = Some(d);
        }
    }

    /// The idle draw, where known.
    pub fn draw(&self) -> Option<IdleDraw> {
        self.known
    }

    fn rested(&self) -> Option<IdleDraw> {
        let mut watts: Vec<f64> = self
            .windows
            .iter()
            .filter(|w| w.rest)
            .map(|w| w.watts)
            .collect();
        if watts.len() < MIN_WINDOWS {
            return None;
        }
        watts.sort_by(f64::total_cmp);
        let n = watts.len();
        let median = if n % 2 == 1 {
            watts[n / 2]
        } else {
            (watts[n / 2 - 1] + watts[n / 2]) / 2.0
        };
        Some(IdleDraw {
            watts: median,
            method: IdleMethod::Rested { windows: n },
        })
    }

    fn fitted(&self) -> Option<IdleDraw> {
        let n = self.windows.len();
        if n < MIN_WINDOWS {
            return None;
        }
        let (lo, hi) = self
            .windows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), w| {
                (lo.min(w.busy), hi.max(w.busy))
            });
        if hi - lo < MIN_SPREAD {
            return None;
        }
        let count = n as f64;
        let mean_b = self.windows.iter().map(|w| w.busy).sum::<f64>() / count;
        let mean_w = self.windows.iter().map(|w| w.watts).sum::<f64>() / count;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for w in &self.windows {
            sxy += (w.busy - mean_b) * (w.watts - mean_w);
            sxx += (w.busy - mean_b) * (w.busy - mean_b);
        }
        let slope = sxy / sxx;
        let lowest = self
            .windows
            .iter()
            .map(|w| w.watts)
            .fold(f64::INFINITY, f64::min);
        let at_zero = (mean_w - slope * mean_b).clamp(0.0, lowest);
        at_zero.is_finite().then_some(IdleDraw {
            watts: at_zero,
            method: IdleMethod::Fitted { windows: n },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_draw_is_the_median_of_the_windows_at_rest() {
        let mut l = IdleLearner::default();
        // Nine quiet windows are not enough.
        for w in [11.0, 12.0, 13.0, 12.0, 12.5, 11.5, 12.0, 30.0, 12.0] {
            l.observe(w * 10.0, 10.0, 0.01, 2.0);
        }
        assert_eq!(l.draw(), None);
        l.observe(120.0, 10.0, 0.04, 2.0);
        // 11 11.5 12 12 12 12 12.5 13 30 → the 10 quiet windows' median: (12 + 12) / 2.
        let rested = IdleDraw {
            watts: 12.0,
            method: IdleMethod::Rested { windows: 10 },
        };
        assert_eq!(l.draw(), Some(rested));
        // Busy windows do not count towards it, and a line is not preferred to a measurement.
        for _ in 0..5 {
            l.observe(600.0, 10.0, 0.8, 2.0);
        }
        assert_eq!(l.draw(), Some(rested));
    }

    #[test]
    fn one_busy_thread_on_many_cores_is_not_at_rest() {
        let mut l = IdleLearner::default();
        // 64 CPUs, one of them busy: a 1.6 % share, but a whole CPU's draw above idle.
        for _ in 0..20 {
            l.observe(400.0, 10.0, 1.0 / 64.0, 64.0);
        }
        assert_eq!(l.draw(), None);
        // The same machine really at rest: 0.1 of a CPU busy.
        for _ in 0..10 {
            l.observe(250.0, 10.0, 0.1 / 64.0, 64.0);
        }
        assert_eq!(l.draw().map(|d| d.watts), Some(25.0));
    }

    #[test]
    fn a_machine_that_never_rests_gets_the_line_read_at_zero_busy() {
        let mut l = IdleLearner::default();
        // 12 W idle + 60 W at full load: 30 % busy draws 30 W, 90 % draws 66 W.
        for k in 0..12 {
            let busy = if k % 2 == 0 { 0.3 } else { 0.9 };
            l.observe((12.0 + 60.0 * busy) * 10.0, 10.0, busy, 2.0);
        }
        let d = l.draw().unwrap_or_else(|| panic!("known"));
        assert!((d.watts - 12.0).abs() < 1e-9, "{d:?}");
        assert_eq!(d.method, IdleMethod::Fitted { windows: 12 });
    }

    #[test]
    fn a_steady_load_cannot_tell_the_idle_draw() {
        let mut l = IdleLearner::default();
        for _ in 0..50 {
            l.observe(600.0, 10.0, 0.8, 2.0);
        }
        assert_eq!(l.draw(), None);
        // Nor can garbage.
        l.observe(f64::NAN, 10.0, 0.0, 2.0);
        l.observe(100.0, 0.0, 0.0, 2.0);
        l.observe(100.0, 10.0, 1.5, 2.0);
        assert_eq!(l.draw(), None);
    }

    #[test]
    fn windows_older_than_an_hour_are_forgotten_whatever_their_lengths() {
        let mut l = IdleLearner::default();
        // Ten minutes at rest at 12 W in 60 s windows, then an hour under load.
        for _ in 0..10 {
            l.observe(12.0 * 60.0, 60.0, 0.01, 2.0);
        }
        for _ in 0..60 {
            l.observe(60.0 * 60.0, 60.0, 0.8, 2.0);
        }
        // Ten minutes at rest at 20 W: the 12 W windows are more than an hour old (70 windows
        // of the 360 an hour of 10 s windows holds), so the median is 20 W, not 16.
        for _ in 0..10 {
            l.observe(20.0 * 60.0, 60.0, 0.01, 2.0);
        }
        assert_eq!(l.draw().map(|d| d.watts), Some(20.0));
    }

    #[test]
    fn a_line_that_would_go_below_zero_or_above_the_lowest_draw_is_kept_between() {
        let mut l = IdleLearner::default();
        // Draw falling with load (a sensor lag): the line meets 0 % busy above every window.
        for k in 0..12 {
            let busy = if k % 2 == 0 { 0.3 } else { 0.9 };
            l.observe((50.0 - 20.0 * busy) * 10.0, 10.0, busy, 2.0);
        }
        let d = l.draw().unwrap_or_else(|| panic!("known"));
        assert!(
            (d.watts - 32.0).abs() < 1e-9,
            "the lowest window's 32 W: {d:?}"
        );
    }
}
