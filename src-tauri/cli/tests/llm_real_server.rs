//! The inference proxy in front of a real model server: llama.cpp's own `llama-server`
//! (`scripts/llm-server`, installed by `scripts/setup`) serving SmolLM2-135M-Instruct on this
//! machine's CPU, driven through `wattbar-cli serve --llm-proxy` by the official `openai` client
//! (`tests/llm/real.mjs`). With a replayed constant 50 W each answer's energy is 50 W × its own
//! window; once more on this machine's own sources.

use crate::common::model_server::{python, ModelServer};
use crate::common::{cli, node_json, repo_root, serve_with_proxy, Serve};

use std::process::Command;
use std::time::{Duration, Instant};

const WATTS: f64 = 50.0;

/// Runs a scenario of `tests/llm/real.mjs` against `base`; its one line of JSON.
fn real(scenario: &str, base: &str) -> serde_json::Value {
    node_json("real.mjs", &[scenario, base])
}

/// A scenario asking for `model`.
fn real_for(scenario: &str, base: &str, model: &str) -> serde_json::Value {
    node_json("real.mjs", &[scenario, base, model])
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The records made since `seen`, oldest first, once there are `n` of them.
fn new_records(serve: &Serve, seen: usize, n: usize) -> Vec<serde_json::Value> {
    let mut all = serve.records(seen + n);
    all.sort_by_key(|r| r["id"].as_u64());
    all.split_off(seen)
}

fn assert_energy_is_the_draw_over_the_window(r: &serde_json::Value) {
    let expected = WATTS * f(&r["wall_seconds"]);
    let got = f(&r["energy_joules"]);
    assert!(
        (got - expected).abs() <= 0.02 * expected,
        "{got} J for {expected} J: {r}"
    );
    assert_eq!(r["covered"], 1.0, "{r}");
    assert_eq!(r["partial"], false, "{r}");
    // A steady draw varies nowhere, so the bound is the source's allowance alone.
    assert!(f(&r["energy_bound_joules"]) >= 0.0, "{r}");
}

#[test]
fn every_answer_of_a_real_server_is_recorded_right() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &server.url, WATTS, &[]);

    // llama.cpp reuses the prompt it holds from the last request: an answer computed on a cached
    // prompt (its last token alone) can differ from one computed afresh (the whole prompt at
    // once: other kernels, other rounding), as this machine's build does at temperature 0. So
    // the answers compared are all made on the chat's prompt cached: a first chat caches it.
    let _cold = real("chat", &proxy);
    // Not streamed: the server's usage, exactly.
    let chat = real("chat", &proxy);

    // Streamed, the same prompt at temperature 0: the same text. The proxy asks the server for
    // its usage either way: a client that did not ask gets no usage chunk, one that asked gets
    // the server's, and both records hold the server's count.
    let expected = chat["usage"]["completion_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("{chat}"));
    for (scenario, usage_chunks) in [("chat-stream", 0), ("chat-stream-usage", 1)] {
        let s = real(scenario, &proxy);
        assert_eq!(s["text"], chat["content"], "{scenario}");
        assert_eq!(s["usage_chunks"], usage_chunks, "{scenario}: {s}");
        if usage_chunks == 1 {
            assert_eq!(s["usage"]["completion_tokens"], expected, "{s}");
        }
    }
    let r = new_records(&serve, 2, 2);
    for record in &r {
        assert_eq!(record["status"], "ok", "{record}");
        assert_eq!(record["tokens_source"], "server", "{record}");
        assert_eq!(record["completion_tokens"], expected, "{record}");
        assert!(record["ttft_seconds"].is_number());
        assert_energy_is_the_draw_over_the_window(record);
    }

    let completions = real("completions", &proxy);
    let r = new_records(&serve, 0, 5);
    for (record, answer, route) in [
        (&r[1], &chat, "/v1/chat/completions"),
        (&r[4], &completions, "/v1/completions"),
    ] {
        assert_eq!(record["route"], route);
        assert_eq!(record["status"], "ok", "{record}");
        assert_eq!(record["model"], "smollm2");
        assert_eq!(record["tokens_source"], "server");
        assert_eq!(
            record["completion_tokens"], answer["usage"]["completion_tokens"],
            "{record}"
        );
        assert_eq!(record["prompt_tokens"], answer["usage"]["prompt_tokens"]);
        assert_energy_is_the_draw_over_the_window(record);
        assert!(record["score"].is_number(), "{record}");
    }

    // Four at once: each ok, and together the draw over the union of their windows.
    let c = real("concurrent", &proxy);
    assert_eq!(c["answers"].as_array().map(Vec::len), Some(4));
    let r = new_records(&serve, 5, 4);
    assert!(r.iter().all(|x| x["status"] == "ok"), "{r:?}");
    let start = r
        .iter()
        .map(|x| f(&x["start"]))
        .fold(f64::INFINITY, f64::min);
    let end = r.iter().map(|x| f(&x["end"])).fold(0.0, f64::max);
    let sum: f64 = r.iter().map(|x| f(&x["energy_joules"])).sum();
    let union = WATTS * (end - start);
    assert!((sum - union).abs() <= 0.02 * union, "{sum} J for {union} J");

    // A client that leaves mid-stream: cancelled.
    assert_eq!(real("abort", &proxy)["aborted"], true);
    // The server's own error, unchanged to the client, recorded as an error with its message.
    let too_long = real("too-long", &proxy);
    assert_eq!(too_long["status"], 400);
    let r = new_records(&serve, 9, 2);
    assert_eq!(r[0]["status"], "cancelled", "{}", r[0]);
    assert_eq!(r[1]["status"], "error", "{}", r[1]);
    let message = too_long["error"].as_str().unwrap_or_default();
    let recorded = r[1]["error"].as_str().unwrap_or_default();
    assert!(
        recorded.contains("exceeds the available context size") && message.contains(recorded),
        "{recorded:?} recorded, {message:?} answered"
    );
    assert_eq!(r[1]["score"], serde_json::Value::Null);

    // Routes that generate nothing pass untouched and make no record.
    assert_eq!(
        real("models", &proxy)["ids"],
        serde_json::json!(["smollm2"])
    );
    let direct = real("embeddings", &server.url);
    assert_eq!(real("embeddings", &proxy), direct);
    assert_eq!(serve.records(11).len(), 11);
    // The model's figures come from the complete, fully measured answers only.
    let models = serve.get("/v1/models");
    let m = &models["models"][0];
    assert_eq!(m["model"], "smollm2");
    assert_eq!(m["requests"], 11);
    assert_eq!(m["requests_by_status"]["cancelled"], 1);
    assert_eq!(m["requests_by_status"]["error"], 1);
    assert!(m["joules_per_token"].is_number(), "{m}");
}

#[test]
fn a_real_answer_on_this_machines_own_sources_is_measured() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(dir.path());
    c.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--llm-proxy",
        "127.0.0.1:0",
        "--llm-upstream",
        &server.url,
    ]);
    let serve = Serve::spawn(c);
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.get("/v1/snapshot")["watts"].is_null() {
        assert!(Instant::now() < deadline, "this machine gives no watts");
        std::thread::sleep(Duration::from_millis(50));
    }
    let chat = real("chat", &serve.proxy());
    let r = serve.records(1);
    assert_eq!(r[0]["status"], "ok", "{}", r[0]);
    assert_eq!(
        r[0]["completion_tokens"],
        chat["usage"]["completion_tokens"]
    );
    // Whatever this machine measures or estimates, the answer has an energy and says how good.
    assert!(f(&r[0]["energy_joules"]) > 0.0, "{}", r[0]);
    assert!(r[0]["quality"].is_string(), "{}", r[0]);
    assert!(f(&r[0]["covered"]) > 0.0, "{}", r[0]);
    // Its bound is at least the allowance for its quality.
    let allowance = match r[0]["quality"].as_str() {
        Some("measured") => 0.0,
        Some("estimated") => 0.25,
        _ => 0.5,
    };
    assert!(
        f(&r[0]["energy_bound_joules"]) >= allowance * f(&r[0]["energy_joules"]) - 1e-9,
        "{}",
        r[0]
    );
}

#[test]
fn low_power_routing_sends_a_real_request_to_the_small_model_and_says_so() {
    // One model file under two names, in llama.cpp's router mode: each answer names the model
    // that made it.
    let server = ModelServer::serving(&["big", "small"]);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"low_power_action": "route", "low_power_model": "small",
            "low_power_max_tokens": 8, "low_power_auto": false,
            "unload_idle_models_in_low_power": true}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &server.url, WATTS, &[]);
    let completion_tokens = |a: &serde_json::Value| {
        a["usage"]["completion_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("no usage: {a}"))
    };

    // Low-power mode off: nothing changes.
    let off = real_for("routed", &proxy, "big");
    assert_eq!(off["routed"], serde_json::Value::Null, "{off}");
    assert_eq!(off["model"], "big");
    assert!(completion_tokens(&off) > 8, "{off}");

    crate::common::switch_low_power(dir.path(), &serve, "on");
    assert_eq!(serve.get("/v1/low-power")["enabled"], true);
    // llama.cpp's server cannot list or unload its models: said so, nothing sent.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = serve.get("/v1/low-power");
        if let Some(said) = view["last_event"].as_str().filter(|s| s.contains("unload")) {
            assert!(
                said.starts_with("Low-power mode could not unload models"),
                "{said}"
            );
            assert!(said.contains("has no /api/ps"), "{said}");
            break;
        }
        assert!(Instant::now() < deadline, "no word on unloading: {view}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // On: the small model answers, capped at 8 tokens, and the client is told.
    let on = real_for("routed", &proxy, "big");
    assert_eq!(on["routed"], "big -> small; max_tokens 32 -> 8", "{on}");
    assert_eq!(on["model"], "small");
    assert!(completion_tokens(&on) <= 8, "{on}");
    // Asked not to: left alone, mode on or not.
    let kept = real_for("routed-off", &proxy, "big");
    assert_eq!(kept["routed"], serde_json::Value::Null, "{kept}");
    assert_eq!(kept["model"], "big");
    // A stream is routed the same way.
    let stream = real_for("routed-stream", &proxy, "big");
    assert_eq!(
        stream["routed"], "big -> small; max_tokens 32 -> 8",
        "{stream}"
    );
    assert_eq!(stream["model"], "small");

    let r = new_records(&serve, 0, 4);
    assert_eq!(
        crate::common::served_and_asked(&r),
        vec![
            ("big", None),
            ("small", Some("big")),
            ("big", None),
            ("small", Some("big")),
        ]
    );
    assert!(r.iter().all(|x| x["status"] == "ok"), "{r:?}");
    assert_eq!(r[1]["completion_tokens"], on["usage"]["completion_tokens"]);
    assert_energy_is_the_draw_over_the_window(&r[1]);
    // Each answer named its record, which the API gives whole.
    for (answer, record) in [(&off, &r[0]), (&on, &r[1]), (&kept, &r[2])] {
        let id = answer["request_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"));
        assert_eq!(id, record["id"].to_string(), "{answer}");
        assert_eq!(&serve.get(&format!("/v1/inference/{id}")), record);
    }
    // A client that asks gets the record's figures in the answer itself.
    let with = crate::common::node_json_with(
        "real.mjs",
        &["routed", &proxy, "small"],
        &[("WATTBAR_RECEIPT", "1")],
    );
    let receipt = &with["wattbar"];
    assert_eq!(
        receipt["id"].to_string(),
        with["request_id"].as_str().unwrap_or_default()
    );
    let record = serve.get(&format!("/v1/inference/{}", receipt["id"]));
    for field in [
        "energy_joules",
        "net_energy_joules",
        "energy_bound_joules",
        "joules_per_token",
    ] {
        let (a, b) = (receipt[field].as_f64(), record[field].as_f64());
        assert_eq!(a, b, "{field}: {receipt} vs {record}");
    }
    assert!(
        receipt["energy_joules"].as_f64().is_some_and(|j| j > 0.0),
        "{receipt}"
    );
    assert_eq!(receipt["quality"], record["quality"]);
    assert_eq!(receipt["covered"].as_f64(), record["covered"].as_f64());
    // /v1/low-power counts the two routed requests and the energy they used.
    let routed = &serve.get("/v1/low-power")["routed"];
    assert_eq!(routed["requests"], 2, "{routed}");
    assert_eq!(routed["unmeasured"], 0, "{routed}");
    let used = f(&r[1]["energy_joules"]) + f(&r[3]["energy_joules"]);
    assert!(
        (f(&routed["energy_joules"]) - used).abs() < 1e-6,
        "{routed}"
    );
}

#[test]
fn the_model_server_is_found_among_the_programs_and_named_with_its_model() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A replayed CPU domain, shared among this machine's real processes.
    let serve = Serve::start(
        dir.path(),
        "t,watts,domain\n0,60,cpu\n",
        &["--llm-proxy", "127.0.0.1:0", "--llm-upstream", &server.url],
    );
    // The process listening on the upstream's port names the program: its command name.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", server.child.id()))
        .unwrap_or_else(|e| panic!("{e}"));
    let name = comm.trim();
    let base = serve.proxy();
    // Answers make the server work, so that it draws a share of the CPU domain; reads come
    // every 10 s.
    let deadline = Instant::now() + Duration::from_secs(90);
    let found = loop {
        let _ = real("chat", &base);
        let v = serve.get("/v1/processes?limit=1000");
        let found = v["programs"].as_array().and_then(|a| {
            a.iter()
                .find(|p| p["program"] == name && f(&p["joules"]) > 0.0)
                .cloned()
        });
        if let Some(p) = found.filter(|p| !p["serving"].is_null()) {
            break p;
        }
        assert!(Instant::now() < deadline, "{v}");
    };
    assert_eq!(found["serving"], serde_json::json!(["smollm2"]), "{found}");
    assert_eq!(found["quality"], "measured", "{found}");
}

/// Runs `tests/llm/real.py` (the official Python `openai` client, from the model server's
/// virtual environment) for `count` streams against `base`; its one line of JSON.
fn python_streams(base: &str, count: usize) -> serde_json::Value {
    let python = python();
    let out = Command::new(&python)
        .arg(repo_root().join("tests/llm/real.py"))
        .args([base, &count.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        out.status.success(),
        "real.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("real.py: {e}"))
}

#[test]
fn every_complete_stream_of_the_official_clients_is_recorded_ok() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = serve_with_proxy(dir.path(), &server.url, WATTS, &[]);
    // Python's client leaves its `with` block as soon as it has read `data: [DONE]`, often
    // before the chunked body's terminator has come: each answer is whole all the same.
    const PYTHON: usize = 50;
    const NODE: usize = 4;
    let got = python_streams(&proxy, PYTHON);
    assert_eq!(got["streams"], PYTHON);
    for _ in 0..NODE {
        real("chat-stream", &proxy);
    }
    let records = new_records(&serve, 0, PYTHON + NODE);
    let chunks = got["content_chunks"]
        .as_array()
        .unwrap_or_else(|| panic!("{got}"));
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r["status"], "ok", "stream {i}: {r}");
        let counted = r["completion_tokens"].as_u64().unwrap_or_default();
        assert!(counted > 0, "stream {i}: {r}");
        if let Some(sent) = chunks.get(i).and_then(serde_json::Value::as_u64) {
            // Each of the client's content chunks is one the proxy counted.
            assert_eq!(counted, sent, "stream {i}: {r}");
        }
    }
}
