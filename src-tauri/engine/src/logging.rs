//! The one log setup of Wattbar's programs: human-readable lines on stderr, at a level the
//! program picks for its kind of work, which `RUST_LOG` overrides.
//!
//! With `WATTBAR_LOG_FILE` set, each line is also appended to that file as it is written, so that
//! the log of every program started under it can be read in one place (`make test` scans it for
//! the secrets the tests use). A file that cannot be opened is said once on stderr and left out.

use std::sync::Arc;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// The file each log line is also appended to.
pub const LOG_FILE_ENV: &str = "WATTBAR_LOG_FILE";

/// Starts logging at `default_level` (`"info"`, `"warn"`, …) unless `RUST_LOG` says otherwise.
/// A second call, or a subscriber already set by a test harness, leaves the first in place.
pub fn init(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let copy = std::env::var_os(LOG_FILE_ENV).and_then(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| {
                use std::io::Write;
                let path = path.to_string_lossy();
                let _ = writeln!(std::io::stderr(), "{LOG_FILE_ENV}={path}: {e}");
            })
            .ok()
    });
    // A log line that cannot be written is dropped. tracing-subscriber would otherwise report
    // the failure with `eprintln!`, which panics on the same closed stderr, in whichever thread
    // logged: a daemon started from a terminal that has gone stopped sampling at its next line.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .log_internal_errors(false);
    let _ = match copy {
        // Each line is formatted once and written whole to each: one append per line, so that
        // the lines of programs sharing the file never interleave.
        Some(file) => builder
            .with_ansi(false)
            .with_writer(std::io::stderr.and(Arc::new(file)))
            .try_init(),
        None => builder.with_writer(std::io::stderr).try_init(),
    };
}
