//! The machine's draw at rest, learned from its own headline: what auto low-power mode's
//! threshold is set from when no watts are given, so that a desktop measured at the wall
//! (100 W at rest) is not "above 15 W" all day, nor a 6 W laptop never above it.
//!
//! Rules:
//! - The rest is the 10th percentile of the headline's one-minute means over the last day
//!   ([`KEPT_MINUTES`]), once [`MIN_MINUTES`] minutes are known: a machine busy nine tenths
//!   of a day still shows its rest, and a minute of load moves nothing.
//! - Unknown until then: auto-engage waits, and says so, rather than guess.
//! - The threshold from it is [`RISE`] above it, and at least [`MIN_MARGIN_W`] above it, so
//!   that a 4 W rest does not engage at 6 W.
//! - Time is the caller's monotonic clock; a minute with no headline adds nothing.

use std::collections::VecDeque;
use std::time::Duration;

/// A day of minutes.
pub const KEPT_MINUTES: usize = 1440;
/// Minutes known before a rest is told.
pub const MIN_MINUTES: usize = 10;
/// The threshold's share above the rest: half as much again.
pub const RISE: f64 = 0.5;
/// The least the threshold sits above the rest, watts.
pub const MIN_MARGIN_W: f64 = 5.0;

/// The learned rest: the minute being summed and the day of minute means before it.
#[derive(Debug, Clone, Default)]
pub struct Rest {
    /// The minute (since the clock's start), its sum of watts and samples.
    minute: Option<(u64, f64, u32)>,
    means: VecDeque<f64>,
    /// The percentile of `means`, found when a minute closes: read at every sample, it would
    /// otherwise sort a day of minutes each time.
    watts: Option<f64>,
}

impl Rest {
    /// One sample of the headline, `watts`, at monotonic `at`.
    pub fn observe(&mut self, at: Duration, watts: f64) {
        if !watts.is_finite() || watts < 0.0 {
            return;
        }
        let minute = at.as_secs() / 60;
        match &mut self.minute {
            Some((m, sum, n)) if *m == minute => {
                *sum += watts;
                *n += 1;
            }
            current => {
                if let Some((_, sum, n)) = current.take().filter(|(_, _, n)| *n > 0) {
                    if self.means.len() == KEPT_MINUTES {
                        self.means.pop_front();
                    }
                    self.means.push_back(sum / f64::from(n));
                    self.watts = percentile(&self.means);
                }
                *current = Some((minute, watts, 1));
            }
        }
    }

    /// The draw at rest, watts; `None` until [`MIN_MINUTES`] minutes are known.
    pub fn watts(&self) -> Option<f64> {
        self.watts
    }

    /// The threshold the rest gives, watts.
    pub fn threshold(&self) -> Option<f64> {
        self.watts()
            .map(|rest| (rest * (1.0 + RISE)).max(rest + MIN_MARGIN_W))
    }
}

/// The 10th percentile of `means`; `None` until [`MIN_MINUTES`] are known.
fn percentile(means: &VecDeque<f64>) -> Option<f64> {
    if means.len() < MIN_MINUTES {
        return None;
    }
    let mut sorted: Vec<f64> = means.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get((sorted.len() - 1) / 10).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `minutes` minutes of one sample a second at `watts`, from minute `from`.
    fn feed(rest: &mut Rest, from: u64, minutes: u64, watts: f64) {
        for s in from * 60..(from + minutes) * 60 {
            rest.observe(Duration::from_secs(s), watts);
        }
    }

    #[test]
    fn a_desktop_at_100_w_at_rest_engages_above_150_w_not_15() {
        let mut rest = Rest::default();
        feed(&mut rest, 0, 10, 100.0);
        assert_eq!(rest.watts(), None, "nine whole minutes: not yet");
        feed(&mut rest, 10, 1, 100.0);
        assert_eq!(rest.watts(), Some(100.0));
        assert_eq!(rest.threshold(), Some(150.0));
        // A model running for 80 minutes at 300 W, then rest again: still 100 W, since the
        // tenth of 91 minutes means is one at rest.
        feed(&mut rest, 11, 80, 300.0);
        assert_eq!(rest.watts(), Some(100.0));
    }

    #[test]
    fn a_laptop_at_4_w_engages_5_w_above_it_and_bad_readings_add_nothing() {
        let mut rest = Rest::default();
        feed(&mut rest, 0, 11, 4.0);
        rest.observe(Duration::from_secs(11 * 60), f64::NAN);
        rest.observe(Duration::from_secs(11 * 60 + 1), -3.0);
        assert_eq!(
            rest.threshold(),
            Some(9.0),
            "4 × 1.5 = 6 is less than 4 + 5"
        );
    }

    #[test]
    fn a_day_is_kept_and_the_oldest_minute_goes_first() {
        let mut rest = Rest::default();
        // A day at 50 W, then a day and a minute at 80 W: the 50 W minutes are all gone.
        feed(&mut rest, 0, 1440, 50.0);
        assert_eq!(rest.watts(), Some(50.0));
        feed(&mut rest, 1440, 1441, 80.0);
        assert_eq!(rest.means.len(), KEPT_MINUTES);
        assert_eq!(rest.watts(), Some(80.0));
    }
}
