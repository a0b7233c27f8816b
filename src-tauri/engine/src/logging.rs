//! The one log setup of Wattbar's programs: human-readable lines on stderr, at a level the
//! program picks for its kind of work, which `RUST_LOG` overrides.

/// Starts logging at `default_level` (`"info"`, `"warn"`, …) unless `RUST_LOG` says otherwise.
/// A second call, or a subscriber already set by a test harness, leaves the first in place.
pub fn init(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // A log line that cannot be written is dropped. tracing-subscriber would otherwise report
    // the failure with `eprintln!`, which panics on the same closed stderr, in whichever thread
    // logged: a daemon started from a terminal that has gone stopped sampling at its next line.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .try_init();
}
