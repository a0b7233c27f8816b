//! The wall meter as a source: a plug asked in a thread of its own, at most once a second,
//! whose draw is the `wall` domain.
//!
//! Rules:
//! - Sampling never waits for the plug: each read takes the newest answer the worker has (at
//!   most [`TIMEOUT`](super::TIMEOUT) old work, [`STALE_AFTER`] old at most), and the other
//!   sources keep the headline meanwhile.
//! - Counters first: the device's energy counter, made monotonic (a counter that went down is
//!   a reset: a new baseline, nothing lost or added), is the reading's energy; its watts are the
//!   device's instant power.
//! - A plug that does not answer, answers without a reading, or reads export gives its reason
//!   and no reading, never 0 W; it is asked again, so it comes back when the plug does.

use super::fetch::{PlugClient, WallMeter};
use super::reading::PlugReading;
use crate::background::{Background, STALE_AFTER};
use crate::error::Error;
use std::time::{Duration, Instant};
use wattbar_core::counter::CounterTotal;
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "wall-meter";

/// The plug is asked at most this often.
pub const MIN_POLL: Duration = Duration::from_secs(1);

/// The most a socket delivers (16 A at 240 V is 3.84 kW): more is a broken counter.
const MAX_WALL_WATTS: f64 = 4_000.0;

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

/// One answer of the worker, numbered so that each is counted once.
#[derive(Clone)]
struct Polled {
    seq: u64,
    reading: PlugReading,
}

pub struct WallMeterSource {
    worker: Background<Polled>,
    counter: CounterTotal,
    seen: Option<u64>,
    last: Option<PlugReading>,
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
                // Whatever the plug says, it is asked again: it may come back or be fixed.
                let answer = match client.read() {
                    Ok(reading) => Ok(Polled { seq, reading }),
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
            counter: CounterTotal::new(),
            seen: None,
            last: None,
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

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let polled = self.worker.latest(at)?;
        if self.seen != Some(polled.seq) {
            self.seen = Some(polled.seq);
            if let Some(joules) = polled.reading.energy_joules {
                self.counter
                    .update_restarting(at.monotonic, Joules(joules), MAX_WALL_WATTS);
            }
            self.last = Some(polled.reading.clone());
        }
        let reading = &polled.reading;
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
            energy_counter: self.counter.total(),
            source: SOURCE_ID.to_string(),
            quality: Quality::Measured,
            at,
        }])
    }

    fn details(&self) -> Option<serde_json::Value> {
        self.last
            .as_ref()
            .and_then(|r| serde_json::to_value(r).ok())
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
