//! The proxy's bytes as `wattbar-cli serve --llm-proxy` passes them: a routed body reaches the
//! server as the client wrote it but for its model, a receipt finds a stream's end however it is
//! framed, and what the proxy reads whole is bounded with a clear answer past the bound.

use super::{assert_receipt_is_the_record, last_event, start_serve};
use crate::common::{http, Answer, Upstream};

/// `POST path` with `body` and these headers: the status, the record named and the body's bytes.
fn post(
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Option<String>, Vec<u8>) {
    let mut req = http()
        .post(&format!("{base}{path}"))
        .header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let answer = req.send(body).unwrap_or_else(|e| panic!("{e}"));
    let code = answer.code();
    let id = answer
        .header_str("x-wattbar-request-id")
        .map(str::to_string);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut answer.reader(), &mut bytes).unwrap_or_else(|e| panic!("{e}"));
    (code, id, bytes)
}

#[test]
fn a_routed_body_reaches_the_server_as_the_client_wrote_it_but_for_the_model() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"low_power_action": "route", "low_power_model": "gemma3:1b",
            "low_power_auto": false}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    crate::common::switch_low_power(dir.path(), &serve, "on");

    // Decoded and encoded again, this body would have its keys sorted, `1.0` written `1`, the
    // seed rounded to a float, and `1e400` refused (past f64): the proxy changes only the model.
    let sent = "{\"temperature\": 1.0,\n  \"model\" : \"llama3\", \"stream\": false,\
                \"options\": {\"seed\": 12345678901234567890123, \"mirostat_tau\": 1e400},\
                \"prompt\": \"x\"}";
    let (code, _, _) = post(&proxy, "/api/generate", &[], sent);
    assert_eq!(code, 200);
    let bodies = upstream.stats()["bodies"].clone();
    let got = bodies[bodies.as_array().map_or(0, Vec::len) - 1]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(got, sent.replace("\"llama3\"", "\"gemma3:1b\""));
}

/// The receipt's comment line just before the stream's `[DONE]` line, read.
fn receipt_before_done(text: &str) -> serde_json::Value {
    let lines: Vec<&str> = text.lines().collect();
    let done = lines
        .iter()
        .position(|l| l.starts_with("data:") && l["data:".len()..].trim() == "[DONE]")
        .unwrap_or_else(|| panic!("no [DONE]: {text}"));
    let comment = lines[..done]
        .iter()
        .rev()
        .find(|l| !l.is_empty())
        .and_then(|l| l.strip_prefix(": wattbar "))
        .unwrap_or_else(|| panic!("no receipt before [DONE]: {text}"));
    serde_json::from_str(comment).unwrap_or_else(|e| panic!("{e}: {comment}"))
}

#[test]
fn a_receipt_goes_before_done_split_across_frames_or_written_without_its_space() {
    let upstream = Upstream::start(20);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let body = r#"{"model": "openai/gpt-oss-20b", "messages": [], "stream": true}"#;
    for (header, value) in [
        ("x-replay-framing", "split-done"),
        ("x-replay-done", "no-space"),
    ] {
        let (code, id, bytes) = post(
            &proxy,
            "/v1/chat/completions",
            &[("X-Wattbar-Receipt", "1"), (header, value)],
            body,
        );
        assert_eq!(code, 200);
        let text = String::from_utf8(bytes).unwrap_or_default();
        let receipt = receipt_before_done(&text);
        assert_eq!(Some(receipt["id"].to_string()), id, "{value}");
        assert_receipt_is_the_record(&serve, &receipt);
    }
}

#[test]
fn an_answer_too_large_to_read_whole_for_its_receipt_is_a_clear_502_naming_its_record() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let body = r#"{"model": "gemma3:1b", "messages": [], "stream": false}"#;

    // 40 MiB of answer, over the 32 MiB read whole: refused, and said why.
    let padded = [("x-replay-pad-mb", "40")];
    let asked = [("x-replay-pad-mb", "40"), ("X-Wattbar-Receipt", "1")];
    let (code, id, bytes) = post(&proxy, "/api/chat", &asked, body);
    assert_eq!(code, 502);
    let said: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let error = said["error"].as_str().unwrap_or_default();
    assert!(error.contains("over 32 MiB"), "{said}");
    let id = id.unwrap_or_else(|| panic!("no record named"));
    let record = serve.get(&format!("/v1/inference/{id}"));
    assert_eq!(record["status"], "error", "{record}");

    // Without a receipt it streams through whole.
    let (code, _, bytes) = post(&proxy, "/api/chat", &padded, body);
    assert_eq!(code, 200);
    assert!(bytes.len() > 40 << 20, "{} bytes", bytes.len());
}

#[test]
fn a_model_list_too_large_to_be_one_is_refused_and_said() {
    let upstream = Upstream::start_with(0, &["--ps-pad-mb", "2"]);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"unload_idle_models_in_low_power": true, "low_power_auto": false}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, _proxy) = start_serve(dir.path(), &upstream.url);
    crate::common::switch_low_power(dir.path(), &serve, "on");
    let said = last_event(&serve, "1024 KiB");
    assert!(said.contains("GET /api/ps"), "{said}");
    let unloads = upstream.stats()["asked"].as_array().map_or(0, Vec::len);
    assert_eq!(unloads, 0, "nothing unloaded on an answer not read");
}
