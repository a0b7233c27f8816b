//! The engine's clocks, behind one small trait so that tests can drive suspend and clock steps.
//!
//! Rule: energy is integrated on [`Clock::elapsed`], a clock that never goes back and keeps
//! counting while the machine sleeps (Linux `CLOCK_BOOTTIME`, macOS `CLOCK_MONOTONIC`, which
//! both count sleep). A suspend therefore shows up as one long interval, which the gap policy
//! leaves out of every total, counters included. [`Clock::unix`] is the wall clock, used only to
//! label samples (history, calendar days, tariffs): an NTP step either way moves the labels, never
//! the energy.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + 'static {
    /// Time since an arbitrary origin; never goes back, counts sleep.
    fn elapsed(&self) -> Duration;
    /// Wall-clock time, seconds since the Unix epoch; may step either way.
    fn unix(&self) -> f64;
    /// The runtime whose pausable time this clock follows, when it keeps time of its own
    /// (tests): a wait then sleeps on that time. `None`: waits are in real time.
    fn runtime(&self) -> Option<&tokio::runtime::Handle> {
        None
    }
}

/// Wall-clock time now, seconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The machine's clocks.
pub struct SystemClock {
    origin: Duration,
}

impl SystemClock {
    pub fn new() -> Self {
        SystemClock {
            origin: boot_time(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        boot_time().saturating_sub(self.origin)
    }

    fn unix(&self) -> f64 {
        unix_now()
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn boot_time() -> Duration {
    timespec(rustix::time::clock_gettime(rustix::time::ClockId::Boottime))
}

// Darwin's CLOCK_MONOTONIC keeps counting while the machine sleeps (unlike Linux's).
#[cfg(target_vendor = "apple")]
fn boot_time() -> Duration {
    timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::Monotonic,
    ))
}

#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
fn timespec(t: rustix::time::Timespec) -> Duration {
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// This process's CPU time so far, every thread's (those that ended included), in nanoseconds:
/// `CLOCK_PROCESS_CPUTIME_ID`, the kernel's `sum_exec_runtime` that `/proc/[pid]/schedstat`
/// shows per thread.
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
pub fn own_cpu_time() -> Option<Duration> {
    Some(timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::ProcessCPUTime,
    )))
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
pub fn own_cpu_time() -> Option<Duration> {
    None
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_vendor = "apple")))]
fn boot_time() -> Duration {
    use std::sync::OnceLock;
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

/// A clock for tests: it follows tokio's (pausable) clock, and a test can make the machine
/// sleep or step the wall clock.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<Manual>>,
    /// The runtime whose (pausable) clock this one follows, when made inside one.
    runtime: Option<tokio::runtime::Handle>,
}

struct Manual {
    origin: tokio::time::Instant,
    unix_origin: f64,
    slept: Duration,
    wall_offset: f64,
}

impl ManualClock {
    /// Starts at `unix_origin` on the wall clock.
    pub fn new(unix_origin: f64) -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(Manual {
                origin: tokio::time::Instant::now(),
                unix_origin,
                slept: Duration::ZERO,
                wall_offset: 0.0,
            })),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Manual) -> T) -> T {
        // tokio's clock is the runtime's only inside it: the engine's thread enters it to read.
        let _inside = self.runtime.as_ref().map(tokio::runtime::Handle::enter);
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The machine sleeps for `d`: both clocks move on, timers do not fire meanwhile.
    pub fn sleep(&self, d: Duration) {
        self.with(|m| m.slept += d);
    }

    /// NTP steps the wall clock by `seconds` (negative: back); elapsed time is untouched.
    pub fn step_wall(&self, seconds: f64) {
        self.with(|m| m.wall_offset += seconds);
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        self.with(|m| m.origin.elapsed() + m.slept)
    }

    fn unix(&self) -> f64 {
        self.with(|m| m.unix_origin + (m.origin.elapsed() + m.slept).as_secs_f64() + m.wall_offset)
    }

    fn runtime(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_moves_forward_with_the_wall_clock() {
        let clock = SystemClock::new();
        let (e0, u0) = (clock.elapsed(), clock.unix());
        std::thread::sleep(Duration::from_millis(20));
        let (e1, u1) = (clock.elapsed(), clock.unix());
        assert!(e1 >= e0 + Duration::from_millis(20), "{e0:?} → {e1:?}");
        assert!(((u1 - u0) - (e1 - e0).as_secs_f64()).abs() < 0.5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_manual_sleep_moves_both_clocks_and_a_step_only_the_wall() {
        let clock = ManualClock::new(1_000.0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        clock.sleep(Duration::from_secs(3600));
        assert_eq!(clock.elapsed(), Duration::from_secs(3602));
        clock.step_wall(-60.0);
        assert_eq!(clock.elapsed(), Duration::from_secs(3602));
        assert!((clock.unix() - (1_000.0 + 3602.0 - 60.0)).abs() < 1e-6);
    }
}
