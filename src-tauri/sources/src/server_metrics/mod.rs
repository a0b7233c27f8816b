//! A model server's own `/metrics`: the tokens it has counted per model, so that energy per
//! token is known without the proxy. Read the bytes, then [`parse_server_metrics`].
//!
//! Rules:
//! - The family is read off the exposition itself: the first sample named for llama.cpp
//!   (`llamacpp:`), vLLM (`vllm:`), SGLang (`sglang:`) or TGI (`tgi_`). An exposition of none of
//!   them is refused with what it holds (Ollama has no `/metrics` in any release).
//! - A model's series are summed across every label but its name (vLLM's `engine`, one per
//!   data-parallel rank; SGLang's ranks). llama.cpp and TGI name no model: they serve one.
//! - What the server does not expose is `None`, never 0. A counter that is negative, infinite or
//!   NaN is left out, as if not exposed.
//! - Prompt tokens are every token of every prompt, as a client's `usage.prompt_tokens` counts
//!   them: llama.cpp counts the tokens it reused from its cache apart (builds since 2025), so
//!   both are added.
//! - The counters as the families define them (`docs/server-metrics.md`):
//!
//! | family | prompt tokens | completion tokens | running | GPU seconds |
//! |---|---|---|---|---|
//! | llama.cpp | `llamacpp:prompt_tokens_total` + `llamacpp:prompt_tokens_cached_total` | `llamacpp:tokens_predicted_total` | `llamacpp:requests_processing` | — |
//! | vLLM | `vllm:prompt_tokens_total` | `vllm:generation_tokens_total` | `vllm:num_requests_running` | — |
//! | SGLang | `sglang:prompt_tokens_total` | `sglang:generation_tokens_total` | `sglang:num_running_reqs` | `sglang:gpu_execution_seconds_total{category}` |
//! | TGI | `tgi_request_input_length_sum` | `tgi_request_generated_tokens_sum` | `tgi_batch_current_size` | — |

pub mod exposition;
pub mod scrape;

use crate::error::Error;
use std::collections::BTreeMap;
use wattbar_core::inference::server_window::{Counting, ServerCounters};

/// Which server wrote an exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    LlamaCpp,
    Vllm,
    Sglang,
    Tgi,
}

/// What a family's series are named.
struct Names {
    prefix: &'static str,
    prompt: &'static str,
    /// Prompt tokens reused from a cache, counted apart from `prompt`.
    prompt_cached: Option<&'static str>,
    completion: &'static str,
    running: &'static str,
    gpu_seconds: Option<&'static str>,
    /// The label naming the model, where the family has one.
    model_label: Option<&'static str>,
}

impl Family {
    pub const ALL: [Family; 4] = [Family::LlamaCpp, Family::Vllm, Family::Sglang, Family::Tgi];

    /// The name users know the server by.
    pub fn name(self) -> &'static str {
        match self {
            Family::LlamaCpp => "llama.cpp",
            Family::Vllm => "vLLM",
            Family::Sglang => "SGLang",
            Family::Tgi => "TGI",
        }
    }

    /// The family a person named: its name in any case (`llamacpp` too).
    pub fn named(kind: &str) -> Option<Family> {
        let kind = kind.trim().to_ascii_lowercase();
        let kind = if kind == "llamacpp" {
            "llama.cpp"
        } else {
            &kind
        };
        Family::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(kind))
    }

    /// When its token counters move.
    pub fn counting(self) -> Counting {
        match self {
            Family::Vllm | Family::Sglang => Counting::AsGenerated,
            Family::LlamaCpp | Family::Tgi => Counting::AtRequestEnd,
        }
    }

    fn names(self) -> Names {
        match self {
            Family::LlamaCpp => Names {
                prefix: "llamacpp:",
                prompt: "llamacpp:prompt_tokens_total",
                prompt_cached: Some("llamacpp:prompt_tokens_cached_total"),
                completion: "llamacpp:tokens_predicted_total",
                running: "llamacpp:requests_processing",
                gpu_seconds: None,
                model_label: None,
            },
            Family::Vllm => Names {
                prefix: "vllm:",
                prompt: "vllm:prompt_tokens_total",
                prompt_cached: None,
                completion: "vllm:generation_tokens_total",
                running: "vllm:num_requests_running",
                gpu_seconds: None,
                model_label: Some("model_name"),
            },
            Family::Sglang => Names {
                prefix: "sglang:",
                prompt: "sglang:prompt_tokens_total",
                prompt_cached: None,
                completion: "sglang:generation_tokens_total",
                running: "sglang:num_running_reqs",
                gpu_seconds: Some("sglang:gpu_execution_seconds_total"),
                model_label: Some("model_name"),
            },
            Family::Tgi => Names {
                prefix: "tgi_",
                prompt: "tgi_request_input_length_sum",
                prompt_cached: None,
                completion: "tgi_request_generated_tokens_sum",
                running: "tgi_batch_current_size",
                gpu_seconds: None,
                model_label: None,
            },
        }
    }

    fn of(sample_name: &str) -> Option<Family> {
        Family::ALL
            .into_iter()
            .find(|f| sample_name.starts_with(f.names().prefix))
    }
}

/// What one scrape of a server's `/metrics` says.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerMetrics {
    pub family: Family,
    /// Per model: its name where the server labels its series; `None` for the one model of a
    /// server that does not name it (llama.cpp, TGI).
    pub models: BTreeMap<Option<String>, ServerCounters>,
    /// Lines that were not samples, skipped.
    pub skipped_lines: usize,
}

fn add(to: &mut Option<f64>, value: f64) {
    if value.is_finite() && value >= 0.0 {
        *to = Some(to.unwrap_or(0.0) + value);
    }
}

/// The token counters of a server's `/metrics` text, per model.
pub fn parse_server_metrics(text: &str) -> Result<ServerMetrics, Error> {
    let (samples, skipped_lines) = exposition::samples(text);
    let family = samples
        .iter()
        .find_map(|s| Family::of(s.name))
        .ok_or_else(|| Error::Parse {
            what: "server metrics",
            line: None,
            message: format!(
                "no series of llama.cpp, vLLM, SGLang or TGI among {} samples{}",
                samples.len(),
                if samples.iter().any(|s| s.name.starts_with("ollama_")) {
                    " (Ollama has no /metrics in any release: its requests are measured through \
                     the proxy)"
                } else {
                    ""
                }
            ),
        })?;
    let names = family.names();
    let mut models: BTreeMap<Option<String>, ServerCounters> = BTreeMap::new();
    for s in &samples {
        let wanted = s.name == names.prompt
            || names.prompt_cached == Some(s.name)
            || s.name == names.completion
            || s.name == names.running
            || names.gpu_seconds == Some(s.name);
        if !wanted {
            continue;
        }
        let model = names
            .model_label
            .and_then(|l| s.label(l))
            .map(str::to_string);
        let counters = models.entry(model).or_default();
        match s.name {
            n if n == names.prompt || names.prompt_cached == Some(n) => {
                add(&mut counters.prompt_tokens, s.value)
            }
            n if n == names.completion => add(&mut counters.completion_tokens, s.value),
            n if n == names.running => add(&mut counters.running, s.value),
            _ => match s.label("category") {
                Some(c) if c.starts_with("prefill") => {
                    add(&mut counters.prefill_gpu_seconds, s.value)
                }
                Some(c) if c.starts_with("decode") => {
                    add(&mut counters.decode_gpu_seconds, s.value)
                }
                _ => {}
            },
        }
    }
    Ok(ServerMetrics {
        family,
        models,
        skipped_lines,
    })
}
