//! The wall meter as a source: a plug asked in a thread of its own, at most once a second,
//! whose draw is the `wall` domain.
//!
//! Rules:
//! - Sampling never waits for the plug: each read takes the newest answer the worker has (at
//!   most [`TIMEOUT`](super::TIMEOUT) old work, [`STALE_AFTER`] old at most), and the other
//!   sources keep the headline meanwhile.
//! - Counters first, timed by the plug: the device's counter is the truth for totals, and the
//!   energy between its steps is spread by the device's own power readings, each from when its
//!   answer was given (halfway between asking and receiving) ([`SteppedCounter`]): a Wh step
//!   is not a 3,600 J lump at the sample that saw it. Jitter, resets and impossible rises are
//!   judged there.
//! - A missed answer is not a missing wall: the last good answer stands for [`HOLD_FOR`], its
//!   power running on within the counter's band, so one failed poll neither switches the
//!   headline's scope nor loses the plug's baseline. Past that the source fails once, with the
//!   reason, and comes back once when the plug answers again.
//! - A plug that answers without a reading, or reads export, gives its reason and no reading,
//!   never 0 W; it is asked again, so it comes back when the plug does.

use super::fetch::{PlugClient, WallMeter};
use super::reading::PlugReading;
use crate::background::{Background, STALE_AFTER};
use crate::error::Error;
use std::time::{Duration, Instant};
use wattbar_core::counter::stepped::{Answer, SteppedCounter};
use wattbar_core::{Domain, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "wall-meter";

/// The plug is asked at most this often.
pub const MIN_POLL: Duration = Duration::from_secs(1);

/// The most a socket delivers (16 A at 240 V is 3.84 kW): more is a broken counter.
const MAX_WALL_WATTS: f64 = 4_000.0;

/// How long the last good answer stands while the plug misses answers.
pub const HOLD_FOR: Duration = Duration::from_secs(10);

/// How much before its turn an ask may come and still be sent. The sampler asks once a second,
/// and the worker's own wake-up moves each ask by a little either way.
const POLL_SLACK: Duration = Duration::from_millis(100);

/// The plug's turns, [`MIN_POLL`] apart: an ask before its turn is answered with the last
/// answer again (which the source counts once, by its number), not by waiting. Waiting for the
/// turn put a timer and a context switch into every request, as much as the request's own
/// system calls, and kept the requests out of step with the sampler for good.
#[derive(Debug, Default)]
struct Turns {
    /// When the next request is due.
    due: Option<Instant>,
}

impl Turns {
    /// Whether an ask at `now` sends a request; if so it takes the turn, and the next is one
    /// [`MIN_POLL`] later, or [`MIN_POLL`] from now where the turns had fallen further behind.
    fn take(&mut self, now: Instant) -> bool {
        if self.due.is_some_and(|due| now + POLL_SLACK < due) {
            return false;
        }
        self.due = Some(match self.due {
            Some(due) if due + MIN_POLL > now => due + MIN_POLL,
            _ => now + MIN_POLL,
        });
        true
    }
}

/// One answer of the worker, numbered so that each is counted once, and when it was given.
#[derive(Clone)]
struct Polled {
    seq: u64,
    reading: PlugReading,
    /// Halfway between asking and receiving: the device read its meter somewhere in between,
    /// and a slow answer (a busy device, a loaded machine) moves this half as far as its
    /// arrival. Timed by arrival, a late answer's counter was taken for later than it was, and
    /// the total was pulled up to it in a lump.
    answered: Instant,
    /// Half the round trip: how far from `answered` the device may have read its meter.
    within: Duration,
}

pub struct WallMeterSource {
    worker: Background<Polled>,
    counter: SteppedCounter,
    seen: Option<u64>,
    /// The last good answer and when it was given, on the sampler's clock.
    good: Option<(PlugReading, Duration)>,
}

impl WallMeterSource {
    /// Starts asking the plug; an address that cannot be one is refused at once.
    pub fn new(meter: &WallMeter) -> Result<WallMeterSource, Error> {
        let mut client = PlugClient::new(meter)?;
        let worker = Background::spawn(SOURCE_ID, STALE_AFTER, move || {
            let mut seq = 0;
            let mut turns = Turns::default();
            let mut last: Option<Result<Polled, Error>> = None;
            Ok(move || {
                let turn = turns.take(Instant::now());
                if let Some(last) = last.as_ref().filter(|_| !turn) {
                    return last.clone();
                }
                seq += 1;
                let asked = Instant::now();
                // Whatever the plug says, it is asked again: it may come back or be fixed.
                let answer = match client.read() {
                    Ok(reading) => {
                        let within = asked.elapsed() / 2;
                        Ok(Polled {
                            seq,
                            reading,
                            answered: asked + within,
                            within,
                        })
                    }
                    Err(Error::Unavailable(why) | Error::Transient(why)) => {
                        Err(Error::Transient(why))
                    }
                    Err(e) => Err(Error::Transient(e.to_string())),
                };
                last = Some(answer.clone());
                answer
            })
        });
        Ok(WallMeterSource {
            worker,
            counter: SteppedCounter::new(MAX_WALL_WATTS),
            seen: None,
            good: None,
        })
    }
}

impl Source for WallMeterSource {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Measured
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::Wall])
    }

    /// The plug is asked once a [`MIN_POLL`]: a sampler faster than that reads the energy
    /// spread between its answers, which the bound of any window counts as unseen.
    fn answer_period(&self) -> Option<Duration> {
        Some(MIN_POLL)
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        match self.worker.latest(at) {
            Ok(polled) if self.seen != Some(polled.seq) => {
                self.seen = Some(polled.seq);
                // Its age in real time, on the sampler's clock: when the plug said it.
                let given = at.monotonic.saturating_sub(polled.answered.elapsed());
                let r = &polled.reading;
                self.counter.answer(Answer {
                    at: given,
                    counter: r.energy_joules,
                    watts: r.watts,
                    resolution: r.energy_resolution_joules,
                    within: polled.within,
                });
                self.good = Some((polled.reading.clone(), given));
            }
            Ok(_) => {}
            Err(e) => {
                let held = self
                    .good
                    .as_ref()
                    .is_some_and(|(_, t)| at.monotonic.saturating_sub(*t) <= HOLD_FOR);
                if !held {
                    return Err(e.into());
                }
            }
        }
        let Some((reading, _)) = &self.good else {
            return Err(Error::Transient("the wall meter has not answered yet".into()).into());
        };
        let watts = match (reading.watts, reading.export_watts) {
            (Some(w), _) if w.is_finite() && w <= MAX_WALL_WATTS => w,
            (Some(w), _) => {
                return Err(Error::Transient(format!(
                    "the wall meter reads {w} W, more than a socket gives"
                ))
                .into())
            }
            (None, Some(export)) => {
                return Err(Error::Transient(format!(
                    "the wall meter reads {export} W sent back to the grid, not a draw"
                ))
                .into())
            }
            (None, None) => {
                return Err(
                    Error::Transient("the wall meter gives no power now".to_string()).into(),
                )
            }
        };
        Ok(vec![Reading {
            domain: Domain::Wall,
            device: None,
            watts: Some(Watts(watts)),
            energy_counter: self.counter.total_at(at.monotonic),
            source: SOURCE_ID.to_string(),
            quality: Quality::Measured,
            at,
        }])
    }

    fn details(&self) -> Option<serde_json::Value> {
        self.good
            .as_ref()
            .and_then(|(r, _)| serde_json::to_value(r).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampler's second, with up to 60 ms of jitter either way: every ask sends.
    #[test]
    fn each_ask_of_a_sampler_a_second_sends_one_request() {
        let start = Instant::now() + Duration::from_secs(1);
        let mut turns = Turns::default();
        for k in 0..60u64 {
            let jitter = Duration::from_millis((k * 37) % 120);
            let at = start + MIN_POLL * k as u32 + jitter - Duration::from_millis(60);
            assert!(turns.take(at), "ask {k}");
        }
    }

    /// Asked every 200 ms (`--interval 200ms`) or every 950 ms for a minute: the plug is still
    /// asked at most once a second, never two requests less than 0.9 s apart.
    #[test]
    fn a_faster_sampler_does_not_ask_the_plug_more_than_once_a_second() {
        for every_ms in [200u64, 950, 333] {
            let start = Instant::now();
            let mut turns = Turns::default();
            let mut sent = Vec::new();
            let mut k = 0u32;
            loop {
                let at = start + Duration::from_millis(every_ms) * k;
                if at > start + Duration::from_secs(60) {
                    break;
                }
                if turns.take(at) {
                    sent.push(at);
                }
                k += 1;
            }
            // 60 s of turns a second hold 61 requests at most (one at 0 s and one at 60 s).
            assert!(
                (55..=61).contains(&sent.len()),
                "every {every_ms} ms: {} requests",
                sent.len()
            );
            for pair in sent.windows(2) {
                assert!(
                    pair[1] - pair[0] >= MIN_POLL - POLL_SLACK,
                    "every {every_ms} ms: {:?}",
                    pair[1] - pair[0]
                );
            }
        }
    }
}
