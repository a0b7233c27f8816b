//! Inference: what one request to a local model server cost.
//!
//! - [`response`] reads what the server says about a request (tokens, durations, errors) from the
//!   bytes of its response as they pass, in any of the framings local servers use.
//! - [`attribution`] splits measured energy among the requests that were in flight, so that
//!   overlapping requests add up to what was measured, never more; [`claims`] keeps what records
//!   settled earlier hold, whatever order records arrive in.
//! - [`route`] names the endpoints that are measured.
//! - [`record`] is the per-request record and the per-model figures built from records.
//! - [`request`] reads a generation request's body once, for its model, low-power routing
//!   ([`routing`]) and usage, and changes only the bytes it must ([`members`]).
//! - [`server_window`] turns a model server's own token counters into tokens per window.
//! - [`usage`] asks a stream for its token usage and hides the answer from a client that did not
//!   ask for it.
//!
//! Rule: absent is unknown. A figure the server did not send, or that cannot be computed from
//! what it sent, is `None`, never 0.

pub mod attribution;
pub mod bound;
pub mod claims;
pub mod energy_line;
pub mod interval;
pub mod members;
pub mod receipt;
pub mod record;
pub mod request;
pub mod resident;
pub mod response;
pub mod route;
pub mod routing;
pub mod server_totals;
pub mod server_window;
pub mod usage;
pub mod window;

pub use attribution::{
    attribute, attribute_held, idle_baseline, Answered, Baseline, Interval, Share, Window,
};
pub use claims::Claims;
pub use record::{score, ModelStats, Observed, PriceNow, RatioSums, Record, Routed, Status};
pub use response::{Framing, ResponseMeter, ServerFigures, TokensSource};
pub use route::{check_model_name, is_remote_model, model_key, Route, MAX_MODEL_NAME_BYTES};
pub use window::{window_energy, WindowEnergy};

/// A genuine capture from `tests/fixtures/llm/` (SOURCES.md there), for the tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../tests/fixtures/llm/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
