//! Asking an OpenAI-compatible stream for its token usage, and hiding the answer from a client
//! that did not ask for it.
//!
//! Rules (`shared/notes/llm-servers.md`):
//! - A stream carries `usage` only when the request says `stream_options: {"include_usage":
//!   true}`: one extra chunk with `choices: []` before `data: [DONE]`. So the proxy adds the
//!   option to a streamed request that lacks it, and removes that one chunk from the answer, so
//!   that the client gets exactly the events it would have had. Nothing else is touched: a
//!   request that already asks, or is not streamed, or is no JSON object, goes up unchanged.
//! - The option is added as text ([`members`](super::members)): after the body's opening brace,
//!   or after that of its `stream_options`, or in place of a `stream_options` that is no object.
//!   Every other byte the client sent stays as it was.
//! - The filter works line by line and holds nothing but the current line: a usage chunk is
//!   dropped with the blank line that ends its event; every other byte passes in order.

use super::members::{Edits, Object};
use serde_json::Value;

/// The members of a request that asking for usage reads.
pub const READS: [&str; 2] = ["stream", "stream_options"];

/// Asks for `include_usage` in `edits` when the request is a stream that did not ask; whether
/// it did. `request` keeps [`READS`].
pub fn ask_for_usage(request: &Object, edits: &mut Edits) -> bool {
    if request.bool("stream") != Some(true) {
        return false;
    }
    let asked = "true".to_string();
    match request.object("stream_options", &["include_usage"]) {
        Some(options) if options.bool("include_usage") == Some(true) => return false,
        Some(options) => edits.set(&options, "include_usage", asked),
        None => edits.set(
            request,
            "stream_options",
            format!("{{\"include_usage\":{asked}}}"),
        ),
    }
    true
}

/// Removes the usage-only chunk (`choices: []` with a `usage` object) from an SSE stream.
#[derive(Debug, Default)]
pub struct UsageChunkFilter {
    line: Vec<u8>,
    /// A usage chunk was dropped; the blank line that ends its event goes with it.
    dropped: bool,
}

impl UsageChunkFilter {
    /// The bytes to pass on for the next piece of the stream; a partial line waits for its end.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + self.line.len());
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..=i]);
            self.end_line(&mut out);
            rest = &rest[i + 1..];
        }
        self.line.extend_from_slice(rest);
        out
    }

    /// What is left once the stream has ended (a last line without its newline).
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        out
    }

    /// Whether a partial line is held.
    pub fn holds(&self) -> bool {
        !self.line.is_empty()
    }

    fn end_line(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.line);
        let text = trim_ascii(&line);
        if text.is_empty() {
            if !std::mem::replace(&mut self.dropped, false) {
                out.extend_from_slice(&line);
            }
            return;
        }
        self.dropped = false;
        if is_usage_chunk(text) {
            self.dropped = true;
            return;
        }
        out.extend_from_slice(&line);
    }
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end.max(start)]
}

fn is_usage_chunk(line: &[u8]) -> bool {
    let Some(data) = line.strip_prefix(b"data:") else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return false;
    };
    v.get("choices")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
        && v.get("usage").is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inference::fixture;

    /// `body` as sent upstream, when the proxy asked it for usage.
    fn asked(body: &[u8]) -> Option<Vec<u8>> {
        let request = Object::parse(std::str::from_utf8(body).ok()?, &READS)?;
        let mut edits = Edits::default();
        ask_for_usage(&request, &mut edits).then(|| edits.apply(body))?
    }

    #[test]
    fn a_stream_that_did_not_ask_is_asked_with_its_own_bytes_kept() {
        let body = br#"{"model":"smollm2", "stream": true,"messages":[]}"#;
        let asked = asked(body).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&asked),
            r#"{"stream_options":{"include_usage":true},"model":"smollm2", "stream": true,"messages":[]}"#
        );
        let v: Value = serde_json::from_slice(&asked).unwrap_or_default();
        assert_eq!(v["stream_options"]["include_usage"], true);
    }

    #[test]
    fn only_streams_that_lack_usage_are_changed() {
        assert_eq!(asked(br#"{"model":"m"}"#), None);
        assert_eq!(asked(br#"{"model":"m","stream":false}"#), None);
        assert_eq!(
            asked(br#"{"stream":true,"stream_options":{"include_usage":true}}"#),
            None
        );
        assert_eq!(asked(b"not json"), None);
        assert_eq!(asked(b"[1,2]"), None);
        let off = asked(br#"{"stream":true,"stream_options":{"include_usage":false,"x":1}}"#)
            .unwrap_or_default();
        let v: Value = serde_json::from_slice(&off).unwrap_or_default();
        assert_eq!(
            v["stream_options"],
            serde_json::json!({"include_usage": true, "x": 1})
        );
    }

    /// The genuine llama.cpp stream, with usage: the filter, fed in pieces of every size, passes
    /// every byte but the usage event's.
    #[test]
    fn the_usage_chunk_alone_is_removed_whatever_the_pieces() {
        let body =
            fixture("llamacpp_v1-chat-completions_stream_gpt-oss-20b_usage-timings_fantasy.sse");
        let text = String::from_utf8_lossy(&body).to_string();
        let usage_events: Vec<&str> = text
            .split_inclusive("\n\n")
            .filter(|e| e.contains("\"choices\":[]") && e.contains("\"usage\""))
            .collect();
        assert_eq!(usage_events.len(), 1, "the capture has one usage chunk");
        let expected = text.replacen(usage_events[0], "", 1);
        for size in [1, 3, 64, 4096] {
            let mut filter = UsageChunkFilter::default();
            let mut out = Vec::new();
            for piece in body.chunks(size) {
                out.extend(filter.push(piece));
            }
            out.extend(filter.finish());
            assert_eq!(String::from_utf8_lossy(&out), expected, "pieces of {size}");
        }
    }

    #[test]
    fn a_stream_without_a_usage_chunk_passes_unchanged() {
        let body = fixture("ollama_v1-chat-completions_stream_qwen2.5-0.5b_no-usage_elastic.sse");
        let mut filter = UsageChunkFilter::default();
        let mut out = Vec::new();
        for piece in body.chunks(7) {
            out.extend(filter.push(piece));
        }
        assert!(!filter.holds() || body.last() != Some(&b'\n'));
        out.extend(filter.finish());
        assert_eq!(out, body);
    }
}
