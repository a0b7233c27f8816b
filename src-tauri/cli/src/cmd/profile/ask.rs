//! One prompt to a model server, streamed: Ollama's `/api/generate` (NDJSON) or the
//! OpenAI-compatible `/v1/chat/completions` (Server-Sent Events, usage asked for). The text is
//! gathered as it arrives, the first token is stamped, and the server's own figures are read by
//! the same [`ResponseMeter`] the proxy uses.
//!
//! Limits: no overall time (a long answer takes as long as it takes), but an answer of at most
//! [`MAX_ANSWER_BYTES`] and an error body of at most [`MAX_ERROR_BYTES`], counted as they are
//! read: a server that streams without end is refused, saying so, before it fills the memory.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::io::Read;
use wattbar_core::inference::response::{Framing, ResponseMeter, ServerFigures};
use wattbar_core::inference::Route;
use wattbar_engine::unix_now;

/// The most of one answer read: a long answer of a real model is well under a MiB.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The most of an error's body read, and shown.
pub const MAX_ERROR_BYTES: u64 = 64 * 1024;

/// The server's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// Ollama's native `/api/generate`.
    Ollama,
    /// `/v1/chat/completions` (OpenAI, llama.cpp, vLLM, Ollama's compatible API).
    Openai,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::Ollama => "/api/generate",
            Api::Openai => "/v1/chat/completions",
        }
    }

    fn route(self) -> Route {
        match self {
            Api::Ollama => Route::OllamaGenerate,
            Api::Openai => Route::OpenAiChat,
        }
    }

    /// The request; `max_tokens`: at most this many generated tokens, and `temperature`, where
    /// set.
    fn body(
        self,
        model: &str,
        prompt: &str,
        max_tokens: Option<u32>,
        temperature: Option<f64>,
    ) -> Value {
        let mut body = match self {
            Api::Ollama => json!({ "model": model, "prompt": prompt, "stream": true }),
            Api::Openai => json!({
                "model": model,
                "messages": [{ "role": "user", "content": prompt }],
                "stream": true,
                "stream_options": { "include_usage": true },
            }),
        };
        let Some(o) = body.as_object_mut() else {
            return body;
        };
        match self {
            Api::Ollama => {
                let mut options = serde_json::Map::new();
                if let Some(n) = max_tokens {
                    options.insert("num_predict".into(), json!(n));
                }
                if let Some(t) = temperature {
                    options.insert("temperature".into(), json!(t));
                }
                if !options.is_empty() {
                    o.insert("options".into(), Value::Object(options));
                }
            }
            Api::Openai => {
                if let Some(n) = max_tokens {
                    o.insert("max_tokens".into(), json!(n));
                }
                if let Some(t) = temperature {
                    o.insert("temperature".into(), json!(t));
                }
            }
        }
        body
    }
}

/// The generated text a stream line (or a whole JSON body) carries, if any. Reasoning text
/// (`reasoning_content`) is not the answer and is left out.
pub fn content(api: Api, message: &Value) -> Option<&str> {
    match api {
        Api::Ollama => message["response"]
            .as_str()
            .or_else(|| message["message"]["content"].as_str()),
        Api::Openai => {
            let choice = &message["choices"][0];
            choice["delta"]["content"]
                .as_str()
                .or_else(|| choice["message"]["content"].as_str())
                .or_else(|| choice["text"].as_str())
        }
    }
}

/// The JSON of one line of a body, for either framing: `data: {…}` events or NDJSON lines.
fn line_json(line: &str) -> Option<Value> {
    let line = line.trim();
    let data = line.strip_prefix("data:").map(str::trim).unwrap_or(line);
    if data.is_empty() || data == "[DONE]" {
        return None;
    }
    serde_json::from_str(data).ok()
}

/// What came back for one prompt.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Unix seconds: just before the request was sent, at the first generated text, and when
    /// the body had ended.
    pub start: f64,
    pub first_token: Option<f64>,
    pub end: f64,
    pub text: String,
    pub figures: ServerFigures,
}

/// How the model is asked to generate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampling {
    /// At most this many generated tokens, where set.
    pub max_tokens: Option<u32>,
    /// The server's default where unset.
    pub temperature: Option<f64>,
}

/// Sends `prompt` to `model` at `base` (e.g. `http://127.0.0.1:11434`) and reads the answer
/// to its end.
pub fn ask(base: &str, api: Api, model: &str, prompt: &str, sampling: Sampling) -> Result<Answer> {
    let url = format!("{}{}", base.trim_end_matches('/'), api.path());
    let start = unix_now();
    // No overall limit: a long answer takes as long as it takes. Like the proxy, no HTTP_PROXY
    // from the environment reroutes the model server.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(std::time::Duration::from_secs(10)))
        .proxy(None)
        .http_status_as_error(false)
        .build()
        .into();
    let reply = agent
        .post(&url)
        .send_json(api.body(model, prompt, sampling.max_tokens, sampling.temperature))
        .with_context(|| format!("is the model server at {base}?"))?;
    let status = reply.status().as_u16();
    if status >= 400 {
        let body = reply
            .into_body()
            .with_config()
            .limit(MAX_ERROR_BYTES)
            .read_to_string()
            .unwrap_or_default();
        bail!("{url}: {status} {body}");
    }
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let framing = Framing::of_content_type(content_type);
    let mut meter = ResponseMeter::new(api.route(), framing);
    let mut reader = reply.into_body().into_reader();
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending = String::new();
    let mut body = String::new();
    let mut text = String::new();
    let mut first_token = None;
    let mut read = 0usize;
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("{url}: the answer broke off"))?;
        if n == 0 {
            break;
        }
        read += n;
        if read > MAX_ANSWER_BYTES {
            bail!("{url}: the answer ran past {MAX_ANSWER_BYTES} bytes: refused, not read further");
        }
        let chunk = &buf[..n];
        if meter.feed(chunk) > 0 && first_token.is_none() {
            first_token = Some(unix_now());
        }
        let chunk = String::from_utf8_lossy(chunk);
        if framing == Framing::Json {
            body.push_str(&chunk);
            continue;
        }
        pending.push_str(&chunk);
        while let Some(i) = pending.find('\n') {
            let line: String = pending.drain(..=i).collect();
            if let Some(t) = line_json(&line).as_ref().and_then(|v| content(api, v)) {
                text.push_str(t);
            }
        }
    }
    let end = unix_now();
    let rest = if framing == Framing::Json {
        body
    } else {
        pending
    };
    if let Some(t) = line_json(&rest).as_ref().and_then(|v| content(api, v)) {
        text.push_str(t);
    }
    let figures = meter.finish();
    if let Some(error) = &figures.error {
        bail!("{url}: the server answered with an error: {error}");
    }
    Ok(Answer {
        start,
        first_token,
        end,
        text,
        figures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/llm/");
        std::fs::read_to_string(format!("{path}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn text_of(api: Api, body: &str) -> String {
        body.lines()
            .filter_map(line_json)
            .filter_map(|v| content(api, &v).map(str::to_string))
            .collect()
    }

    #[test]
    fn an_answer_without_end_is_refused_at_its_cap() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n\r\n";
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            // One line that never ends: 1 MiB at a time, past the cap.
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..(MAX_ANSWER_BYTES >> 20) + 4 {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
            }
        });
        let sampling = Sampling {
            max_tokens: None,
            temperature: None,
        };
        let refused = ask(
            &format!("http://127.0.0.1:{port}"),
            Api::Ollama,
            "m",
            "hi",
            sampling,
        )
        .err()
        .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("ran past 16777216 bytes")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_grader_models_request_asks_for_temperature_0_and_few_tokens_in_each_api() {
        let ollama = Api::Ollama.body("m", "p", Some(5), Some(0.0));
        assert_eq!(
            ollama["options"],
            json!({"num_predict": 5, "temperature": 0.0})
        );
        let openai = Api::Openai.body("m", "p", Some(5), Some(0.0));
        assert_eq!(
            (&openai["max_tokens"], &openai["temperature"]),
            (&json!(5), &json!(0.0))
        );
        // Unset: the server's defaults, nothing sent.
        assert!(Api::Ollama
            .body("m", "p", None, None)
            .get("options")
            .is_none());
        assert!(Api::Openai
            .body("m", "p", None, None)
            .get("temperature")
            .is_none());
    }

    #[test]
    fn the_ollama_stream_gives_its_answer_line_by_line() {
        let text = text_of(
            Api::Ollama,
            &fixture("ollama_api-generate_stream_llama3_openllmetry.ndjson"),
        );
        assert!(text.starts_with("A joke about OpenTelemetry"), "{text}");
    }

    #[test]
    fn the_openai_stream_gives_the_answer_not_the_reasoning() {
        // SOURCES.md: content "Olá!" after 45 reasoning_content deltas.
        let sse =
            fixture("llamacpp_v1-chat-completions_stream_gpt-oss-20b_usage-timings_fantasy.sse");
        assert_eq!(text_of(Api::Openai, &sse), "Olá!");
    }

    #[test]
    fn a_whole_json_body_gives_its_message() {
        let body =
            fixture("llamacpp_v1-chat-completions_nonstream_gpt-oss-20b_timings_fantasy.json");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(content(Api::Openai, &v), Some("Olá!"));
    }
}
