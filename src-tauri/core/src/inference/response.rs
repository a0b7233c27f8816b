//! Reads what a model server says about a request from its response body, chunk by chunk, as
//! the bytes pass through the proxy: nothing is held but the current line.
//!
//! Framings: Ollama's NDJSON (`application/x-ndjson`), the OpenAI-compatible Server-Sent Events
//! (`text/event-stream`, `data: {json}` ended by `data: [DONE]`) and a single JSON body
//! (`"stream": false`).
//!
//! Rules, from the servers' own sources (`shared/notes/llm-servers.md`):
//! - Ollama's durations are nanoseconds, and every metric is omitted when zero: absent is unknown.
//! - Ollama streams one `done: false` line per generated token; the `done: true` line carries the
//!   metrics. The server's own counts always win. Only when a stream ends without any (a
//!   cancelled Ollama stream, an OpenAI stream from a server that ignores `include_usage`) are
//!   its content chunks counted as tokens, and labelled [`TokensSource::Counted`]: local servers
//!   send about one token per chunk, so the count is close but not exact.
//! - An OpenAI stream carries `usage` only when asked for, in a last chunk with `choices: []`;
//!   other chunks have `usage: null` or zeros. The last non-zero usage wins; usages are never
//!   added. llama.cpp adds `timings` (milliseconds).
//! - An error may arrive after a 200, as a final `{"error": ...}` line or event.

use super::route::Route;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest line (or single JSON body) that is parsed; a longer one is passed on unread.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// How a response body is framed, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Ndjson,
    Sse,
    Json,
}

impl Framing {
    pub fn of_content_type(content_type: &str) -> Framing {
        let ct = content_type.to_ascii_lowercase();
        if ct.starts_with("text/event-stream") {
            Framing::Sse
        } else if ct.contains("ndjson") || ct.contains("jsonl") {
            Framing::Ndjson
        } else {
            Framing::Json
        }
    }
}

/// Where a record's token counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokensSource {
    /// The server's own figures (`usage`, `eval_count`, `timings`).
    Server,
    /// The streamed content chunks, counted as they passed: the server gave no count.
    Counted,
    /// The client that posted the record (`POST /v1/inference`).
    Client,
}

/// What the server said about one request. Every figure is `None` unless the server gave it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerFigures {
    pub model: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Time the server spent on the prompt (uncached tokens only, on Ollama).
    pub prefill_seconds: Option<f64>,
    /// Time the server spent generating.
    pub decode_seconds: Option<f64>,
    /// Model scheduling and load time (Ollama), reported apart and never charged to the request.
    pub load_seconds: Option<f64>,
    pub total_seconds: Option<f64>,
    /// Generated tokens per second as the server measured them.
    pub decode_rate: Option<f64>,
    /// The server's error message, also one sent after a 200.
    pub error: Option<String>,
    /// The server said the response was complete (`done: true`, `[DONE]`, a whole JSON body).
    pub finished: bool,
    /// Stream chunks that carried generated content.
    pub content_chunks: u64,
    /// Where `completion_tokens` came from, when known.
    pub tokens_source: Option<TokensSource>,
}

/// Follows one response body.
#[derive(Debug)]
pub struct ResponseMeter {
    route: Route,
    framing: Framing,
    line: Vec<u8>,
    /// The current line went past [`MAX_LINE_BYTES`]; it is skipped up to its end.
    skipping: bool,
    figures: ServerFigures,
}

impl ResponseMeter {
    pub fn new(route: Route, framing: Framing) -> Self {
        ResponseMeter {
            route,
            framing,
            line: Vec::new(),
            skipping: false,
            figures: ServerFigures::default(),
        }
    }

    /// Reads the next bytes of the body; answers how many content chunks they completed, so
    /// that the caller can stamp the first token.
    pub fn feed(&mut self, bytes: &[u8]) -> u64 {
        let before = self.figures.content_chunks;
        if self.framing == Framing::Json {
            self.push(bytes);
            return 0;
        }
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.push(&rest[..i]);
            self.end_line();
            rest = &rest[i + 1..];
        }
        self.push(rest);
        self.figures.content_chunks - before
    }

    /// The figures once the body has ended (a last line without a newline is read too). With no
    /// count from the server, a stream's content chunks are the count.
    pub fn finish(mut self) -> ServerFigures {
        self.end_line();
        let f = &mut self.figures;
        if f.completion_tokens.is_some() {
            f.tokens_source = Some(TokensSource::Server);
        } else if f.content_chunks > 0 {
            f.completion_tokens = Some(f.content_chunks);
            f.tokens_source = Some(TokensSource::Counted);
        }
        self.figures
    }

    /// What is known so far.
    pub fn figures(&self) -> &ServerFigures {
        &self.figures
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            self.skipping = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let skipped = std::mem::replace(&mut self.skipping, false);
        if skipped {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match self.framing {
            Framing::Ndjson | Framing::Json => self.object(text),
            Framing::Sse => {
                let Some(data) = text.strip_prefix("data:") else {
                    return;
                };
                let data = data.trim();
                if data == "[DONE]" {
                    self.figures.finished = true;
                } else {
                    self.object(data);
                }
            }
        }
    }

    fn object(&mut self, text: &str) {
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if let Some(e) = v.get("error") {
            self.figures.error = Some(match e {
                Value::String(s) => s.clone(),
                Value::Object(o) => o
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string()),
                other => other.to_string(),
            });
            return;
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            if !m.is_empty() {
                self.figures.model = Some(m.to_string());
            }
        }
        match self.route {
            Route::OllamaGenerate | Route::OllamaChat => self.ollama(&v),
            Route::OpenAiChat | Route::OpenAiCompletions | Route::External => self.openai(&v),
        }
    }

    fn ollama(&mut self, v: &Value) {
        match v.get("done").and_then(Value::as_bool) {
            Some(false) => self.figures.content_chunks += 1,
            Some(true) => {
                let f = &mut self.figures;
                f.finished = true;
                f.prompt_tokens = count(v, "prompt_eval_count").or(f.prompt_tokens);
                f.completion_tokens = count(v, "eval_count").or(f.completion_tokens);
                f.prefill_seconds = nanos(v, "prompt_eval_duration");
                f.decode_seconds = nanos(v, "eval_duration");
                f.load_seconds = nanos(v, "load_duration");
                f.total_seconds = nanos(v, "total_duration");
                f.decode_rate = match (f.completion_tokens, f.decode_seconds) {
                    (Some(n), Some(s)) if s > 0.0 => Some(n as f64 / s),
                    _ => None,
                };
            }
            None => {}
        }
    }

    fn openai(&mut self, v: &Value) {
        let f = &mut self.figures;
        if let Some(choices) = v.get("choices").and_then(Value::as_array) {
            let generated = choices.iter().any(|c| {
                let delta = c.get("delta");
                let text = |key: &str| {
                    delta
                        .and_then(|d| d.get(key))
                        .and_then(Value::as_str)
                        .is_some_and(|s| !s.is_empty())
                };
                text("content")
                    || text("reasoning_content")
                    || text("reasoning")
                    || delta
                        .and_then(|d| d.get("tool_calls"))
                        .is_some_and(|t| !t.is_null())
                    || c.get("text")
                        .and_then(Value::as_str)
                        .is_some_and(|s| !s.is_empty())
            });
            if generated && self.framing == Framing::Sse {
                f.content_chunks += 1;
            }
            if self.framing == Framing::Json && !choices.is_empty() {
                f.finished = true;
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            let prompt = count(u, "prompt_tokens");
            let completion = count(u, "completion_tokens");
            if prompt.is_some() || completion.is_some() {
                f.prompt_tokens = prompt;
                f.completion_tokens = completion;
            }
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            f.prefill_seconds = millis(t, "prompt_ms").or(f.prefill_seconds);
            f.decode_seconds = millis(t, "predicted_ms").or(f.decode_seconds);
            let predicted = count(t, "predicted_n");
            f.decode_rate = positive(t, "predicted_per_second").or_else(|| {
                match (predicted, f.decode_seconds) {
                    (Some(n), Some(s)) if s > 0.0 => Some(n as f64 / s),
                    _ => None,
                }
            });
            if f.completion_tokens.is_none() {
                f.completion_tokens = predicted;
            }
            if f.prompt_tokens.is_none() {
                f.prompt_tokens = match (
                    count(t, "prompt_n"),
                    t.get("cache_n").and_then(Value::as_u64),
                ) {
                    (Some(n), cached) => Some(n + cached.unwrap_or(0)),
                    (None, _) => None,
                };
            }
        }
    }
}

/// A positive count; 0 or absent is unknown.
fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64).filter(|&n| n > 0)
}

fn positive(v: &Value, key: &str) -> Option<f64> {
    v.get(key)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite() && *x > 0.0)
}

fn nanos(v: &Value, key: &str) -> Option<f64> {
    positive(v, key).map(|ns| ns / 1e9)
}

fn millis(v: &Value, key: &str) -> Option<f64> {
    positive(v, key).map(|ms| ms / 1e3)
}

#[cfg(test)]
mod tests;
