//! The background worker that readers which block for a sampling interval run in, so that one
//! tick of the chain never waits for them.

use crate::error::Error;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use wattbar_core::Stamp;

/// A background sample older than this is not served as current.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// The latest result of a producer that runs in its own thread.
///
/// The producer is built inside the thread (so it need not be `Send`, as macmon's IOReport
/// handles are not) and called once at start, then once more each time the owner has asked for
/// the latest result since the last one: a worker nobody reads (its source standing by) waits,
/// costing nothing, and a sampler never runs ahead of its reader. An `Unavailable` result ends
/// the thread, as does dropping the owner.
pub struct Background<T> {
    name: String,
    rx: Option<Receiver<Result<T, Error>>>,
    demand: Arc<Demand>,
    /// The latest result and the monotonic time it is known to be from (see [`Background::latest`]).
    latest: Option<(Result<T, Error>, Duration)>,
    /// When the owner last asked.
    asked_at: Option<Duration>,
    stale_after: Duration,
}

#[derive(PartialEq)]
enum Ask {
    Idle,
    Asked,
    Closed,
}

/// The owner's requests to the worker.
struct Demand {
    ask: Mutex<Ask>,
    wake: Condvar,
}

impl Demand {
    fn set(&self, to: Ask) {
        if let Ok(mut ask) = self.ask.lock() {
            if *ask != Ask::Closed {
                *ask = to;
            }
        }
        self.wake.notify_one();
    }

    /// Waits for the owner's next request; false when the owner is gone.
    fn wait(&self) -> bool {
        let Ok(mut ask) = self.ask.lock() else {
            return false;
        };
        loop {
            match *ask {
                Ask::Asked => {
                    *ask = Ask::Idle;
                    return true;
                }
                Ask::Closed => return false,
                Ask::Idle => match self.wake.wait(ask) {
                    Ok(next) => ask = next,
                    Err(_) => return false,
                },
            }
        }
    }
}

impl<T: Send + 'static> Background<T> {
    /// Starts a thread that calls `init` once, then the producer it returned as the owner asks.
    pub fn spawn<F, P>(name: &str, stale_after: Duration, init: F) -> Self
    where
        F: FnOnce() -> Result<P, Error> + Send + 'static,
        P: FnMut() -> Result<T, Error>,
    {
        let (tx, rx) = mpsc::channel();
        let demand = Arc::new(Demand {
            ask: Mutex::new(Ask::Idle),
            wake: Condvar::new(),
        });
        let asks = Arc::clone(&demand);
        let spawned = std::thread::Builder::new()
            .name(format!("wattbar-{name}"))
            .spawn(move || {
                let mut produce = match init() {
                    Ok(p) => p,
                    Err(e) => {
                        // The owner may be gone already; nothing else to tell.
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let result = produce();
                    let stop = matches!(result, Err(Error::Unavailable(_)));
                    if tx.send(result).is_err() || stop || !asks.wait() {
                        return;
                    }
                }
            });
        let (rx, latest) = match spawned {
            Ok(_) => (Some(rx), None),
            Err(e) => (
                None,
                Some((
                    Err(Error::Unavailable(format!(
                        "could not start the {name} thread: {e}"
                    ))),
                    Duration::ZERO,
                )),
            ),
        };
        Background {
            name: name.to_string(),
            rx,
            demand,
            latest,
            asked_at: None,
            stale_after,
        }
    }

    /// The newest result at `at`, and a request for the next one. `Transient` before the first
    /// result or when the newest is older than `stale_after`; an `Unavailable` result stays.
    ///
    /// A result is only known to be from after the owner's previous request, so that is its
    /// age: after a long pause in reading, what the worker made before pausing is stale, not new.
    pub fn latest(&mut self, at: Stamp) -> Result<&T, Error> {
        let mut stopped = false;
        let since = self.asked_at.unwrap_or(at.monotonic);
        if let Some(rx) = &self.rx {
            loop {
                match rx.try_recv() {
                    Ok(result) => self.latest = Some((result, since)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        stopped = true;
                        break;
                    }
                }
            }
        }
        self.asked_at = Some(at.monotonic);
        self.demand.set(Ask::Asked);
        if stopped {
            self.rx = None;
            if !matches!(self.latest, Some((Err(Error::Unavailable(_)), _))) {
                self.latest = Some((
                    Err(Error::Unavailable(format!(
                        "the {} thread stopped",
                        self.name
                    ))),
                    at.monotonic,
                ));
            }
        }
        match &self.latest {
            None => Err(Error::Transient(format!(
                "{}: the first sample is not ready yet",
                self.name
            ))),
            Some((Err(e), _)) => Err(e.clone()),
            Some((Ok(value), seen)) => {
                let age = at.monotonic.saturating_sub(*seen);
                if age > self.stale_after {
                    Err(Error::Transient(format!(
                        "{}: no new sample for {} s",
                        self.name,
                        age.as_secs()
                    )))
                } else {
                    Ok(value)
                }
            }
        }
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.demand.set(Ask::Closed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Stamp {
        Stamp::new(Duration::from_secs(secs), 0.0)
    }

    fn wait_for<T: Send + 'static>(bg: &mut Background<T>, secs: u64) -> Result<&T, Error> {
        for _ in 0..200 {
            if !matches!(bg.latest(at(secs)), Err(Error::Transient(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        bg.latest(at(secs))
    }

    #[test]
    fn a_worker_produces_only_as_it_is_asked_and_its_end_is_its_reason() {
        let made = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = Arc::clone(&made);
        let mut bg = Background::spawn("count", Duration::from_secs(10), move || {
            Ok(move || {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if n > 3 {
                    Err(Error::Unavailable("done counting".into()))
                } else {
                    Ok(n)
                }
            })
        });
        let settle = |n: u32| {
            for _ in 0..400 {
                if made.load(std::sync::atomic::Ordering::SeqCst) >= n {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(50));
            made.load(std::sync::atomic::Ordering::SeqCst)
        };
        // One at start, then nothing until someone reads.
        assert_eq!(settle(1), 1);
        assert_eq!(bg.latest(at(1)).ok(), Some(&1));
        assert_eq!(settle(2), 2);
        assert_eq!(bg.latest(at(2)).ok(), Some(&2));
        assert_eq!(settle(3), 3);
        assert_eq!(bg.latest(at(3)).ok(), Some(&3));
        assert_eq!(settle(4), 4);
        assert_eq!(
            bg.latest(at(4)).err(),
            Some(Error::Unavailable("done counting".into()))
        );
    }

    #[test]
    fn what_a_worker_made_before_a_long_pause_in_reading_is_stale() {
        let mut bg = Background::spawn("paused", Duration::from_secs(10), || Ok(|| Ok(5u8)));
        assert_eq!(wait_for(&mut bg, 100).ok(), Some(&5));
        std::thread::sleep(Duration::from_millis(50));
        // Not read for 60 s (its source stood by): the sample waiting in the channel was made
        // just after the read at 100 s, not at 160 s.
        assert!(matches!(bg.latest(at(160)), Err(Error::Transient(m)) if m.contains("no new")));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(bg.latest(at(161)).ok(), Some(&5));
    }

    #[test]
    fn a_quiet_worker_is_stale_after_the_limit_and_a_failed_init_is_its_reason() {
        let mut slow = Background::spawn("slow", Duration::from_secs(10), || {
            let mut sent = false;
            Ok(move || {
                if sent {
                    std::thread::sleep(Duration::from_secs(3600));
                }
                sent = true;
                Ok(7u8)
            })
        });
        assert_eq!(wait_for(&mut slow, 100).ok(), Some(&7));
        assert_eq!(slow.latest(at(110)).ok(), Some(&7));
        assert!(matches!(slow.latest(at(111)), Err(Error::Transient(_))));

        let mut broken: Background<u8> = Background::spawn("broken", STALE_AFTER, || {
            Err::<fn() -> Result<u8, Error>, _>(Error::Unavailable("no SMC".into()))
        });
        assert_eq!(
            wait_for(&mut broken, 1).err(),
            Some(Error::Unavailable("no SMC".into()))
        );
    }
}
