//! The one log setup of Wattbar's programs: human-readable lines on stderr, at a level the
//! program picks for its kind of work, which `RUST_LOG` overrides.

/// Starts logging at `default_level` (`"info"`, `"warn"`, …) unless `RUST_LOG` says otherwise.
/// A second call, or a subscriber already set by a test harness, leaves the first in place.
pub fn init(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
