//! Proxy keys and their joule budgets, against llama.cpp's real `llama-server` (SmolLM2 on this
//! machine's CPU) behind `wattbar-cli serve --llm-proxy` on a replayed 100 W machine, driven by
//! the official Python `openai` client carrying the key as its API key (`tests/llm/keyed.py`).
//!
//! Budgets are set from what an answer measured on the spot (the server's speed is this
//! machine's), as a few answers' worth; every figure compared is then read back from the
//! records, the ledger's usage and `/metrics`.

use crate::common::model_server::{python, ModelServer};
use crate::common::{repo_root, run_cli, serve_with_proxy, Serve};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const WATTS: f64 = 100.0;

fn keyed(args: &[&str]) -> serde_json::Value {
    let python = python();
    let out = Command::new(&python)
        .arg(repo_root().join("tests/llm/keyed.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        out.status.success(),
        "keyed.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("keyed.py: {e}"))
}

/// `wattbar-cli key ARGS` against the running engine; its secret where it made one.
fn key(data: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["key"];
    all.extend_from_slice(args);
    let out = run_cli(data, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"))
}

fn secret(made: &serde_json::Value) -> String {
    made["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("no secret: {made}"))
        .to_string()
}

/// A refusal's `error` object, however the client handed the body on (the openai client gives
/// the body's `error` member).
fn error_of(a: &serde_json::Value) -> &serde_json::Value {
    if a["error"]["error"].is_object() {
        &a["error"]["error"]
    } else {
        &a["error"]
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Key `name` as `GET /v1/keys` lists it.
fn listed(serve: &Serve, name: &str) -> serde_json::Value {
    serve.get("/v1/keys")["keys"]
        .as_array()
        .and_then(|k| k.iter().find(|k| k["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no key {name}"))
}

/// The records made so far, once there are `n`, by id.
fn records(serve: &Serve, n: usize) -> Vec<serde_json::Value> {
    let mut all = serve.records(n);
    all.sort_by_key(|r| r["id"].as_u64());
    all
}

/// Waits until every record made is in the ledger.
fn committed(serve: &Serve) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(serve, "wattbar_inference_unwritten_records") != Some(0.0) {
        assert!(Instant::now() < deadline, "records never written");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of the one `/metrics` series that starts with `series`.
fn metric(serve: &Serve, series: &str) -> Option<f64> {
    serve
        .text("/metrics")
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// Warms the model up unkeyed, so that its J per token is measured; a whole answer's joules.
fn an_answers_joules(serve: &Serve, proxy: &str) -> f64 {
    for _ in 0..3 {
        keyed(&["chat", proxy, "none", "warm-up", "8"]);
    }
    let r = records(serve, 3);
    r.iter().map(|r| f(&r["energy_joules"])).sum::<f64>() / r.len() as f64
}

#[test]
fn a_burst_of_64_overshoots_a_budget_only_by_answers_above_their_holds_and_clamp_fits_one_in() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path();
    let (serve, proxy) = serve_with_proxy(data, &server.url, WATTS, &[]);
    let answer = an_answers_joules(&serve, &proxy);
    // Four answers' worth, in whole joules.
    let budget = (4.0 * answer).ceil();
    let lab = secret(&key(
        data,
        &["add", "lab", "--budget", &format!("{budget}J/day")],
    ));
    let burst = keyed(&["burst", &proxy, &lab, "64", "8"]);
    let answers = burst["answers"].as_array().cloned().unwrap_or_default();
    assert_eq!(answers.len(), 64);
    let (ok, refused): (Vec<_>, Vec<_>) = answers.iter().partition(|a| a["status"] == 200);
    assert!(!ok.is_empty() && !refused.is_empty(), "{burst}");
    let mut most_held: f64 = 0.0;
    let mut least_held = f64::INFINITY;
    for a in &refused {
        assert_eq!(a["status"], 429, "{a}");
        let e = error_of(a);
        assert_eq!(e["type"], "budget_exceeded", "{a}");
        assert_eq!(f(&e["budget_joules"]), budget, "{a}");
        most_held = most_held.max(f(&e["asked_joules"]));
        least_held = least_held.min(f(&e["asked_joules"]));
        let resets = chrono::DateTime::parse_from_rfc3339(e["resets_at"].as_str().unwrap_or(""))
            .map(|t| t.timestamp() as f64);
        // The end of a UTC day, the next one to come: whatever hour the test runs at.
        let midnight = resets.unwrap_or_else(|e| panic!("{e}: {a}"));
        let now = wattbar_engine::unix_now();
        assert!(
            midnight % 86_400.0 == 0.0 && midnight > now - 60.0 && midnight <= now + 86_400.0,
            "{a}"
        );
        let retry: f64 = a["headers"]["retry-after"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no Retry-After: {a}"));
        let until = midnight - now;
        assert!(
            (retry - until).abs() <= 120.0,
            "{retry} s to {until} s: {a}"
        );
        assert_eq!(
            a["headers"]["ratelimit-policy"],
            format!("\"energy\";q={budget};w=86400;qu=\"joules\""),
            "{a}"
        );
        let limit = a["headers"]["ratelimit"].as_str().unwrap_or_default();
        assert!(
            limit.starts_with("\"energy\";r=") && limit.contains(";t="),
            "{a}"
        );
    }
    let all = records(&serve, 3 + ok.len());
    let charged: Vec<&serde_json::Value> = all.iter().filter(|r| r["key"] == "lab").collect();
    assert_eq!(charged.len(), ok.len());
    let sum: f64 = charged.iter().map(|r| f(&r["key_joules"])).sum();
    let status = listed(&serve, "lab")["status"].clone();
    assert!((f(&status["spent_joules"]) - sum).abs() < 1e-9, "{status}");
    assert_eq!(f(&status["held_joules"]), 0.0, "{status}");
    eprintln!(
        "64 at once on {budget} J/day: {} answered, {} refused; {sum:.3} J spent, the largest \
         hold {most_held:.3} J, an answer {answer:.3} J",
        ok.len(),
        refused.len()
    );
    // Every request asks the same 8 tokens, so each answered one held what each refused one
    // asked. The holds in flight fit the budget, so it is overshot by no more than what the
    // answers measured above their holds (a slower answer at the same power costs more).
    let above = |r: &&serde_json::Value| (f(&r["key_joules"]) - least_held).max(0.0);
    let over: f64 = charged.iter().map(above).sum();
    assert!(
        sum <= budget + over + 1e-9,
        "{sum} J spent on a budget of {budget} J, {over} J measured above holds of {least_held} J"
    );
    for r in &charged {
        // Measured at the wall-less replay's system scope: charged what it drew.
        assert_eq!(f(&r["key_joules"]), f(&r["energy_joules"]), "{r}");
        assert_eq!(r["client"], "lab", "{r}");
    }
    // One after another, until the budget turns one away: the budget is used up (the last
    // refusal's hold did not fit what was left), and each answer went on only while its hold
    // fit, so overshot by no more than one answer's excess over its hold.
    let mut turned_away = refused.len();
    let mut refusal = None;
    for _ in 0..32 {
        let a = keyed(&["chat", &proxy, &lab, "lab", "8"]);
        if a["status"] == 429 {
            turned_away += 1;
            refusal = Some(error_of(&a).clone());
            break;
        }
        assert_eq!(a["status"], 200, "{a}");
    }
    let refusal = refusal.unwrap_or_else(|| panic!("32 more answers on {budget} J/day"));
    let asked = f(&refusal["asked_joules"]);
    least_held = least_held.min(asked);
    let status = listed(&serve, "lab")["status"].clone();
    let spent = f(&status["spent_joules"]);
    assert_eq!(f(&refusal["spent_joules"]), spent, "{refusal}");
    assert!(
        spent + asked > budget,
        "{spent} J + {asked} J fit {budget} J"
    );
    let one_after_another = records(&serve, 1);
    let excess = one_after_another
        .iter()
        .filter(|r| r["key"] == "lab")
        .skip(charged.len())
        .map(|r| (f(&r["key_joules"]) - least_held).max(0.0))
        .fold(0.0, f64::max);
    assert!(
        spent <= sum.max(budget + excess) + 1e-9,
        "{spent} J spent on {budget} J after {sum} J at once, {excess} J above a hold"
    );
    let all = serve.records(1);
    let charged: Vec<&serde_json::Value> = all.iter().filter(|r| r["key"] == "lab").collect();
    let sum: f64 = charged.iter().map(|r| f(&r["key_joules"])).sum();
    assert!(
        (spent - sum).abs() < 1e-9,
        "{spent} J for records of {sum} J"
    );
    // The ledger's usage and the exported counters are the records, to the nanojoule.
    committed(&serve);
    let usage = serve.get("/v1/usage?key=lab&group=key");
    let rows = usage["usage"]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let used: f64 = rows.iter().map(|r| f(&r["key_joules"])).sum();
    assert!((used - sum).abs() < 1e-9, "{usage}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let exported = metric(
            &serve,
            "wattbar_key_energy_joules_total{key=\"lab\",scope=\"system\"}",
        );
        let counted = metric(
            &serve,
            "wattbar_key_requests_total{key=\"lab\",outcome=\"budget_exceeded\"}",
        );
        if exported.is_some_and(|j| (j - sum).abs() < 1e-9) && counted == Some(turned_away as f64) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{exported:?} J for {sum}, {counted:?} refusals for {turned_away}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Clamp: a budget of about two answers asks 64 tokens; the cap is lowered to fit.
    let fit = secret(&key(
        data,
        &[
            "add",
            "fit",
            "--clamp",
            "--budget",
            &format!("{}J/day", (2.0 * answer).ceil()),
        ],
    ));
    let clamped = keyed(&["chat", &proxy, &fit, "clamped", "64"]);
    assert_eq!(clamped["status"], 200, "{clamped}");
    let cap: u64 = clamped["headers"]["x-wattbar-clamped"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not clamped: {clamped}"));
    assert!(cap < 64, "{clamped}");
    let tokens = clamped["completion_tokens"].as_u64().unwrap_or(u64::MAX);
    assert!(tokens <= cap, "{tokens} tokens for a cap of {cap}");
    // The cap is the most tokens whose hold fits: the budget left beside the hold (`r`) is
    // less than one more token's joules. What the answer then measured is charged, whatever
    // the hold was (a slower answer at the same power costs more: the rule's one overshoot).
    let field = |header: &str, name: &str| -> f64 {
        clamped["headers"][header]
            .as_str()
            .and_then(|h| h.split(';').find_map(|p| p.strip_prefix(name)))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {header}: {clamped}"))
    };
    let (budget, left) = (field("ratelimit-policy", "q="), field("ratelimit", "r="));
    let held = budget - left;
    assert!(
        left >= 0.0 && left < held / cap as f64,
        "{held} J held for {cap} tokens leaves {left} J of {budget} J: {clamped}"
    );
    assert_eq!(budget, (2.0 * answer).ceil(), "{clamped}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let record = loop {
        let found = serve.records(1).into_iter().find(|r| r["key"] == "fit");
        if let Some(r) = found {
            break r;
        }
        assert!(Instant::now() < deadline, "no record of the clamped answer");
        std::thread::sleep(Duration::from_millis(100));
    };
    let spent = f(&listed(&serve, "fit")["status"]["spent_joules"]);
    assert!(
        (spent - f(&record["key_joules"])).abs() < 1e-9,
        "{spent} J spent: {record}"
    );
}

#[test]
fn the_official_client_reads_the_energy_line_and_usage_per_client_adds_up_by_hand() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path();
    let (serve, proxy) = serve_with_proxy(data, &server.url, WATTS, &[]);
    let agents = secret(&key(data, &["add", "agents", "--energy-line"]));
    // Streamed, read line by line as the agents read NeuralWatt's comments.
    let streamed = keyed(&["stream", &proxy, &agents, "aider"]);
    let id = streamed["id"].as_str().unwrap_or_default().to_string();
    let record = serve.get(&format!("/v1/inference/{id}"));
    assert_eq!(
        f(&streamed["joules"]),
        f(&record["energy_joules"]),
        "{streamed}"
    );
    assert_eq!(streamed["energy"]["scope"], "system", "{streamed}");
    assert_eq!(streamed["energy"]["id"].as_u64(), record["id"].as_u64());
    assert_eq!(streamed["cost"]["key"], "agents", "{streamed}");
    assert_eq!(streamed["cost"]["currency"], "EUR", "{streamed}");
    assert!(!streamed["text"].as_str().unwrap_or_default().is_empty());
    // Two more as aider, one as cline: usage per client is the records' sum.
    for client in ["aider", "aider", "cline"] {
        let a = keyed(&["chat", &proxy, &agents, client, "8"]);
        assert_eq!(a["status"], 200, "{a}");
        assert!(a["headers"]["x-wattbar-energy"].is_string(), "{a}");
    }
    let all = records(&serve, 4);
    committed(&serve);
    let by_hand = |client: &str| -> (u64, f64, u64) {
        let mine: Vec<&serde_json::Value> = all.iter().filter(|r| r["client"] == client).collect();
        (
            mine.len() as u64,
            mine.iter().map(|r| f(&r["energy_joules"])).sum(),
            mine.iter()
                .map(|r| r["completion_tokens"].as_u64().unwrap_or(0))
                .sum(),
        )
    };
    let (n, joules, tokens) = by_hand("aider");
    assert_eq!(n, 3);
    let out = run_cli(data, &["usage", "--client", "aider", "--group", "day"]);
    let cli_usage: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let api_usage = serve.get("/v1/usage?client=aider&group=day");
    for usage in [&cli_usage["usage"]["rows"], &api_usage["usage"]["rows"]] {
        let rows = usage.as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 1, "{usage}");
        assert_eq!(rows[0]["requests"], n, "{usage}");
        assert_eq!(rows[0]["completion_tokens"], tokens, "{usage}");
        assert!(
            (f(&rows[0]["energy_joules"]) - joules).abs() < 1e-9,
            "{usage}"
        );
        assert_eq!(rows[0]["scope"], "system", "{usage}");
    }
    // Each record's cost is its energy at the price in force, and the usage's cost their sum.
    let price = f(&serve.get("/v1/preferences")["price_per_kwh"]);
    let mine: Vec<&serde_json::Value> = all.iter().filter(|r| r["client"] == "aider").collect();
    for r in &mine {
        let expected = f(&r["energy_joules"]) / 3.6e6 * price;
        assert!((f(&r["cost"]) - expected).abs() < 1e-15, "{r}");
        assert_eq!(r["currency"], "EUR", "{r}");
        assert!((f(&r["key_cost"]) - expected).abs() < 1e-15, "{r}");
    }
    let cost: f64 = mine.iter().map(|r| f(&r["cost"])).sum();
    let rows = &api_usage["usage"]["rows"][0];
    assert!((f(&rows["cost"]) - cost).abs() < 1e-15, "{api_usage}");
    assert_eq!(rows["currency"], "EUR", "{api_usage}");
    // A money budget of one micro-euro a day holds less than one answer: refused, in euros.
    let cheap = secret(&key(data, &["add", "cheap", "--money", "0.000001/day"]));
    let refused = keyed(&["chat", &proxy, &cheap, "cheap", "8"]);
    assert_eq!(refused["status"], 429, "{refused}");
    let e = error_of(&refused);
    assert_eq!(
        (&e["type"], &e["currency"], &e["budget_money"]),
        (
            &serde_json::json!("budget_exceeded"),
            &serde_json::json!("EUR"),
            &serde_json::json!(0.000001)
        ),
        "{refused}"
    );
    let by_client = serve.get("/v1/usage?group=client");
    let groups: Vec<(String, u64)> = by_client["usage"]["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["group"].as_str().unwrap_or("").to_string(),
                r["requests"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(groups, vec![("aider".into(), 3), ("cline".into(), 1)]);
}

#[test]
fn a_wrong_removed_or_rotated_key_gets_401_and_no_energy_is_recorded_against_anyone() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path();
    let (serve, proxy) = serve_with_proxy(data, &server.url, WATTS, &[]);
    let old = secret(&key(data, &["add", "lab", "--budget", "10kJ/day"]));
    let gone = secret(&key(data, &["add", "gone"]));
    let new = secret(&key(data, &["rotate", "lab"]));
    key(data, &["remove", "gone"]);
    let wrong = format!("wb_{}", "0".repeat(64));
    for refused in [&old, &gone, &wrong] {
        let a = keyed(&["chat", &proxy, refused, "intruder", "8"]);
        assert_eq!(a["status"], 401, "{a}");
    }
    // With keys required, a request without one is refused too; the new secret goes through.
    let token = crate::common::api_token(data);
    serve
        .client()
        .with_token(&token)
        .put("/v1/preferences/keys_required", &serde_json::json!(true))
        .unwrap_or_else(|e| panic!("{e}"));
    let bare = keyed(&["chat", &proxy, "not-a-key", "intruder", "8"]);
    assert_eq!(bare["status"], 401, "{bare}");
    assert_eq!(error_of(&bare)["type"], "keys_required", "{bare}");
    let through = keyed(&["chat", &proxy, &new, "lab", "8"]);
    assert_eq!(through["status"], 200, "{through}");
    let all = records(&serve, 1);
    assert_eq!(all.len(), 1, "only the key's own request is recorded");
    assert_eq!(all[0]["key"], "lab");
    committed(&serve);
    let text = serve.text("/metrics");
    assert!(!text.contains("key=\"gone\""), "{text}");
    assert!(!text.contains("outcome=\"budget_exceeded\""), "{text}");
}

/// `serve` with its proxy in front of `upstream`, writing batches only once a minute: what is
/// committed before then was written at once, because a client was waiting for it.
fn serve_slow_batches(data: &Path, upstream: &str) -> (Serve, String) {
    std::fs::write(
        data.join("trace.csv"),
        format!("t,watts,domain,quality\n0,{WATTS},system,measured\n1,{WATTS},system,measured\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = crate::common::cli(data);
    c.env("WATTBAR_REPLAY", data.join("trace.csv"))
        .args(["serve", "--listen", "127.0.0.1:0", "--batch", "60s"])
        .args(["--llm-proxy", "127.0.0.1:0", "--llm-upstream", upstream]);
    let serve = Serve::spawn(c);
    let proxy = serve.proxy();
    (serve, proxy)
}

#[test]
fn a_kill_9_loses_no_spend_a_client_was_told_of() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = dir.path();
    let (mut serve, proxy) = serve_slow_batches(data, &server.url);
    let lab = secret(&key(
        data,
        &["add", "lab", "--budget", "1MJ/day", "--energy-line"],
    ));
    let mut told = 0.0;
    for _ in 0..3 {
        told += f(&keyed(&["stream", &proxy, &lab, "aider"])["joules"]);
    }
    assert!(told > 0.0);
    serve.child.kill().unwrap_or_else(|e| panic!("{e}"));
    let _ = serve.child.wait();
    let (again, _) = serve_slow_batches(data, &server.url);
    let spent = f(&listed(&again, "lab")["status"]["spent_joules"]);
    assert!(
        spent >= told - 1e-9,
        "{spent} J after the restart; the client was told of {told} J"
    );
}
