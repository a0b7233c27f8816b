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

/// One answer of the worker, numbered so that each is counted once.
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
            let mut asked: Option<Instant> = None;
            Ok(move || {
                if let Some(last) = asked {
                    std::thread::sleep(MIN_POLL.saturating_sub(last.elapsed()));
                }
                asked = Some(Instant::now());
                seq += 1;
                // Whatever the plug says, it is asked again: it may come back or be fixed.
                match client.read() {
                    Ok(reading) => Ok(Polled { seq, reading }),
                    Err(Error::Unavailable(why) | Error::Transient(why)) => {
                        Err(Error::Transient(why))
                    }
                    Err(e) => Err(Error::Transient(e.to_string())),
                }
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
