//! macOS sources: parsers of ioreg, powermetrics, pmset, top and `macmon pipe` output (pure,
//! tested on real captures on any OS) and, on macOS only, the readers that run them.
//!
//! Sources, best first (see [`macos_sources`]):
//! - `macmon`: SMC `PSTR` system power plus the IOReport CPU/GPU/ANE/DRAM breakdown, no root;
//! - `smart-battery`: AppleSmartBattery through `ioreg -a -r -c AppleSmartBattery`;
//! - `powermetrics`: CPU/GPU/ANE energy, root only;
//! - `top`: CPU utilisation × the CPU power model, estimated.
//!
//! `pmset` gives state only (power source, charge, Low Power Mode), never watts, so it is not a
//! [`Source`](wattbar_core::Source): read it with `pmset::read_pmset` (macOS).
//!
//! Readers that block for a sampling interval (`macmon`, `powermetrics`, `top -l 2`) run in a
//! [`Background`] worker thread, so that one tick of the chain never waits for them; the chain
//! gets the latest finished sample.

pub mod ioreg;
pub mod macmon;
mod plist_xml;
pub mod pmset;
pub mod powermetrics;
pub mod top;

use crate::error::Error;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::Duration;
use wattbar_core::Stamp;

/// A background sample older than this is not served as current.
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// Runs a command and returns its standard output, read lossily.
///
/// A missing program is `Unavailable` (it will not appear later); a failing run is `Transient`
/// with the program's own message.
pub fn run_command(program: &str, args: &[&str]) -> Result<String, Error> {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::Unavailable(format!("`{program}` is not installed or not on PATH"))
            }
            std::io::ErrorKind::PermissionDenied => {
                Error::Unavailable(format!("`{program}` may not be run by this user: {e}"))
            }
            _ => Error::Transient(format!("could not run `{program}`: {e}")),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(Error::Transient(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            stderr.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The latest result of a producer that runs in its own thread.
///
/// The producer is built inside the thread (so it need not be `Send`, as macmon's IOReport
/// handles are not) and called in a loop; each result is sent to the owner. An `Unavailable`
/// result ends the thread, as does dropping the owner.
pub struct Background<T> {
    name: String,
    rx: Option<Receiver<Result<T, Error>>>,
    /// The latest result and the monotonic time of the read that first saw it.
    latest: Option<(Result<T, Error>, Duration)>,
    stale_after: Duration,
}

impl<T: Send + 'static> Background<T> {
    /// Starts a thread that calls `init` once, then the producer it returned until told to stop.
    pub fn spawn<F, P>(name: &str, stale_after: Duration, init: F) -> Self
    where
        F: FnOnce() -> Result<P, Error> + Send + 'static,
        P: FnMut() -> Result<T, Error>,
    {
        let (tx, rx) = mpsc::channel();
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
                    if tx.send(result).is_err() || stop {
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
            latest,
            stale_after,
        }
    }

    /// The newest result at `at`: `Transient` before the first one or when the worker has gone
    /// quiet for longer than `stale_after`; an `Unavailable` result stays.
    pub fn latest(&mut self, at: Stamp) -> Result<&T, Error> {
        let mut stopped = false;
        if let Some(rx) = &self.rx {
            loop {
                match rx.try_recv() {
                    Ok(result) => self.latest = Some((result, at.monotonic)),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        stopped = true;
                        break;
                    }
                }
            }
        }
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

/// The macOS sources, best first: macmon (SMC + IOReport), AppleSmartBattery, powermetrics
/// (root only), then the `top` CPU proxy.
#[cfg(target_os = "macos")]
pub fn macos_sources(model: crate::cpu_proxy::CpuPowerModel) -> Vec<Box<dyn wattbar_core::Source>> {
    vec![
        Box::new(macmon::MacmonSource::new(macmon::DEFAULT_INTERVAL)),
        Box::new(ioreg::SmartBatterySource::new()),
        Box::new(powermetrics::PowermetricsSource::new(
            powermetrics::DEFAULT_INTERVAL,
        )),
        Box::new(top::TopSource::new(model)),
    ]
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
    fn a_background_worker_serves_its_latest_sample_until_it_goes_stale() {
        let mut bg = Background::spawn("count", Duration::from_secs(10), || {
            let mut n = 0u32;
            Ok(move || {
                n += 1;
                if n > 3 {
                    Err(Error::Unavailable("done counting".into()))
                } else {
                    Ok(n)
                }
            })
        });
        // The worker sends 1, 2, 3 and then stops with its reason.
        let first = wait_for(&mut bg, 1);
        assert!(
            matches!(first, Ok(_) | Err(Error::Unavailable(_))),
            "{first:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            bg.latest(at(2)).err(),
            Some(Error::Unavailable("done counting".into()))
        );
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

    #[test]
    fn a_missing_program_is_unavailable_and_a_failing_one_transient() {
        assert!(matches!(
            run_command("wattbar-no-such-program", &[]),
            Err(Error::Unavailable(_))
        ));
        assert!(matches!(
            run_command("sh", &["-c", "echo oops >&2; exit 3"]),
            Err(Error::Transient(m)) if m.contains("oops")
        ));
        assert_eq!(
            run_command("sh", &["-c", "printf 'a\\tb'"]).ok().as_deref(),
            Some("a\tb")
        );
    }
}
