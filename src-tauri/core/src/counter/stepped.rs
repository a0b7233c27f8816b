//! A coarse energy counter read now and then (a plug's: Tasmota's kWh to three decimals, Kasa's
//! whole Wh, Shelly Gen1's watt-minutes) made into a smooth total the sampler can read at any
//! pace, with energy placed where it was drawn.
//!
//! Rules:
//! - The device's counter is the truth for totals. Each answer says the true energy lies in
//!   `[counter, counter + resolution)`; the total is kept inside that band, so that over any
//!   stretch the total's advance is the counter's within one resolution step.
//! - Between answers the total advances by the device's own power reading, timed by when each
//!   answer was received, not by when the sampler read it: a Wh step is spread over the seconds
//!   that drew it instead of arriving as a 3,600 J lump.
//! - The total never goes down: where the power ran ahead of the counter it waits at the band's
//!   top until the counter catches up; where it fell behind it is raised to the band's floor.
//!   Each answer is timed within half its round trip ([`Answer::within`]), and its band is wider
//!   by what was drawn in that time: a slow answer must not move energy in lumps.
//!   The band is the counter's as of its answer: after it, the top grows by the answer's power,
//!   since the counter went on counting that.
//! - Where in its band the counter stood at the first answer is unknown until it first steps:
//!   until then the total runs by power alone, and the first step anchors the band under the
//!   total (raising it to a floor it could be anywhere below would add up to a whole step at
//!   once). The step came somewhere since the answer before, so the truth stands above the
//!   counter by up to the energy drawn since then (and less than a step): the total is taken to
//!   stand halfway, which leaves it room either way. Anchored at the floor, it sat at the band's
//!   bottom, and the first time the counter ran ahead it was raised by as much as a step.
//! - A decrease of less than [`JITTER_FRACTION`] of the counter is jitter (as Home Assistant
//!   judges a `total_increasing` sensor): ignored, the baseline stays where it was. A larger one
//!   is a reset: what the device counts from its new start is added, nothing lost or counted
//!   twice.
//! - A rise beyond `max_watts` over the time since the last accepted answer, plus one resolution
//!   step, is a broken reading: ignored, the baseline stays where it was.
//!
//! The band, and its three cases (`step` is the counter's resolution, `since` the seconds since
//! its answer, `slack` what was drawn while the answer's own time is not known):
//!
//! ```text
//!  joules
//!    ^  ...................................  top = floor + step + watts x since + slack
//!    |                      ______________   the total waits at the top while the power
//!    |              _______/                 runs ahead of the counter
//!    |      _______/                         between answers it runs at the plug's power
//!    |  - - - - - - - - - - - - - - - - - -  floor = offset + counter - slack: the total is
//!    |                                       raised to it where the power lagged
//!    +---------------------------------------> time
//!
//!  anchor: the first step            reset: falls by more than 10 %   jitter: falls by less
//!   counter  ____|-----               counter  -----|_____             counter  -----\_----
//!   total    ___/                     total    ____/------             total    ____/------
//!   offset set so the total stands    offset grows by the old          ignored: the baseline
//!   half what was drawn since the     counter: what it counts from     stays where it was
//!   answer before above the counter   0 is added, nothing twice
//! ```

use crate::units::Joules;
use std::time::Duration;

/// A decrease below this fraction of the counter is jitter, not a reset.
pub const JITTER_FRACTION: f64 = 0.1;

/// The step assumed where the device does not say: a whole Wh, the coarsest plugs count in.
pub const DEFAULT_RESOLUTION_JOULES: f64 = 3_600.0;

/// One answer of the device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    /// When it was received, on the sampler's monotonic clock.
    pub at: Duration,
    /// The device's counter, joules; `None` where it keeps none.
    pub counter: Option<f64>,
    /// The device's power reading, watts; `None` where it gives none.
    pub watts: Option<f64>,
    /// The counter's step, joules; `None`: [`DEFAULT_RESOLUTION_JOULES`].
    pub resolution: Option<f64>,
    /// How far `at` may be from when the device read its meter (half the request's round
    /// trip, where `at` is its middle): the band is wider by the energy drawn in that time.
    pub within: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Baseline {
    /// The device's counter as accepted last, and when.
    value: f64,
    at: Duration,
    /// The total's floor less `value`: moves only at a reset, and at the first step.
    offset: f64,
    /// The counter has stepped since the first answer: the band's floor is known.
    anchored: bool,
    /// The energy drawn in the answer's timing uncertainty ([`Answer::within`]): the band is
    /// that much wider either way.
    slack: f64,
}

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SteppedCounter {
    total: Option<f64>,
    /// When the total was last advanced.
    advanced: Option<Duration>,
    baseline: Option<Baseline>,
    watts: Option<f64>,
    resolution: f64,
    max_watts: f64,
    resets: u64,
    rejected: u64,
}

impl SteppedCounter {
    /// A counter for a device that draws at most `max_watts`.
    pub fn new(max_watts: f64) -> Self {
        SteppedCounter {
            max_watts,
            resolution: DEFAULT_RESOLUTION_JOULES,
            ..SteppedCounter::default()
        }
    }

    /// Takes an answer: the total first runs at the old power up to when it was received, then
    /// the counter moves the band and its power is used from then on.
    pub fn answer(&mut self, a: Answer) {
        self.advance(a.at);
        let watts_before = self.watts;
        if let Some(r) = a.resolution.filter(|r| r.is_finite() && *r >= 0.0) {
            self.resolution = r;
        }
        self.watts = a
            .watts
            .filter(|w| w.is_finite() && *w >= 0.0 && *w <= self.max_watts);
        let Some(value) = a.counter.filter(|v| v.is_finite() && *v >= 0.0) else {
            return;
        };
        let slack = self.watts.map_or(0.0, |w| w * a.within.as_secs_f64());
        let total = *self.total.get_or_insert(0.0);
        let Some(b) = self.baseline else {
            self.baseline = Some(Baseline {
                value,
                at: a.at,
                offset: total - value,
                anchored: false,
                slack,
            });
            return;
        };
        if value < b.value {
            if b.value - value <= JITTER_FRACTION * b.value {
                return;
            }
            // Started again from zero: what it counted since is new energy.
            self.resets += 1;
            self.baseline = Some(Baseline {
                value,
                at: a.at,
                offset: b.offset + b.value,
                slack,
                ..b
            });
        } else {
            let dt = a.at.saturating_sub(b.at).as_secs_f64();
            if value - b.value > self.max_watts * dt + self.resolution {
                self.rejected += 1;
                return;
            }
            self.baseline = Some(if b.anchored || value == b.value {
                Baseline {
                    value,
                    at: a.at,
                    slack,
                    ..b
                }
            } else {
                Baseline {
                    value,
                    at: a.at,
                    offset: total - value - self.first_step_fraction(watts_before, dt),
                    anchored: true,
                    slack,
                }
            });
        }
        self.settle();
    }

    /// The total at `at`: advanced by the last power reading since the last advance, kept in
    /// the counter's band. `None` before the first answer.
    pub fn total_at(&mut self, at: Duration) -> Option<Joules> {
        self.advance(at);
        self.total.map(Joules)
    }

    /// Times the counter started again from zero.
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Answers ignored as broken (a rise no socket can give).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The band the true energy lies in at `at`, once anchored: from the counter as last
    /// accepted, to a step above it and what the power read since could have added; wider
    /// either way by what was drawn while the answer's own time is not known.
    fn band(&self, at: Duration) -> Option<(f64, f64)> {
        let since = |b: &Baseline| at.saturating_sub(b.at).as_secs_f64();
        self.baseline.filter(|b| b.anchored).map(|b| {
            let floor = b.offset + b.value;
            let grown = self.watts.map_or(0.0, |w| w * since(&b));
            (floor - b.slack, floor + self.resolution + grown + b.slack)
        })
    }

    /// An answer received before the last advance (read by the sampler a step late) advances
    /// nothing: that time was already run at the power then known.
    fn advance(&mut self, at: Duration) {
        let from = self.advanced;
        if from.is_none_or(|f| at > f) {
            self.advanced = Some(at);
        }
        let (Some(total), Some(from)) = (self.total, from) else {
            return;
        };
        let dt = at.saturating_sub(from).as_secs_f64();
        let run = self.watts.map_or(total, |w| total + w * dt);
        self.total = Some(match self.band(at) {
            Some((_, top)) => total.max(run.min(top)),
            None => total.max(run),
        });
    }

    /// How far above its counter the truth is taken to stand at the counter's first step, `dt`
    /// seconds after the answer before, at `watts` in between: half of what was drawn since (at
    /// most a step), or half a step where the power is not known.
    fn first_step_fraction(&self, watts: Option<f64>, dt: f64) -> f64 {
        let drawn = watts.map_or(self.resolution, |w| w * dt);
        drawn.min(self.resolution) / 2.0
    }

    /// Raises the total to the band's floor where the power fell behind the counter.
    fn settle(&mut self) {
        if let (Some(total), Some((floor, _))) = (self.total, self.band(Duration::ZERO)) {
            self.total = Some(total.max(floor));
        }
    }
}

#[cfg(test)]
pub(crate) mod sim;
#[cfg(test)]
mod tests;
