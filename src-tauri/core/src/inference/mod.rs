//! Inference: what one request to a local model server cost.
//!
//! - [`response`] reads what the server says about a request (tokens, durations, errors) from the
//!   bytes of its response as they pass, in any of the framings local servers use.
//! - [`attribution`] splits measured energy among the requests that were in flight, so that
//!   overlapping requests add up to what was measured, never more.
//! - [`record`] is the per-request record and the per-model figures built from records.
//! - [`usage`] asks a stream for its token usage and hides the answer from a client that did not
//!   ask for it.
//!
//! Rule: absent is unknown. A figure the server did not send, or that cannot be computed from
//! what it sent, is `None`, never 0.

pub mod attribution;
pub mod bound;
pub mod record;
pub mod response;
pub mod usage;

pub use attribution::{
    attribute, idle_baseline, window_energy, Baseline, Interval, Share, Window, WindowEnergy,
};
pub use record::{score, ModelStats, Observed, RatioSums, Record, Status};
pub use response::{Framing, ResponseMeter, ServerFigures, TokensSource};

use serde::{Deserialize, Serialize};

/// The inference endpoints Wattbar measures; every other path is forwarded unmeasured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Route {
    #[serde(rename = "/api/generate")]
    OllamaGenerate,
    #[serde(rename = "/api/chat")]
    OllamaChat,
    #[serde(rename = "/v1/chat/completions")]
    OpenAiChat,
    #[serde(rename = "/v1/completions")]
    OpenAiCompletions,
    /// A record a client measured itself and sent to `POST /v1/inference`.
    #[serde(rename = "external")]
    External,
}

impl Route {
    /// The route a `POST` to `path` is, if it is one Wattbar measures.
    pub fn of_post(path: &str) -> Option<Route> {
        match path.trim_end_matches('/') {
            "/api/generate" => Some(Route::OllamaGenerate),
            "/api/chat" => Some(Route::OllamaChat),
            "/v1/chat/completions" => Some(Route::OpenAiChat),
            "/v1/completions" => Some(Route::OpenAiCompletions),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Route::OllamaGenerate => "/api/generate",
            Route::OllamaChat => "/api/chat",
            Route::OpenAiChat => "/v1/chat/completions",
            Route::OpenAiCompletions => "/v1/completions",
            Route::External => "external",
        }
    }

    pub fn parse(s: &str) -> Option<Route> {
        match s {
            "external" => Some(Route::External),
            other => Route::of_post(other),
        }
    }
}

/// Models named `*:cloud` or `*-cloud` run on a remote service: local watts are not theirs.
pub fn is_remote_model(model: &str) -> bool {
    let m = model.trim();
    m.ends_with(":cloud") || m.ends_with("-cloud")
}

/// The median of finite values; `None` for none.
pub fn median(values: &mut Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// A genuine capture from `tests/fixtures/llm/` (SOURCES.md there), for the tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../tests/fixtures/llm/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_generation_endpoints_are_measured() {
        assert_eq!(Route::of_post("/api/generate"), Some(Route::OllamaGenerate));
        assert_eq!(Route::of_post("/api/chat/"), Some(Route::OllamaChat));
        assert_eq!(
            Route::of_post("/v1/chat/completions"),
            Some(Route::OpenAiChat)
        );
        assert_eq!(
            Route::of_post("/v1/completions"),
            Some(Route::OpenAiCompletions)
        );
        assert_eq!(Route::of_post("/api/embed"), None);
        assert_eq!(Route::of_post("/api/pull"), None);
    }

    #[test]
    fn cloud_models_are_recognised_by_their_tag_or_suffix() {
        assert!(is_remote_model("gpt-oss:120b-cloud"));
        assert!(is_remote_model("deepseek-v3.1:671b-cloud"));
        assert!(is_remote_model("kimi:cloud"));
        assert!(!is_remote_model("llama3.2:3b"));
        assert!(!is_remote_model("cloudy-llama:7b"));
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut vec![5.0, f64::NAN, 1.0, 9.0]), Some(5.0));
        assert_eq!(median(&mut Vec::new()), None);
    }
}
