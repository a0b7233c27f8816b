//! When the processes are read: every [`READ_EVERY`] while the machine works, every
//! [`READ_EVERY_AT_REST`] while it rests.
//!
//! Rules:
//! - Reading the processes costs the kernel a few µs a process (it formats each `stat`): with
//!   the ~90 processes of a desktop at rest, a read every 10 s is a third of the engine's CPU
//!   time. At rest the split barely changes, and CPU times are cumulative, so a longer window's
//!   shares are as exact: only the figures stand for a longer time (the view's
//!   `window_seconds`).
//! - The machine rests when the last window read was at rest
//!   ([`wattbar_core::programs::idle::at_rest`]) with the idle draw known (so the idle draw is
//!   learnt at the short step), and the window since draws on average at most [`QUIET_RISE`]
//!   more than that one did (the headline, so a GPU's work counts too).
//! - A rise is read at the next short step: at most [`READ_EVERY`] after the last read.

use std::time::Duration;

/// How often the processes are read while the machine works.
/// Reading a process's `stat` costs the kernel about 5 µs: with 500 processes, reading every
/// 10 s adds about 0.06 % of a core (`scripts/bench-programs`).
pub const READ_EVERY: Duration = Duration::from_secs(10);
/// How often the processes are read while the machine rests.
pub const READ_EVERY_AT_REST: Duration = Duration::from_secs(60);
/// How much more than the last window at rest (as a share of its draw) a window may draw and
/// still count as at rest.
pub const QUIET_RISE: f64 = 0.1;

#[derive(Debug, Default)]
pub struct Cadence {
    /// The engine's clock at the last read.
    last_read: Option<Duration>,
    /// The headline's mean watts over the last window read, where the machine rested in it.
    rest_watts: Option<f64>,
}

impl Cadence {
    /// Whether to read now (`elapsed`: the engine's clock), with the window so far holding
    /// `joules` of the headline over `seconds`.
    pub fn due(&self, elapsed: Duration, joules: f64, seconds: f64) -> bool {
        let Some(last) = self.last_read else {
            return true;
        };
        let since = elapsed.saturating_sub(last);
        if since < READ_EVERY {
            return false;
        }
        if since >= READ_EVERY_AT_REST {
            return true;
        }
        match self.rest_watts {
            Some(rest) if seconds > 0.0 => joules / seconds > rest * (1.0 + QUIET_RISE),
            _ => true,
        }
    }

    /// A read at `elapsed`.
    pub fn read(&mut self, elapsed: Duration) {
        self.last_read = Some(elapsed);
        self.rest_watts = None;
    }

    /// The window just read was at rest, drawing `watts` on average.
    pub fn rested(&mut self, watts: f64) {
        self.rest_watts = watts.is_finite().then_some(watts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn a_working_machine_is_read_every_10_s() {
        let mut c = Cadence::default();
        assert!(c.due(at(0), 0.0, 0.0));
        c.read(at(0));
        assert!(!c.due(at(9), 450.0, 9.0));
        assert!(c.due(at(10), 500.0, 10.0));
    }

    #[test]
    fn a_resting_machine_is_read_every_minute_and_at_once_when_it_draws_more() {
        let mut c = Cadence::default();
        c.read(at(0));
        c.rested(12.0);
        // 12.5 W is within 10 % of 12 W: still at rest until a minute has passed.
        assert!(!c.due(at(10), 125.0, 10.0));
        assert!(!c.due(at(59), 59.0 * 12.5, 59.0));
        assert!(c.due(at(60), 60.0 * 12.5, 60.0));
        // 12 W for 20 s, then a second at 60 W: the window's mean is 300 J / 21 s = 14.3 W,
        // more than 12 W + 10 %.
        c.read(at(60));
        c.rested(12.0);
        assert!(!c.due(at(80), 240.0, 20.0));
        assert!(c.due(at(81), 240.0 + 60.0, 21.0));
    }

    #[test]
    fn a_window_not_at_rest_ends_the_long_step() {
        let mut c = Cadence::default();
        c.read(at(0));
        c.rested(12.0);
        c.read(at(60));
        // Not said to have rested: the next read is 10 s on, whatever it draws.
        assert!(c.due(at(70), 120.0, 10.0));
    }
}
