//! Every way a model server frames its answer ends the request's record right, through
//! `wattbar-cli serve --llm-proxy`: each genuine capture in `tests/fixtures/llm` replayed by
//! `tests/llm/upstream.mjs` in chunks and under a `Content-Length`, one after another on one kept
//! client connection; answers the server breaks off; and the proxy's own guard. The machine draws
//! a replayed constant 100 W, so each request's energy is 100 W × its own window.

use crate::common::{cli, http, serve_with_proxy, Answer, Upstream};

use std::io::Read;

const WATTS: f64 = 100.0;
const PACE_MS: u64 = 10;

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A request: route, body, and the completion tokens and their source the record must have.
struct Case {
    path: &'static str,
    body: &'static str,
    tokens: u64,
    source: &'static str,
}

/// Each capture (SOURCES.md gives its counts), by the route and model the upstream serves it for.
const CASES: [Case; 10] = [
    Case {
        path: "/api/generate",
        body: r#"{"model":"llama3","prompt":"Tell me a joke"}"#,
        tokens: 71,
        source: "server",
    },
    Case {
        path: "/api/generate",
        body: r#"{"model":"gemma3:1b","prompt":"Count to five"}"#,
        tokens: 22,
        source: "server",
    },
    Case {
        path: "/api/generate",
        body: r#"{"model":"llama3","prompt":"Tell me a joke","stream":false}"#,
        tokens: 71,
        source: "server",
    },
    Case {
        path: "/api/chat",
        body: r#"{"model":"llama3","messages":[{"role":"user","content":"hi"}]}"#,
        tokens: 50,
        source: "server",
    },
    Case {
        path: "/api/chat",
        body: r#"{"model":"gemma3:1b","messages":[],"stream":false}"#,
        tokens: 104,
        source: "server",
    },
    // The proxy asks this stream for its usage (the client did not) and gets llama.cpp's.
    Case {
        path: "/v1/chat/completions",
        body: r#"{"model":"openai/gpt-oss-20b","messages":[],"stream":true}"#,
        tokens: 57,
        source: "server",
    },
    // Ollama's streams that carry no usage: "Atlantic", " Sea", "." are 3 content chunks.
    Case {
        path: "/v1/chat/completions",
        body: r#"{"model":"qwen2.5:0.5b","messages":[],"stream":true}"#,
        tokens: 3,
        source: "counted",
    },
    Case {
        path: "/v1/chat/completions",
        body: r#"{"model":"llama3.1","messages":[],"stream":true,"stream_options":{"include_usage":true}}"#,
        tokens: 22,
        source: "counted",
    },
    Case {
        path: "/v1/chat/completions",
        body: r#"{"model":"openai/gpt-oss-20b","messages":[]}"#,
        tokens: 47,
        source: "server",
    },
    Case {
        path: "/v1/chat/completions",
        body: r#"{"model":"llama3.2","messages":[]}"#,
        tokens: 10,
        source: "server",
    },
];

fn post(agent: &ureq::Agent, url: &str, framing: &str, body: &str) -> (u16, String) {
    let response = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header("x-replay-framing", framing)
        .send(body)
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    (response.code(), response.text())
}

#[test]
fn every_capture_ends_ok_in_chunks_or_under_a_content_length_on_a_kept_connection() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    // One agent: every request after the first reuses the kept connection.
    let agent = http();
    let mut sent = 0;
    for framing in ["chunked", "length"] {
        for case in &CASES {
            let (status, text) = post(&agent, &format!("{proxy}{}", case.path), framing, case.body);
            assert_eq!(status, 200, "{} {framing}: {text}", case.body);
            let asked_usage = case.body.contains("include_usage");
            if case.body.contains(r#""stream":true"#) && !asked_usage {
                // The usage the proxy asked for is not passed to a client that did not ask.
                assert!(!text.contains(r#""choices":[]"#), "{}: {text}", case.body);
                assert!(text.contains("data: [DONE]"), "{text}");
            }
            sent += 1;
        }
    }
    let mut records = serve.records(sent);
    records.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(records.len(), sent);
    for (record, case) in records.iter().zip(CASES.iter().chain(CASES.iter())) {
        let what = format!("{} {}: {record}", case.path, case.body);
        assert_eq!(record["route"], case.path, "{what}");
        assert_eq!(record["status"], "ok", "{what}");
        assert_eq!(record["completion_tokens"], case.tokens, "{what}");
        assert_eq!(record["tokens_source"], case.source, "{what}");
        assert_eq!(record["covered"], 1.0, "{what}");
        assert_eq!(record["partial"], false, "{what}");
        let expected = WATTS * f(&record["wall_seconds"]);
        let got = f(&record["energy_joules"]);
        assert!(
            (got - expected).abs() <= 0.02 * expected + 1e-9,
            "{got} J for {expected} J: {what}"
        );
    }
}

#[test]
fn an_answer_the_server_breaks_off_is_an_error_that_says_so() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    for case in [&CASES[0], &CASES[4], &CASES[5]] {
        let answer = http()
            .post(&format!("{proxy}{}", case.path))
            .header("x-replay-framing", "close-early")
            .send(case.body);
        // The client sees the answer end short: an error while reading it, at the latest.
        if let Ok(response) = answer {
            let mut text = String::new();
            assert!(
                response.reader().read_to_string(&mut text).is_err(),
                "{}: the client read a whole answer: {text}",
                case.body
            );
        }
    }
    let records = serve.records(3);
    for r in &records {
        assert_eq!(r["status"], "error", "{r}");
        assert!(
            r["error"]
                .as_str()
                .is_some_and(|e| e.contains("broke off the answer")),
            "{r}"
        );
        assert_eq!(r["score"], serde_json::Value::Null, "{r}");
    }
}

#[test]
fn the_proxy_answers_only_to_its_own_names_and_passes_the_origin_on() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &upstream.url, WATTS, &[]);
    let before = upstream.stats()["requests"].as_u64();
    // A page that rebound its own name to 127.0.0.1 names itself in Host.
    let rebound = http()
        .post(&format!("{proxy}/api/generate"))
        .header("Host", "attacker.example")
        .send(CASES[0].body)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rebound.code(), 421, "a foreign Host was answered");
    assert_eq!(upstream.stats()["requests"].as_u64(), before);
    assert!(serve.get("/v1/inference")["records"]
        .as_array()
        .is_some_and(Vec::is_empty));
    // Its own names pass, and the client's Origin reaches the model server for its own check.
    let echoed = http()
        .post(&format!("{proxy}/echo"))
        .header("Origin", "http://localhost:3000")
        .send("{}")
        .unwrap_or_else(|e| panic!("{e}"))
        .json();
    assert_eq!(echoed["headers"]["origin"], "http://localhost:3000");
    let port = proxy.rsplit(':').next().unwrap_or_default();
    let named = http()
        .get(&format!("{proxy}/api/tags"))
        .header("Host", format!("localhost:{port}"))
        .call()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(named.code(), 200);
}

#[test]
fn the_proxy_listens_beyond_loopback_only_when_told() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--llm-proxy",
            "0.0.0.0:0",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("--allow-remote"),
        "{err}"
    );
}
