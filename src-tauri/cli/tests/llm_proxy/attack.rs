//! The inference proxy under attack and careless use, as `wattbar-cli serve --llm-proxy` runs:
//! crafted model names, web pages of other origins, an upstream that is the proxy itself, and
//! clients that close as soon as they have read an answer's end.

use crate::common::{cli, free_port, serve_with_proxy, Upstream};
use crate::common::{http, Answer};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const WATTS: f64 = 100.0;

/// `POST path` with `body` and these headers; the status and body, whatever the status.
fn post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut req = http().post(url).header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send(body).unwrap_or_else(|e| panic!("{url}: {e}"));
    (r.code(), r.text())
}

/// `promtool check metrics` on `text`: its complaints, empty when it passes.
fn promtool(text: &str) -> String {
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool is needed (scripts/setup installs it): {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.is_empty() {
        String::new()
    } else {
        format!("exit {:?}: {said}", out.status.code())
    }
}

/// A name of up to `max` characters drawn from quotes, backslashes, braces, line ends, NUL and
/// other control characters, non-ASCII letters and plain ones (xorshift64, so every run sends
/// the same names).
fn crafted_name(state: &mut u64, max: usize) -> String {
    const PARTS: [&str; 14] = [
        "\"",
        "\\",
        "\n",
        "\0",
        "\r",
        "\t",
        "}",
        "{",
        "=",
        ",",
        "é",
        "模型",
        "a",
        "llama3:8b",
    ];
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let len = 1 + (next() % max as u64) as usize;
    (0..len)
        .map(|_| PARTS[(next() % PARTS.len() as u64) as usize])
        .collect()
}

#[test]
fn crafted_model_names_through_the_proxy_and_the_api_never_break_the_scrape() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    let token = format!("Bearer {}", crate::common::api_token(dir.path()));
    let inference = format!("{}/v1/inference", serve.url);

    let mut names: Vec<String> = vec![
        "a\"b".into(),
        "a\\\"b\\".into(),
        "x\"} 1\nwattbar_forged_total 1e9\n#".into(),
        "m".repeat(10 * 1024),
        "nul\0name".into(),
    ];
    let mut state = 0x5eed_u64;
    names.extend((0..30).map(|_| crafted_name(&mut state, 12)));
    let mut kept = 0;
    let mut kept_by_api = 0;
    for name in &names {
        let valid = name.len() <= 256 && !name.chars().any(char::is_control);
        let body = serde_json::json!({"model": name, "prompt": "hi", "stream": false}).to_string();
        // A web page's simple cross-origin POST: refused before it reaches the model server.
        let (status, said) = post(
            &format!("{proxy}/api/generate"),
            &[
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            &body,
        );
        assert_eq!(status, 403, "{name:?}: {said}");
        let (status, said) = post(&format!("{proxy}/api/generate"), &[], &body);
        if valid {
            assert_eq!(status, 200, "{name:?}: {said}");
            kept += 1;
        } else {
            assert_eq!(status, 400, "{name:?}: {said}");
            assert!(said.contains("model name"), "{said}");
        }
        let posted = serde_json::json!({
            "model": name, "completion_tokens": 4, "tokens_per_second": 40.0
        })
        .to_string();
        let (status, said) = post(&inference, &[("Authorization", &token)], &posted);
        // The API trims the name it is given, as it always has.
        let trimmed = name.trim();
        let api_valid =
            !trimmed.is_empty() && trimmed.len() <= 256 && !trimmed.chars().any(char::is_control);
        let expected = if api_valid { 201 } else { 400 };
        kept_by_api += usize::from(api_valid);
        assert_eq!(status, expected, "{name:?}: {said}");
    }
    assert!(kept >= 5, "only {kept} valid names: the fuzz proves little");
    // Every refused page and name reached nothing: the upstream answered the valid ones alone.
    assert_eq!(upstream.stats()["requests"], kept);
    serve.records(kept + kept_by_api);

    let metrics = serve.text("/metrics");
    assert_eq!(promtool(&metrics), "", "\n{metrics}");
    assert!(
        metrics.contains("wattbar_inference_requests_total{model=\"a\\\"b\",status="),
        "{metrics}"
    );
    assert!(
        !metrics.contains("\nwattbar_forged_total"),
        "a name forged a series:\n{metrics}"
    );
    // The same names in the OpenMetrics exposition, as Prometheus asks for it.
    let om = http()
        .get(&format!("{}/metrics", serve.url))
        .header("Accept", "application/openmetrics-text;version=1.0.0")
        .call()
        .unwrap_or_else(|e| panic!("{e}"))
        .text();
    assert!(om.contains("model=\"a\\\\\\\"b\\\\\""), "{om}");
}

/// Sends `request` raw, reads the answer's body (chunked) until `ended` says the answer's end
/// has come, and closes at once, before the body's own end, as the Python `openai` client does.
fn read_to_end_marker(proxy: &str, request: &str, ended: impl Fn(&str) -> bool) -> String {
    let addr = proxy.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("{e}"));
    s.write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            n > 0,
            "the answer ended before its end marker: {}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((_, body)) = text.split_once("\r\n\r\n") {
            if ended(body) {
                return body.to_string();
            }
        }
    }
}

fn generation(proxy: &str, path: &str, body: &str) -> String {
    let host = proxy.trim_start_matches("http://");
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         x-replay-framing: hold-end\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn an_answer_whose_end_has_passed_is_complete_whoever_closes_first() {
    let upstream = Upstream::start(5);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    // The upstream holds each body's end back 1 s after the answer's end marker; each client
    // reads to the marker and closes.
    let ndjson = generation(
        &proxy,
        "/api/generate",
        r#"{"model":"llama3","prompt":"hi"}"#,
    );
    read_to_end_marker(&proxy, &ndjson, |b| b.contains("\"done\":true"));
    let sse = generation(
        &proxy,
        "/v1/chat/completions",
        r#"{"model":"gpt-oss","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    read_to_end_marker(&proxy, &sse, |b| b.contains("data: [DONE]"));
    let json = generation(
        &proxy,
        "/v1/chat/completions",
        r#"{"model":"qwen","stream":false,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    read_to_end_marker(&proxy, &json, |b| b.contains("\"usage\""));
    // One client goes away mid-answer: cancelled, with the tokens it was sent.
    let cancelled = generation(
        &proxy,
        "/v1/chat/completions",
        r#"{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    read_to_end_marker(&proxy, &cancelled, |b| {
        b.matches("\"reasoning_content\":\"").count() >= 3
    });

    let records = serve.records(4);
    let by = |model: &str| {
        records
            .iter()
            .find(|r| r["model"] == model)
            .cloned()
            .unwrap_or_else(|| panic!("no record for {model}: {records:?}"))
    };
    for model in ["llama3", "gpt-oss", "qwen"] {
        let r = by(model);
        assert_eq!(r["status"], "ok", "{r}");
        assert!(
            r["completion_tokens"].as_u64().is_some_and(|n| n > 0),
            "{r}"
        );
    }
    // The genuine llama3 stream's final line says 71 tokens.
    assert_eq!(by("llama3")["completion_tokens"], 71);
    let c = by("slow");
    assert_eq!(c["status"], "cancelled", "{c}");
    assert!(
        c["completion_tokens"].as_u64().is_some_and(|n| n >= 3),
        "{c}"
    );
    assert_eq!(c["tokens_source"], "counted", "{c}");
}

#[test]
fn an_upstream_that_is_the_proxy_itself_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let at = format!("127.0.0.1:{port}");
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,10\n").unwrap_or_else(|e| panic!("{e}"));
    // OLLAMA_HOST names the proxy (as the README tells clients to set it), with no upstream given.
    let mut child = cli(dir.path())
        .env("WATTBAR_REPLAY", &trace)
        .env("OLLAMA_HOST", &at)
        .args(["serve", "--listen", "127.0.0.1:0", "--llm-proxy", &at])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running with the proxy as its own upstream");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut said = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut said);
    }
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(said.contains("forward every request to itself"), "{said}");
    assert!(said.contains("--llm-upstream"), "{said}");
}

#[test]
fn a_record_id_given_before_a_kill_9_is_never_given_again() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let id_of = |proxy: &str| {
        // A slow stream: its id is given when it starts; the engine is killed while it runs.
        let answer = http()
            .post(&format!("{proxy}/api/generate"))
            .send(r#"{"model":"slow","prompt":"hi"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let id = answer
            .header_str("x-wattbar-request-id")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no request id"));
        (id, answer)
    };
    let (mut serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    // Still streaming when the engine is killed: its record is never made.
    let (first, streaming) = id_of(&proxy);
    serve.child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = serve.child.wait();
    drop((serve, streaming));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    let (second, _) = id_of(&proxy);
    assert!(second > first, "id {second} after {first}");
    drop(serve);
}

#[test]
fn request_bodies_held_at_once_are_bounded_and_the_next_is_told_to_wait() {
    const MIB: usize = 1024 * 1024;
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    let addr = proxy.trim_start_matches("http://").to_string();
    // Four clients each send 31 MiB of a 32 MiB generation body, then stall: 124 of the 128 MiB
    // the proxy holds at most.
    let stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
            let head = format!(
                "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                32 * MIB - 1
            );
            s.write_all(head.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
            s.write_all(&vec![b' '; 31 * MIB])
                .unwrap_or_else(|e| panic!("{e}"));
            s
        })
        .collect();
    let eight = format!(
        "{{\"model\":\"llama3\",\"prompt\":\"{}\"}}",
        "x".repeat(8 * MIB)
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, said) = send_while_reading(&addr, &eight);
        if status == 503 {
            assert!(said.contains("held already"), "{said}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "8 MiB more was held: {status} {said}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The stalled clients go: what they held is free again.
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, said) = send_while_reading(&addr, &eight);
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{said}");
        assert!(Instant::now() < deadline, "the held bytes were never freed");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(serve);
}

#[test]
fn uploads_that_promise_much_and_send_nothing_take_no_ones_place() {
    const MIB: usize = 1024 * 1024;
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    let addr = proxy.trim_start_matches("http://").to_string();
    // 513 clients (one more than the requests forwarded at once) each promise a 30 MiB body
    // and send none of it.
    let stalled: Vec<TcpStream> = (0..513)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{e}"));
            let head = format!(
                "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                30 * MIB
            );
            s.write_all(head.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
            s
        })
        .collect();
    // A normal request is forwarded and answered: nothing is held for bytes never sent.
    let (status, said) = send_while_reading(&addr, r#"{"model":"llama3","prompt":"hi"}"#);
    assert_eq!(status, 200, "{said}");
    // A stalled upload is told so once it has sent nothing for BODY_STALL (10 s).
    let mut first = stalled.into_iter().next().unwrap_or_else(|| panic!("none"));
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = [0u8; 512];
    let n = first.read(&mut answer).unwrap_or(0);
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    drop(serve);
}

/// POSTs `body` to `/api/generate` at `addr` from a thread of its own while reading the answer,
/// as a client sees an answer given before its body was all sent (the proxy then stops reading
/// it); the status and the answer's text.
fn send_while_reading(addr: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap_or_else(|e| panic!("{e}"));
    let request = format!(
        "POST /api/generate HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut writer = s.try_clone().unwrap_or_else(|e| panic!("{e}"));
    let sending = std::thread::spawn(move || {
        let _ = writer.write_all(request.as_bytes());
    });
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(str::to_string)
                })
                .and_then(|v| v.trim().parse::<usize>().ok());
            if length.is_some_and(|n| rest.len() >= n) {
                break;
            }
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
    let _ = sending.join();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no answer: {text:?}"));
    (status, text)
}

#[test]
fn an_answer_broken_off_under_a_receipt_still_names_its_record() {
    let upstream = Upstream::start(5);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    // A whole JSON answer is read first for its receipt; the server breaks it off halfway.
    let response = http()
        .post(&format!("{proxy}/v1/chat/completions"))
        .header("Content-Type", "application/json")
        .header("X-Wattbar-Receipt", "1")
        .header("x-replay-framing", "close-early")
        .send(r#"{"model":"qwen","stream":false,"messages":[]}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.code(), 502);
    let id = response
        .header_str("x-wattbar-request-id")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("the 502 names no record"));
    let record = serve.get(&format!("/v1/inference/{id}"));
    assert_eq!(record["status"], "error", "{record}");
    assert!(
        record["error"]
            .as_str()
            .is_some_and(|e| e.contains("broke off")),
        "{record}"
    );
}
