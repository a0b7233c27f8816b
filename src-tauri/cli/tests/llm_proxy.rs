//! `wattbar-cli serve --llm-proxy` as a user runs it: the official `ollama` and `openai` JavaScript
//! clients talk to the proxy, which forwards to an upstream serving genuine captured responses
//! (`tests/llm/upstream.mjs` over `tests/fixtures/llm/`), paced chunk by chunk. The machine draws a
//! replayed constant 100 W, so a request's energy is 100 W × its own window: the hand-worked
//! figure each record is checked against.

mod attack;
mod bytes;
use crate::common::{
    free_port, http, node_json, node_json_with, serve_with_proxy, Answer, Serve, Upstream,
};

use std::time::{Duration, Instant};

/// Milliseconds between chunks the upstream sends.
const PACE_MS: u64 = 20;
const WATTS: f64 = 100.0;

/// `serve` with the proxy in front of `upstream`, on a constant replayed draw.
fn start_serve(dir: &std::path::Path, upstream: &str) -> (Serve, String) {
    serve_with_proxy(dir, upstream, WATTS, &[])
}

/// Runs a client scenario; its one line of JSON.
fn client(scenario: &str, proxy: &str) -> serde_json::Value {
    node_json("clients.mjs", &[scenario, proxy])
}

fn records(serve: &Serve, n: usize) -> Vec<serde_json::Value> {
    serve.records(n)
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn assert_energy_is_the_draw_over_the_window(r: &serde_json::Value) {
    let expected = WATTS * f(&r["wall_seconds"]);
    let got = f(&r["energy_joules"]);
    assert!(
        (got - expected).abs() <= 0.02 * expected,
        "{}: {got} J for {expected} J",
        r["model"]
    );
    let phases = f(&r["prefill_joules"]) + f(&r["decode_joules"]);
    assert!((phases - got).abs() < 1e-6 * got.max(1.0), "{r}");
    assert_eq!(r["quality"], "measured");
    assert_eq!(r["sources"], serde_json::json!(["replay"]));
}

#[test]
fn the_official_clients_get_their_answers_and_each_request_its_energy() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);

    // Ollama's client, streamed: the genuine 71 lines of llama3, paced 20 ms apart.
    let g = client("ollama-generate-stream", &proxy);
    assert_eq!(
        (g["eval_count"].as_u64(), g["chunks"].as_u64()),
        (Some(71), Some(71))
    );
    // OpenAI's client, streamed with usage: llama.cpp's 51 events.
    let o = client("openai-chat-stream", &proxy);
    assert_eq!(o["text"], "Olá!");
    assert_eq!(o["usage"]["completion_tokens"], 57);
    // Ollama, one JSON body.
    let c = client("ollama-chat", &proxy);
    assert_eq!(c["eval_count"], 104);

    let r = records(&serve, 3);
    let by = |model: &str| {
        r.iter()
            .find(|x| x["model"] == model)
            .unwrap_or_else(|| panic!("no record for {model}"))
            .clone()
    };
    let gen = by("llama3");
    assert_eq!(gen["route"], "/api/generate");
    assert_eq!(gen["status"], "ok");
    assert_eq!(
        (
            gen["prompt_tokens"].as_u64(),
            gen["completion_tokens"].as_u64()
        ),
        (Some(17), Some(71))
    );
    // eval_duration 2 252 182 000 ns; 71 / 2.252182 s = 31.525 tokens/s (the server's rate).
    assert!((f(&gen["decode_seconds"]) - 2.252182).abs() < 1e-9);
    assert!((f(&gen["tokens_per_second"]) - 31.524983).abs() < 1e-5);
    // 70 pauses of 20 ms between the 71 lines: the window is at least 1.4 s.
    assert!(
        f(&gen["wall_seconds"]) >= 70.0 * PACE_MS as f64 / 1000.0,
        "{gen}"
    );
    assert!(f(&gen["ttft_seconds"]) < f(&gen["wall_seconds"]));
    assert_energy_is_the_draw_over_the_window(&gen);
    let jpt = f(&gen["energy_joules"]) / 71.0;
    assert!((f(&gen["joules_per_token"]) - jpt).abs() < 1e-9);

    let chat = by("openai/gpt-oss-20b");
    assert_eq!(chat["route"], "/v1/chat/completions");
    assert_eq!(
        (
            chat["prompt_tokens"].as_u64(),
            chat["completion_tokens"].as_u64()
        ),
        (Some(84), Some(57))
    );
    assert!((f(&chat["tokens_per_second"]) - 117.76616185616).abs() < 1e-9);
    assert!(
        f(&chat["wall_seconds"]) >= 50.0 * PACE_MS as f64 / 1000.0,
        "{chat}"
    );
    assert_energy_is_the_draw_over_the_window(&chat);

    let body = by("gemma3:1b");
    assert_eq!(body["ttft_seconds"], serde_json::Value::Null);
    assert_eq!(body["completion_tokens"], 104);

    // Per model, and in /metrics, once the engine has published the state it stored the
    // records with.
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.get("/v1/models")["models"].as_array().map(Vec::len) != Some(3) {
        assert!(Instant::now() < deadline, "{}", serve.get("/v1/models"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let metrics = serve.text("/metrics");
    assert!(
        metrics.contains(
            "wattbar_inference_tokens_total{model=\"llama3\",kind=\"completion\",scope=\"system\"} 71"
        ),
        "{metrics}"
    );
    assert!(metrics.contains(
        "wattbar_inference_requests_total{model=\"llama3\",status=\"ok\",scope=\"system\"} 1"
    ));
    // The advice now has a score, beside its raw figure.
    let lp = serve.get("/v1/low-power");
    assert!(
        lp["score"].is_number() && lp["tokens_per_second_per_watt"].is_number(),
        "{lp}"
    );
    // Routers that read a file get the same JSON.
    let file = std::fs::read_to_string(dir.path().join("low-power.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let from_file: serde_json::Value =
        serde_json::from_str(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(from_file, lp);
    // Ollama would have refused any Host but a loopback one.
    let hosts = upstream.stats()["hosts"].clone();
    assert!(
        hosts.as_array().is_some_and(|h| h
            .iter()
            .all(|h| h.as_str().is_some_and(|h| h.starts_with("127.0.0.1")))),
        "{hosts}"
    );
}

#[test]
fn overlapping_requests_add_up_to_the_energy_of_their_union() {
    // Paced slowly enough (50 chunks × 60 ms = 3 s) that b, started once the model server has
    // a's request, overlaps it by seconds however slowly b's client starts.
    let upstream = Upstream::start(3 * PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let a = {
        let proxy = proxy.clone();
        std::thread::spawn(move || client("ollama-generate-stream", &proxy))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while upstream.stats()["requests"].as_u64().unwrap_or(0) < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "a never reached the model server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = client("ollama-chat-stream", &proxy);
    let _ = a.join();
    assert_eq!(b["eval_count"], 50);
    let r = records(&serve, 2);
    let start = r
        .iter()
        .map(|x| f(&x["start"]))
        .fold(f64::INFINITY, f64::min);
    let end = r.iter().map(|x| f(&x["end"])).fold(0.0, f64::max);
    let overlap = r.iter().map(|x| f(&x["end"])).fold(f64::INFINITY, f64::min)
        - r.iter().map(|x| f(&x["start"])).fold(0.0, f64::max);
    assert!(overlap > 0.5, "the requests did not overlap: {overlap} s");
    let sum: f64 = r.iter().map(|x| f(&x["energy_joules"])).sum();
    let union = WATTS * (end - start);
    assert!((sum - union).abs() <= 0.02 * union, "{sum} J for {union} J");
    // Each window alone would have counted the overlap twice.
    assert!(
        sum < WATTS * r.iter().map(|x| f(&x["wall_seconds"])).sum::<f64>() - 0.9 * WATTS * overlap
    );
}

#[test]
fn cancels_errors_cloud_models_and_a_missing_upstream_are_told_apart() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);

    assert_eq!(client("ollama-cancel", &proxy)["aborted"], true);
    let e = client("ollama-error-after-200", &proxy);
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|m| m.contains("unexpected EOF")),
        "{e}"
    );
    client("cloud", &proxy);
    let r = records(&serve, 3);
    let by = |model: &str| {
        r.iter()
            .find(|x| x["model"] == model)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(by("slow")["status"], "cancelled");
    assert_eq!(by("slow")["error"], serde_json::Value::Null);
    let err = by("error-after-200");
    assert_eq!(err["status"], "error");
    assert!(err["error"]
        .as_str()
        .is_some_and(|m| m.contains("unexpected EOF")));
    let cloud = by("gpt-oss:120b-cloud");
    assert_eq!(cloud["status"], "remote");
    assert_eq!(cloud["energy_joules"], serde_json::Value::Null);
    assert_eq!(cloud["completion_tokens"], 71);
    // The upstream saw the cancelled client go away.
    let deadline = Instant::now() + Duration::from_secs(30);
    while upstream.stats()["cancelled"] != 1 {
        assert!(Instant::now() < deadline, "{}", upstream.stats());
        std::thread::sleep(Duration::from_millis(50));
    }

    // An upstream that is down: a 502 naming it.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let dir2 = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve2, proxy2) = start_serve(dir2.path(), &dead);
    let answer = http()
        .post(&format!("{proxy2}/api/generate"))
        .send(r#"{"model":"llama3","prompt":"hi"}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer.code(), 502);
    let body = answer.json();
    assert!(
        body["error"].as_str().is_some_and(|m| m.contains(&dead)),
        "{body}"
    );
    // Nothing ran, so nothing is recorded: a sample taken after the answer settles every request
    // that had ended by then.
    let answered = f(&serve2.get("/v1/snapshot")["at"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while f(&serve2.get("/v1/snapshot")["at"]) <= answered + 0.5 {
        assert!(Instant::now() < deadline, "no sample after the 502");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r2 = serve2.get("/v1/inference")["records"].clone();
    assert_eq!(r2, serde_json::json!([]));
}

/// Peak resident memory of a process, from `/proc/PID/status`.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn two_hundred_megabytes_stream_through_both_ways_without_being_held() {
    use std::io::Read;
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let before = peak_rss_kib(serve.child.id());

    let want = http()
        .get(&format!("{}/big-sha?mb=200", upstream.url))
        .call()
        .unwrap_or_else(|e| panic!("{e}"))
        .json();
    let mut body = http()
        .get(&format!("{proxy}/big?mb=200"))
        .call()
        .unwrap_or_else(|e| panic!("{e}"))
        .reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = body.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    assert_eq!(Some(n), want["bytes"].as_u64());

    // 200 MB up, as a chunked stream.
    let zeros = std::io::repeat(0).take(200 << 20);
    let mut zeros = zeros;
    let echo = http()
        .post(&format!("{proxy}/echo"))
        .send(ureq::SendBody::from_reader(&mut zeros))
        .unwrap_or_else(|e| panic!("{e}"))
        .json();
    assert_eq!(echo["body_bytes"], 200u64 << 20);

    let grew_mib = peak_rss_kib(serve.child.id()).saturating_sub(before) / 1024;
    assert!(grew_mib < 32, "serve's peak memory grew by {grew_mib} MiB");
}

#[test]
fn a_router_records_its_own_inference_and_asks_for_any_window_and_the_cli_lists_models() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    client("openai-chat-stream", &proxy);
    // A sample 2.5 s after the proxied request ended: the router's window below (2 s ending
    // 0.2 s before that sample) is its alone; one that overlapped the proxied request would
    // share its energy with it.
    let proxied_end = f(&records(&serve, 1)[0]["end"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while f(&serve.get("/v1/snapshot")["at"]) <= proxied_end + 2.5 {
        assert!(Instant::now() < deadline, "no sample after the request");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = crate::common::api_token(dir.path());
    let now = f(&serve.get("/v1/snapshot")["at"]);

    // 40 tokens at 20 tokens/s: the last 2 s before `end`, 200 J at 100 W.
    let body = serde_json::json!({
        "model": "router-model", "completion_tokens": 40, "tokens_per_second": 20.0,
        "end": now - 0.2
    });
    let unauthorised = serve.client().post("/v1/inference", Some(&body));
    assert_eq!(unauthorised.err().and_then(|e| e.status()), Some(401));
    let r = serve
        .client()
        .with_token(&token)
        .post("/v1/inference", Some(&body))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r["route"], "external");
    assert!((f(&r["energy_joules"]) - 200.0).abs() < 4.0, "{r}");
    // 200 J for 40 tokens.
    assert!((f(&r["joules_per_token"]) - 5.0).abs() < 0.1, "{r}");
    let bad = serve.client().with_token(&token).post(
        "/v1/inference",
        Some(&serde_json::json!({"model": "m", "completion_tokens": 5})),
    );
    assert_eq!(bad.err().and_then(|e| e.status()), Some(400));

    // Any window: 1.5 s of 100 W.
    let e = serve.get(&format!("/v1/energy?from={}&to={}", now - 1.5, now));
    assert!((f(&e["joules"]) - 150.0).abs() < 3.0, "{e}");
    assert!(f(&e["covered_fraction"]) > 0.98, "{e}");
    assert!((f(&e["mean_watts"]) - WATTS).abs() < 1.0, "{e}");

    // The CLI reads the same ledger beside the running engine.
    let models: serde_json::Value =
        serde_json::from_str(&crate::common::run_cli(dir.path(), &["models", "--json"]))
            .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = models["models"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["model"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["router-model", "openai/gpt-oss-20b"]);
    let listed: serde_json::Value = serde_json::from_str(&crate::common::run_cli(
        dir.path(),
        &["inference", "--since", "1h", "--json"],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(listed["records"].as_array().map(Vec::len), Some(2));
    let text = crate::common::run_cli(dir.path(), &["models", "--csv"]);
    assert!(
        text.starts_with("source,server,model,scope,requests,"),
        "{text}"
    );
    assert!(
        text.contains("\nproxy,,openai/gpt-oss-20b,system,1,84,57,"),
        "{text}"
    );
}

#[test]
fn in_route_mode_ollamas_client_is_served_by_the_small_model_with_its_tokens_capped() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"low_power_action": "route", "low_power_routes": {"llama3": "gemma3:1b"},
            "low_power_max_tokens": 64, "low_power_auto": false}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let asked = |n: usize| upstream.stats()["asked"][n].clone();

    // Off: the request goes as the client wrote it.
    client("ollama-generate-stream", &proxy);
    assert_eq!(
        asked(0),
        serde_json::json!({"path": "/api/generate", "model": "llama3", "num_predict": null,
                           "max_tokens": null, "keep_alive": null})
    );
    crate::common::switch_low_power(dir.path(), &serve, "on");

    // On: the official client reads the small model's whole answer (the gemma3:1b capture, 22
    // lines, not llama3's 71); the server was asked for it, at most 64 tokens.
    let g = client("ollama-generate-stream", &proxy);
    assert_eq!(
        (g["chunks"].as_u64(), g["eval_count"].as_u64()),
        (Some(22), Some(22)),
        "{g}"
    );
    assert_eq!(
        asked(1),
        serde_json::json!({"path": "/api/generate", "model": "gemma3:1b", "num_predict": 64,
                           "max_tokens": null, "keep_alive": null})
    );
    // The answer says what was done; a request that opts out is left alone.
    let chat = |route: Option<&str>| {
        let mut req = http().post(&format!("{proxy}/api/chat"));
        if let Some(r) = route {
            req = req.header("X-Wattbar-Route", r);
        }
        req.send_json(
            serde_json::json!({"model": "llama3", "messages": [], "stream": false,
                                         "options": {"num_predict": 500}}),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .header_str("x-wattbar-routed")
        .map(str::to_string)
    };
    assert_eq!(
        chat(None).as_deref(),
        Some("llama3 -> gemma3:1b; num_predict 500 -> 64")
    );
    assert_eq!(asked(2)["num_predict"], 64);
    assert_eq!(chat(Some("off")), None);
    assert_eq!(asked(3)["model"], "llama3");
    assert_eq!(asked(3)["num_predict"], 500);

    let r = records(&serve, 4);
    let mut r: Vec<_> = r.into_iter().collect();
    r.sort_by_key(|x| x["id"].as_u64());
    assert_eq!(
        crate::common::served_and_asked(&r),
        vec![
            ("llama3", None),
            ("gemma3:1b", Some("llama3")),
            ("gemma3:1b", Some("llama3")),
            ("llama3", None),
        ]
    );
    assert_energy_is_the_draw_over_the_window(&r[1]);
    assert_eq!(serve.get("/v1/low-power")["routed"]["requests"], 2);
}

#[test]
fn a_request_routed_to_a_model_the_server_lacks_gets_its_error_unchanged_and_once() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"low_power_action": "route", "low_power_routes": {"llama3": "absent:1b"},
            "low_power_auto": false}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    crate::common::switch_low_power(dir.path(), &serve, "on");
    let answer = http()
        .post(&format!("{proxy}/api/chat"))
        .send_json(serde_json::json!({"model": "llama3", "messages": [], "stream": false}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(answer.code(), 404, "not the server's 404");
    assert_eq!(
        answer.header_str("x-wattbar-routed"),
        Some("llama3 -> absent:1b"),
        "the client is told where it was sent"
    );
    let body = answer.text();
    assert_eq!(
        body,
        r#"{"error":"model \"absent:1b\" not found, try pulling it first"}"#
    );
    // No retry, neither with the model asked for nor with the routed one.
    let asked = upstream.stats()["asked"].clone();
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{asked}");
    let r = &records(&serve, 1)[0];
    assert_eq!(r["status"], "error", "{r}");
    assert_eq!(r["model"], "absent:1b");
    assert_eq!(r["requested_model"], "llama3");
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.contains("not found, try pulling it first")),
        "{r}"
    );
}

#[test]
fn each_measured_answer_names_its_record_and_the_api_gives_it_whole() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let post = |path: &str, body: serde_json::Value| {
        let answer = http()
            .post(&format!("{proxy}{path}"))
            .send_json(body)
            .unwrap_or_else(|e| panic!("{e}"));
        let id = answer
            .header_str("x-wattbar-request-id")
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no X-Wattbar-Request-Id"));
        // The whole answer, as a client reads it, before asking for the record.
        let _ = answer.text();
        id
    };
    let chat = post(
        "/api/chat",
        serde_json::json!({"model": "llama3", "messages": [], "stream": true}),
    );
    let generate = post(
        "/api/generate",
        serde_json::json!({"model": "llama3", "prompt": "x", "stream": false}),
    );
    assert_ne!(chat, generate);
    // Asked for at once: the record is made at the first sample after the answer ended.
    for id in [&chat, &generate] {
        let record = serve.get(&format!("/v1/inference/{id}"));
        assert_eq!(record["id"].to_string(), *id, "{record}");
        assert_eq!(record["status"], "ok", "{record}");
        let listed = serve.records(2);
        assert!(listed.contains(&record), "{record} not in {listed:?}");
    }
    let streamed = serve.get(&format!("/v1/inference/{chat}"));
    assert_eq!(streamed["route"], "/api/chat");
    assert_energy_is_the_draw_over_the_window(&streamed);
    // Routes that generate nothing name no record.
    let tags = http()
        .get(&format!("{proxy}/api/tags"))
        .call()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tags.header_str("x-wattbar-request-id"), None);
    // An id that is no number, and one never given.
    let status = |path: &str| {
        http()
            .get(&format!("{}{path}", serve.url))
            .call()
            .unwrap_or_else(|e| panic!("{e}"))
            .code()
    };
    assert_eq!(status("/v1/inference/first"), 400);
    assert_eq!(status("/v1/inference/999999"), 404);
}

/// The receipt's figures, as the record has them.
const RECEIPT_FIELDS: [&str; 8] = [
    "id",
    "energy_joules",
    "net_energy_joules",
    "energy_bound_joules",
    "net_energy_bound_joules",
    "joules_per_token",
    "covered",
    "quality",
];

fn assert_receipt_is_the_record(serve: &Serve, receipt: &serde_json::Value) {
    let id = receipt["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no receipt: {receipt}"));
    let record = serve.get(&format!("/v1/inference/{id}"));
    for field in RECEIPT_FIELDS {
        // A JavaScript client reads 1.0 back as 1: the same number.
        let same = match (receipt[field].as_f64(), record[field].as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => receipt[field] == record[field],
        };
        assert!(same, "{field}: {receipt} vs {record}");
    }
    assert!(receipt["energy_joules"].is_number(), "{receipt}");
    assert_eq!(receipt["quality"], "measured");
}

/// A raw POST through `base`: the status, the headers asked for and the body's bytes.
fn raw_post(base: &str, path: &str, body: &str, receipt: bool) -> (Option<String>, Vec<u8>) {
    let mut req = http()
        .post(&format!("{base}{path}"))
        .header("Content-Type", "application/json");
    if receipt {
        req = req.header("X-Wattbar-Receipt", "1");
    }
    let answer = req.send(body).unwrap_or_else(|e| panic!("{e}"));
    let id = answer
        .header_str("x-wattbar-request-id")
        .map(str::to_string);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut answer.reader(), &mut bytes).unwrap_or_else(|e| panic!("{e}"));
    (id, bytes)
}

#[test]
fn a_client_that_asks_gets_the_energy_receipt_in_its_answer_equal_to_the_record() {
    let upstream = Upstream::start(PACE_MS);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let with_receipt = |scenario: &str| {
        node_json_with(
            "clients.mjs",
            &[scenario, &proxy],
            &[("WATTBAR_RECEIPT", "1")],
        )
    };

    // Ollama's client, streamed and not, and OpenAI's not streamed: the receipt is a field of
    // the object the client returns, and the client's own fields are all there.
    let stream = with_receipt("ollama-generate-stream");
    assert_eq!(
        (stream["chunks"].as_u64(), stream["eval_count"].as_u64()),
        (Some(71), Some(71))
    );
    assert_receipt_is_the_record(&serve, &stream["wattbar"]);
    let chat = with_receipt("ollama-chat");
    assert!(
        chat["content"].is_string() && chat["eval_count"].is_number(),
        "{chat}"
    );
    assert_receipt_is_the_record(&serve, &chat["wattbar"]);
    let openai = with_receipt("openai-chat");
    assert!(openai["usage"]["completion_tokens"].is_number(), "{openai}");
    assert_receipt_is_the_record(&serve, &openai["wattbar"]);

    // OpenAI's client, streamed: it reads every event it read without the receipt (it skips
    // SSE comments); the bytes hold the receipt as a comment just before [DONE].
    let plain = client("openai-chat-stream", &proxy);
    assert_eq!(with_receipt("openai-chat-stream"), plain);
    let body = r#"{"model": "openai/gpt-oss-20b", "messages": [], "stream": true}"#;
    let (id, bytes) = raw_post(&proxy, "/v1/chat/completions", body, true);
    let text = String::from_utf8(bytes).unwrap_or_default();
    let (before, _) = text
        .split_once("data: [DONE]")
        .unwrap_or_else(|| panic!("no [DONE]: {text}"));
    let comment = before
        .trim_end()
        .rsplit('\n')
        .next()
        .and_then(|l| l.strip_prefix(": wattbar "))
        .unwrap_or_else(|| panic!("no receipt before [DONE]: {text}"));
    let receipt: serde_json::Value =
        serde_json::from_str(comment).unwrap_or_else(|e| panic!("{e}: {comment}"));
    assert_eq!(Some(receipt["id"].to_string()), id);
    assert_receipt_is_the_record(&serve, &receipt);

    // Not asked for: the bytes are the server's, exactly, streamed or not.
    for (path, body) in [
        (
            "/api/chat",
            r#"{"model": "gemma3:1b", "messages": [], "stream": false}"#,
        ),
        ("/api/generate", r#"{"model": "llama3", "prompt": "x"}"#),
    ] {
        let (_, through) = raw_post(&proxy, path, body, false);
        let (_, direct) = raw_post(&upstream.url, path, body, false);
        assert_eq!(through, direct, "{path}");
        let (_, asked) = raw_post(&proxy, path, body, true);
        assert_ne!(asked, direct, "{path}: no receipt");
    }
}

/// Waits for a line of `serve`'s log that contains `text`; answers it.
/// Low-power mode's last sentence, once it says `text`.
fn last_event(serve: &Serve, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view = serve.get("/v1/low-power");
        if let Some(said) = view["last_event"].as_str().filter(|s| s.contains(text)) {
            return said.to_string();
        }
        assert!(Instant::now() < deadline, "{view}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_loaded_model_is_listed_with_its_idle_cost_unknown_until_measured() {
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, _proxy) = start_serve(dir.path(), &upstream.url);
    // The proxy reads the genuine /api/ps (gemma3:latest, 5.96 GB in VRAM) and the engine lists
    // it at its next sample.
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let models = serve.get("/v1/models");
        if let Some(m) = models["resident"].as_array().and_then(|r| r.first()) {
            break m.clone();
        }
        assert!(Instant::now() < deadline, "{models}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(listed["model"], "gemma3:latest");
    assert_eq!(listed["loaded"], true);
    assert_eq!(listed["size_vram_bytes"], 5_964_735_424_u64);
    // Not measured with nothing loaded: unknown, never 0 W.
    assert_eq!(listed["idle_watts"], serde_json::Value::Null, "{listed}");
    assert_eq!(listed["cost_per_day"], serde_json::Value::Null, "{listed}");
    assert!(
        listed["method"]
            .as_str()
            .is_some_and(|m| m.contains("with no model loaded")),
        "{listed}"
    );
    let snapshot = serve.get("/v1/snapshot");
    assert_eq!(
        snapshot["resident"][0]["model"], "gemma3:latest",
        "the dashboard's state"
    );
    let metrics = serve.text("/metrics");
    assert!(
        metrics.contains("wattbar_model_resident_idle_joules_total{model=\"gemma3:latest\"}"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("wattbar_model_idle_power_watts{"),
        "unknown is not exported"
    );
}

#[test]
fn switching_low_power_on_unloads_each_idle_model_once_and_leaves_a_busy_one() {
    // 150 ms a line: a llama3 stream of 71 lines stays in flight for over 10 s.
    let upstream = Upstream::start(150);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"unload_idle_models_in_low_power": true, "low_power_auto": false}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (serve, proxy) = start_serve(dir.path(), &upstream.url);
    let unloads = || {
        upstream.stats()["asked"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["keep_alive"] == 0)
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };

    // The genuine /api/ps lists gemma3:latest, idle: one keep_alive 0 for it, nothing else,
    // and the user is told once.
    crate::common::switch_low_power(dir.path(), &serve, "on");
    let said = last_event(&serve, "unloaded");
    assert_eq!(
        said,
        format!(
            "Low-power mode unloaded gemma3:latest from {}.",
            upstream.url
        )
    );
    assert_eq!(
        unloads(),
        vec![
            serde_json::json!({"path": "/api/generate", "model": "gemma3:latest",
                                "num_predict": null, "max_tokens": null, "keep_alive": 0})
        ]
    );
    crate::common::switch_low_power(dir.path(), &serve, "off");

    // A request for it in flight, named as users type it (the server lists `gemma3:latest`):
    // switched on again, it stays loaded.
    let through = proxy.clone();
    let running = std::thread::spawn(move || {
        let answer = http()
            .post(&format!("{through}/api/generate"))
            .send_json(serde_json::json!({"model": "gemma3", "prompt": "x"}))
            .map_err(|e| e.to_string())?;
        let body = answer.text();
        Ok::<_, String>(body.lines().count())
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.get("/v1/snapshot")["inflight"] != 1 {
        assert!(Instant::now() < deadline, "the request never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::switch_low_power(dir.path(), &serve, "on");
    let said = last_event(&serve, "no idle model");
    assert!(
        said.ends_with("; kept gemma3:latest (a request is using it)."),
        "{said}"
    );
    assert_eq!(unloads().len(), 1, "no second keep_alive 0");
    let lines = running.join().ok().and_then(Result::ok);
    assert_eq!(lines, Some(71));
}

#[test]
fn the_cli_says_what_keeping_a_model_loaded_costs_a_day() {
    use wattbar_core::inference::resident::ResidentDay;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"price_per_kwh": 0.30}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // What an engine stored: 10 W idle with nothing loaded, 30 W with gemma3 loaded (100
    // intervals each, 1 W spread), and an hour resident and idle at 20 W on some day.
    let day = ResidentDay {
        day: "2026-01-01".into(),
        model: "gemma3:latest".into(),
        idle_seconds: 3600.0,
        joules: 72_000.0,
        cost: 72_000.0 / 3.6e6 * 0.30,
        unpriced_seconds: 0.0,
    };
    crate::common::seed_resident(dir.path(), &[("", 10.0), ("gemma3:latest", 30.0)], &[day]);
    let json: serde_json::Value =
        serde_json::from_str(&crate::common::run_cli(dir.path(), &["models", "--json"]))
            .unwrap_or_else(|e| panic!("{e}"));
    let gemma = &json["resident"][0];
    assert_eq!(gemma["model"], "gemma3:latest", "{json}");
    assert_eq!(gemma["idle_watts"], 20.0);
    // 20 W × 24 h = 0.48 kWh, at 0.30 a kWh.
    assert!((f(&gemma["cost_per_day"]) - 0.144).abs() < 1e-9, "{gemma}");
    assert_eq!(gemma["idle_joules_total"], 72_000.0);
    assert_eq!(
        gemma["loaded"], false,
        "only a running engine knows what is loaded"
    );
    // Two medians of 100 intervals with a 1 W spread: ± 1.96 × √2 × 1.2533 × (1/1.645) / 10.
    let within = f(&gemma["uncertainty_watts"]);
    assert!((within - 0.2112).abs() < 1e-3, "{within}");
    let text = crate::common::run_cli(dir.path(), &["models"]);
    assert!(
        text.contains(
            "Keeping gemma3:latest loaded costs about 0.14 EUR/day (20.0 ± 0.2 W at idle"
        ),
        "{text}"
    );
}

#[test]
fn an_upstream_without_metrics_is_asked_for_three_windows_and_then_never_again() {
    // The fake Ollama answers /metrics 404, as Ollama does.
    let upstream = Upstream::start(0);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (serve, _) = crate::common::serve_with_proxy(dir.path(), &upstream.url, 50.0, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = serve
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("never let go: {e}"));
        if line.contains("gives no model server's /metrics") {
            break;
        }
    }
    // The engine says so in its log before it publishes the list without it: wait for that.
    let servers = loop {
        let servers = serve.get("/v1/server-metrics")["servers"].clone();
        if servers == serde_json::json!([]) || Instant::now() >= deadline {
            break servers;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(servers, serde_json::json!([]));
    // The proxy reads /api/ps every 5 s: each read is five more 1 s windows. Between two of
    // them nothing more was asked, and what was asked is a handful: its first ask, its three
    // failed windows, and one in flight as it was let go.
    let ps = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while upstream.stats()["ps"].as_u64().unwrap_or_default() < n {
            assert!(Instant::now() < deadline, "{}", upstream.stats());
            std::thread::sleep(Duration::from_millis(100));
        }
        upstream.stats()
    };
    let now = upstream.stats()["ps"].as_u64().unwrap_or_default();
    let after = ps(now + 1)["metrics"].as_u64().unwrap_or_default();
    let later = ps(now + 2)["metrics"].as_u64().unwrap_or_default();
    assert_eq!(later, after, "{}", upstream.stats());
    assert!((3..=6).contains(&after), "{after} asks");
}
