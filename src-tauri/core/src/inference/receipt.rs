//! The energy receipt: a request's figures put into its own answer, for a client that asked for
//! them (`X-Wattbar-Receipt: 1`).
//!
//! Rules:
//! - The receipt is the record's own figures, copied: it equals `GET /v1/inference/{id}` field
//!   for field.
//! - It goes where each client library lets it through: a last field `"wattbar"` in Ollama's
//!   final `done: true` object (streamed or not) and in a whole OpenAI JSON body; in an OpenAI
//!   stream, an SSE comment line `: wattbar {...}` before `data: [DONE]`, which clients skip.
//! - Bytes that do not have the expected shape are left as they are: a receipt is never worth a
//!   broken answer.

use super::Record;
use crate::Quality;
use serde::Serialize;

/// What a request cost, as its answer carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    pub id: u64,
    pub energy_joules: Option<f64>,
    pub net_energy_joules: Option<f64>,
    pub energy_bound_joules: Option<f64>,
    pub net_energy_bound_joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    pub covered: Option<f64>,
    pub quality: Option<Quality>,
    /// Why the figures are missing: the record was not made in time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// NeuralWatt's `: energy` and `: cost` comments, which a stream carries before its own.
    #[serde(skip)]
    pub line: Option<super::energy_line::EnergyLine>,
}

impl Receipt {
    pub fn of(r: &Record) -> Receipt {
        Receipt {
            id: r.id,
            energy_joules: r.energy_joules,
            net_energy_joules: r.net_energy_joules,
            energy_bound_joules: r.energy_bound_joules,
            net_energy_bound_joules: r.net_energy_bound_joules,
            joules_per_token: r.joules_per_token,
            covered: r.covered,
            quality: r.quality,
            error: None,
            line: None,
        }
    }

    /// A receipt for record `id` that could not be read, saying why.
    pub fn missing(id: u64, why: String) -> Receipt {
        Receipt {
            id,
            energy_joules: None,
            net_energy_joules: None,
            energy_bound_joules: None,
            net_energy_bound_joules: None,
            joules_per_token: None,
            covered: None,
            quality: None,
            error: Some(why),
            line: None,
        }
    }

    fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// `bytes` with the receipt as the last field of the last JSON object in them (Ollama's
    /// final line, or a whole JSON body); `None` when they end in no object.
    pub fn into_object(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let trimmed = bytes.len()
            - bytes
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        let close = trimmed.checked_sub(1).filter(|&i| bytes[i] == b'}')?;
        let before = bytes[..close]
            .iter()
            .rev()
            .find(|b| !b.is_ascii_whitespace())?;
        let comma = if *before == b'{' { "" } else { "," };
        let mut out = Vec::with_capacity(bytes.len() + 256);
        out.extend_from_slice(&bytes[..close]);
        out.extend_from_slice(format!("{comma}\"wattbar\":{}", self.json()).as_bytes());
        out.extend_from_slice(&bytes[close..]);
        Some(out)
    }

    /// `bytes` of an SSE stream with the receipt as a comment before `data: [DONE]` (with or
    /// without the space, as SSE allows), or at their end when the marker is not among them.
    pub fn into_sse(&self, bytes: &[u8]) -> Vec<u8> {
        let line = self.line.as_ref().map(|l| l.sse()).unwrap_or_default();
        let comment = format!("{line}: wattbar {}\n\n", self.json());
        let at = done_line(bytes);
        let mut out = Vec::with_capacity(bytes.len() + comment.len());
        match at {
            Some(i) => {
                out.extend_from_slice(&bytes[..i]);
                out.extend_from_slice(comment.as_bytes());
                out.extend_from_slice(&bytes[i..]);
            }
            None => {
                out.extend_from_slice(bytes);
                if !bytes.is_empty() && !bytes.ends_with(b"\n\n") {
                    out.extend_from_slice(if bytes.ends_with(b"\n") {
                        b"\n"
                    } else {
                        b"\n\n"
                    });
                }
                out.extend_from_slice(comment.as_bytes());
            }
        }
        out
    }
}

/// Where the line `data: [DONE]` starts in `bytes`, however the field is spaced.
fn done_line(bytes: &[u8]) -> Option<usize> {
    let mut start = 0;
    loop {
        let line = &bytes[start..];
        let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
        let is_done = line[..end]
            .strip_prefix(b"data:")
            .map(|value| value.trim_ascii() == b"[DONE]")
            .unwrap_or(false);
        if is_done {
            return Some(start);
        }
        if end == line.len() {
            return None;
        }
        start += end + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        Receipt {
            id: 7,
            energy_joules: Some(412.0),
            net_energy_joules: Some(380.5),
            energy_bound_joules: Some(2.5),
            net_energy_bound_joules: Some(4.0),
            joules_per_token: Some(1.9),
            covered: Some(1.0),
            quality: Some(Quality::Measured),
            error: None,
            line: None,
        }
    }

    #[test]
    fn ollamas_final_line_gets_the_receipt_as_its_last_field() {
        let frame = b"{\"model\":\"llama3\",\"response\":\"\",\"done\":false}\n{\"model\":\"llama3\",\"done\":true,\"eval_count\":71}\n";
        let out = receipt().into_object(frame).unwrap_or_default();
        let text = String::from_utf8(out).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "{\"model\":\"llama3\",\"response\":\"\",\"done\":false}"
        );
        let last: serde_json::Value = serde_json::from_str(lines[1]).unwrap_or_default();
        assert_eq!(last["eval_count"], 71);
        assert_eq!(last["wattbar"]["id"], 7);
        assert_eq!(last["wattbar"]["energy_joules"], 412.0);
        assert_eq!(last["wattbar"]["quality"], "measured");
        assert!(text.ends_with("}}\n"), "{text:?}");
    }

    #[test]
    fn an_empty_object_takes_no_comma_and_a_non_object_nothing() {
        let out = receipt().into_object(b"{ }").unwrap_or_default();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap_or_default();
        assert_eq!(v["wattbar"]["id"], 7);
        assert_eq!(receipt().into_object(b"[1, 2]\n"), None);
        assert_eq!(receipt().into_object(b""), None);
    }

    #[test]
    fn the_comment_goes_before_done_written_without_its_space_too() {
        let frame = b"data: {\"choices\":[]}\r\n\r\ndata:[DONE]\r\n\r\n";
        let text = String::from_utf8(receipt().into_sse(frame)).unwrap_or_default();
        assert!(text.ends_with("}\n\ndata:[DONE]\r\n\r\n"), "{text:?}");
        assert!(text.starts_with("data: {\"choices\":[]}\r\n\r\n: wattbar {"));
    }

    #[test]
    fn an_sse_stream_gets_a_comment_before_done() {
        let frame = b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n";
        let text = String::from_utf8(receipt().into_sse(frame)).unwrap_or_default();
        let comment = text
            .lines()
            .find_map(|l| l.strip_prefix(": wattbar "))
            .unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(comment).unwrap_or_default();
        assert_eq!(v["net_energy_joules"], 380.5);
        assert!(
            text.starts_with("data: {\"choices\":[]}\n\n: wattbar {"),
            "{text:?}"
        );
        assert!(text.ends_with("}\n\ndata: [DONE]\n\n"), "{text:?}");
        // Without the marker in this frame: after its last event.
        let text = String::from_utf8(receipt().into_sse(b"data: {}\n")).unwrap_or_default();
        assert!(text.starts_with("data: {}\n\n: wattbar {"), "{text:?}");
    }

    #[test]
    fn a_missing_record_says_why() {
        let v = serde_json::to_value(Receipt::missing(9, "not made in time".into()))
            .unwrap_or_default();
        assert_eq!(v["id"], 9);
        assert_eq!(v["energy_joules"], serde_json::Value::Null);
        assert_eq!(v["error"], "not made in time");
    }
}
