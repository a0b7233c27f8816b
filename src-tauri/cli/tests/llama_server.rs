//! llama.cpp's own `llama-server --metrics` (built by `scripts/setup`, SmolLM2-135M-Instruct on
//! this machine's CPU), asked by the official Python `openai` client straight at its port, as
//! users of LM Studio, llama-swap or their own SDK code do: Wattbar is no proxy here and reads
//! only the server's counters, once a window, beside the energy of a replayed 100 W machine.

use crate::common::model_server::{python, ModelServer};
use crate::common::{repo_root, run_cli, Serve};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `tests/llm/counters.py` against `base`: `requests` chats on `threads`, or with `stop`, until
/// that file exists.
fn client(base: &str, requests: usize, threads: usize, stop: Option<&std::path::Path>) -> Child {
    let mut c = Command::new(python());
    c.arg(repo_root().join("tests/llm/counters.py")).args([
        base,
        &requests.to_string(),
        &threads.to_string(),
    ]);
    if let Some(stop) = stop {
        c.arg(stop);
    }
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("counters.py: {e}"))
}

/// What the client was told it used: (requests, prompt tokens, completion tokens).
fn told(child: Child) -> (u64, u64, u64) {
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("counters.py: {e}"));
    assert!(
        out.status.success(),
        "counters.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("counters.py: {e}"));
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    (n("requests"), n("prompt_tokens"), n("completion_tokens"))
}

/// The one model's sums once they reach `completion` completion tokens: (prompt, completion).
fn counted(serve: &Serve, completion: u64) -> (f64, f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = serve.get("/v1/server-metrics");
        let t = &view["totals"][0];
        if let (Some(p), Some(c)) = (t["prompt_tokens"].as_f64(), t["completion_tokens"].as_f64()) {
            if c >= completion as f64 {
                return (p, c);
            }
        }
        assert!(Instant::now() < deadline, "{view}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn llama_servers_own_counters_give_every_token_its_clients_were_told_of_alone_and_four_at_once() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts\n0,100\n",
        &["--interval", "200ms", "--server-metrics", &server.url],
    );
    // The first scrape is the baseline: nothing is asked before it.
    serve.followed("llama.cpp");

    let started = serve.get("/v1/snapshot")["at"].as_f64().unwrap_or(f64::NAN);
    // 20 chats in a row: every prompt and completion token of their `usage`, no more, no less
    // (llama.cpp counts the prompt tokens it reused from its cache apart; both are prompt).
    let (requests, prompt, completion) = told(client(&server.url, 20, 1, None));
    assert_eq!(requests, 20);
    assert_eq!(
        counted(&serve, completion),
        (prompt as f64, completion as f64)
    );

    // Four clients at once, until a window has seen more than one request running.
    let stop = dir.path().join("stop");
    let four = client(&server.url, 0, 4, Some(&stop));
    let deadline = Instant::now() + Duration::from_secs(120);
    let concurrent = loop {
        let view = serve.get("/v1/server-metrics");
        let found = view["windows"].as_array().and_then(|ws| {
            ws.iter()
                .find(|w| w["concurrent"] == true && w["completion_tokens"].as_f64() > Some(0.0))
                .cloned()
        });
        if let Some(w) = found {
            break w;
        }
        assert!(
            Instant::now() < deadline,
            "no window was concurrent: {view}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    std::fs::write(&stop, "").unwrap_or_else(|e| panic!("{e}"));
    let (more, more_prompt, more_completion) = told(four);
    assert!(more >= 4, "{more}");
    // Its energy is the window's, over every token of the requests that ended in it.
    let joules = concurrent["energy_joules"].as_f64().unwrap_or(f64::NAN);
    let tokens = concurrent["completion_tokens"].as_f64().unwrap_or(f64::NAN);
    let per_token = concurrent["joules_per_token"].as_f64().unwrap_or(f64::NAN);
    assert!((per_token - joules / tokens).abs() < 1e-9, "{concurrent}");
    // And the sums still add up, to the token.
    let all = completion + more_completion;
    assert_eq!(
        counted(&serve, all),
        ((prompt + more_prompt) as f64, all as f64)
    );

    // Listed per source, by the API and by `wattbar-cli models` from the ledger alike.
    let listed = serve.get("/v1/models");
    let m = &listed["server_models"][0];
    assert_eq!(
        (&m["source"], &m["model"]),
        (&"server-metrics".into(), &"(unnamed)".into())
    );
    assert_eq!(
        m["completion_tokens"].as_f64(),
        Some(all as f64),
        "{listed}"
    );
    let energy = m["energy_joules"].as_f64().unwrap_or(f64::NAN);
    let jpt = m["joules_per_token"].as_f64().unwrap_or(f64::NAN);
    assert!((jpt - energy / all as f64).abs() < 1e-9, "{listed}");
    let cli: serde_json::Value = serde_json::from_str(&run_cli(dir.path(), &["models", "--json"]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cli["server_models"], listed["server_models"]);
    // Any range of /v1/energy: the windows wholly inside it, here all of them; none in the
    // last half second, which holds no whole 10 s window.
    let now = serve.get("/v1/snapshot")["at"].as_f64().unwrap_or(f64::NAN);
    let range = serve.get(&format!("/v1/energy?from={started}&to={now}"));
    assert_eq!(
        range["server_models"][0]["completion_tokens"].as_f64(),
        Some(all as f64),
        "{range}"
    );
    let short = serve.get(&format!("/v1/energy?from={}&to={now}", now - 0.5));
    assert_eq!(short["server_models"], serde_json::json!([]), "{short}");
    let table = run_cli(dir.path(), &["models"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("(unnamed)") && l.contains("server-metrics")),
        "{table}"
    );
}

#[test]
fn the_proxys_upstream_is_followed_by_itself_and_what_the_proxy_measured_is_counted_once() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // No --server-metrics: the proxy's upstream answers /metrics, so it is followed.
    let (serve, proxy) = crate::common::serve_with_proxy(dir.path(), &server.url, 100.0, &[]);
    let view = serve.followed("llama.cpp");
    let port = server.url.rsplit(':').next().unwrap_or_default();
    assert_eq!(
        view["servers"][0]["url"],
        format!("http://127.0.0.1:{port}/metrics"),
        "{view}"
    );

    // Through the proxy: its records measure the requests, and the window says so.
    let (_, _, through_proxy) = told(client(&proxy, 3, 1, None));
    // Its windows, however many the requests spanned, each say so.
    let deadline = Instant::now() + Duration::from_secs(60);
    let windows = loop {
        let view = serve.get("/v1/server-metrics");
        let windows = view["windows"].as_array().cloned().unwrap_or_default();
        let made: f64 = windows
            .iter()
            .filter_map(|w| w["completion_tokens"].as_f64())
            .sum();
        if made >= through_proxy as f64 {
            break windows;
        }
        assert!(Instant::now() < deadline, "{view}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(windows.iter().all(|w| w["proxied"] == true), "{windows:?}");
    let made: f64 = windows
        .iter()
        .filter_map(|w| w["completion_tokens"].as_f64())
        .sum();
    assert_eq!(made, through_proxy as f64, "{windows:?}");

    // A window in which a proxy request ran is the proxy's whole, whatever else ran in it (its
    // tokens cannot be told apart): the direct requests wait until the window holding the last
    // proxy request's end has closed, a window (10 s) and a scrape's lag after it.
    let records = serve.records(3);
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let last_end = records.iter().map(|r| f(&r["end"])).fold(0.0, f64::max);
    let deadline = Instant::now() + Duration::from_secs(60);
    while f(&serve.get("/v1/snapshot")["at"]) < last_end + 12.0 {
        assert!(Instant::now() < deadline, "the engine's clock stood still");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Straight at the server, later: counted from its counters, and only those.
    let (_, prompt, completion) = told(client(&server.url, 3, 1, None));
    assert_eq!(
        counted(&serve, completion),
        (prompt as f64, completion as f64),
        "{}",
        serve.get("/v1/server-metrics")
    );
    let records = serve.records(3);
    assert_eq!(records.len(), 3, "the direct requests made no record");
}

#[test]
fn a_llama_server_nobody_named_is_found_by_its_process_listening_on_loopback() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("trace.csv"), "t,watts\n0,100\n")
        .unwrap_or_else(|e| panic!("{e}"));
    // No --server-metrics, no preference, no proxy: the programs' reads find the process
    // `llama-server` and the port it listens on. Finding is allowed for this test alone (the
    // others' servers, running beside it, are found too, and told apart by their address).
    let mut c = crate::common::cli(dir.path());
    c.env("WATTBAR_REPLAY", dir.path().join("trace.csv"))
        .env("WATTBAR_FIND_MODEL_SERVERS", "1")
        .args(["serve", "--listen", "127.0.0.1:0", "--batch", "500ms"]);
    let serve = Serve::spawn(c);
    let url = format!("{}/metrics", server.url);
    let ours = |view: &serde_json::Value| {
        view["servers"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["url"] == url.as_str()).cloned())
    };
    // The processes are read every 10 s (every minute on a machine at rest).
    let deadline = Instant::now() + Duration::from_secs(150);
    let found = loop {
        let view = serve.get("/v1/server-metrics");
        if let Some(s) = ours(&view).filter(|s| s["family"] == "llama.cpp") {
            break s;
        }
        assert!(Instant::now() < deadline, "{url} never followed: {view}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(found["origin"], "listening", "{found}");

    // Its counters from here on: every token its clients were told of.
    let (_, prompt, completion) = told(client(&server.url, 5, 1, None));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = serve.get("/v1/server-metrics");
        let sums = view["totals"].as_array().and_then(|all| {
            all.iter()
                .find(|t| t["server"] == url.as_str())
                .map(|t| (t["prompt_tokens"].as_f64(), t["completion_tokens"].as_f64()))
        });
        if let Some((Some(p), Some(c))) = sums {
            if c >= completion as f64 {
                assert_eq!((p, c), (prompt as f64, completion as f64), "{view}");
                break;
            }
        }
        assert!(Instant::now() < deadline, "{view}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Turned off by the preference: let go at once; on again: found again at a later read.
    let token = crate::common::api_token(dir.path());
    let api = serve.client().with_token(&token);
    let find = |on: bool| {
        api.put(
            "/v1/preferences/find_model_servers",
            &serde_json::Value::Bool(on),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(find(false)["find_model_servers"], false);
    let view = serve.get("/v1/server-metrics");
    assert_eq!(ours(&view), None, "{view}");
    find(true);
    let deadline = Instant::now() + Duration::from_secs(150);
    while ours(&serve.get("/v1/server-metrics")).is_none() {
        assert!(Instant::now() < deadline, "{url} not found again");
        std::thread::sleep(Duration::from_millis(200));
    }

    // The server ends: no longer followed once its process is gone.
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(150);
    while ours(&serve.get("/v1/server-metrics")).is_some() {
        assert!(
            Instant::now() < deadline,
            "{url} still followed after it ended"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Each line of `records.jsonl` in `out`.
fn profile_records(out: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("records.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// `profile` of `model` at `server` over GSM8K's first ten questions, graded by `number`, on a
/// replayed 100 W machine: its records and summary.
fn gsm8k_profile(
    dir: &std::path::Path,
    server: &ModelServer,
    model: &str,
    out: &std::path::Path,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    gsm8k_profile_graded(dir, server, model, out, "number", 10)
}

/// [`gsm8k_profile`] graded by `grader`, over the first `max` questions.
fn gsm8k_profile_graded(
    dir: &std::path::Path,
    server: &ModelServer,
    model: &str,
    out: &std::path::Path,
    grader: &str,
    max: usize,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    std::fs::write(dir.join("trace.csv"), "t,watts\n0,100\n").unwrap_or_else(|e| panic!("{e}"));
    let gsm8k = repo_root().join("../shared/fixtures/evals/gsm8k-test-first40.jsonl");
    let mut c = crate::common::cli(dir);
    c.env("WATTBAR_REPLAY", dir.join("trace.csv"))
        .args(["profile", "--model", model, "--api", "openai"])
        .args([
            "--upstream",
            &server.url,
            "--format",
            "gsm8k",
            "--grader",
            grader,
        ])
        .args([
            "--max",
            &max.to_string(),
            "--max-tokens",
            "48",
            "--idle",
            "1s",
        ])
        .arg("--prompts")
        .arg(&gsm8k)
        .arg("--out")
        .arg(out);
    crate::common::assert_ok(&c.output().unwrap_or_else(|e| panic!("{e}")));
    let summary = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json")).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (profile_records(out), summary)
}

/// `model`'s row in `models --json`, the ledger's figures per model.
fn ledger_model(dir: &std::path::Path, model: &str) -> serde_json::Value {
    let models: serde_json::Value =
        serde_json::from_str(&crate::common::run_cli(dir, &["models", "--json"]))
            .unwrap_or_else(|e| panic!("{e}"));
    models["models"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["model"] == model))
        .cloned()
        .unwrap_or_else(|| panic!("{model} not in {models}"))
}

#[test]
fn ten_gsm8k_questions_to_the_real_server_are_graded_and_summarised_in_ipws_terms() {
    let server = ModelServer::llama();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = dir.path().join("smollm2");
    let (rs, summary) = gsm8k_profile(dir.path(), &server, "smollm2", &out);
    assert_eq!(rs.len(), 10);
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v} in {summary}"));

    // Every answer graded by its last number against GSM8K's `####` (each reference has one).
    let correct = rs.iter().filter(|r| r["verdict"] == "correct").count();
    for r in &rs {
        assert_eq!(r["grader"], "number", "{r}");
        assert!(
            r["verdict"] == "correct" || r["verdict"] == "incorrect",
            "{r}"
        );
        assert!(r["why"].as_str().is_some_and(|w| !w.is_empty()), "{r}");
        assert!(
            r["expected"].as_str().is_some_and(|e| e.contains("####")),
            "{r}"
        );
    }
    assert_eq!(
        (summary["correct"].as_u64(), summary["incorrect"].as_u64()),
        (Some(correct as u64), Some(10 - correct as u64))
    );
    assert_eq!(summary["unevaluated"], 0);
    // IPW's figures, worked apart from the records.
    let energies: Vec<f64> = rs.iter().map(|r| f(&r["energy_joules"])).collect();
    let mean_j = energies.iter().sum::<f64>() / 10.0;
    let accuracy = correct as f64 / 10.0;
    assert_eq!(f(&summary["accuracy"]), accuracy);
    assert!((f(&summary["avg_per_query_energy_joules"]) - mean_j).abs() < 1e-9);
    assert!((f(&summary["intelligence_per_joule"]) - accuracy / mean_j).abs() < 1e-12);
    let mean_w = rs.iter().map(|r| f(&r["mean_watts"])).sum::<f64>() / 10.0;
    assert!((f(&summary["intelligence_per_watt"]) - accuracy / mean_w).abs() < 1e-12);
    assert!((f(&summary["wh_per_1000_queries"]) - mean_j * 1000.0 / 3600.0).abs() < 1e-9);
    if correct == 0 {
        // A 135M model: likely none right. No joules per correct answer, and why.
        assert!(summary["joules_per_correct_answer"].is_null(), "{summary}");
        assert_eq!(
            summary["why"]["joules_per_correct_answer"],
            "no answer was correct"
        );
    } else {
        let per = energies.iter().sum::<f64>() / correct as f64;
        assert!((f(&summary["joules_per_correct_answer"]) - per).abs() < 1e-9);
    }
    for key in [
        "ttft_seconds_median",
        "ttft_seconds_p90",
        "itl_seconds_median",
        "itl_seconds_p90",
        "avg_per_query_net_energy_joules",
        "baseline_watts",
    ] {
        assert!(summary[key].is_number(), "{key}: {summary}");
    }
    // The replayed machine draws 100 W idle or not: its net energy is about 0, which divides
    // nothing, and says so.
    assert!(
        summary["net_intelligence_per_joule"].is_number()
            || summary["why"]["net_intelligence_per_joule"].is_string(),
        "{summary}"
    );

    // The ledger holds the same ten queries with the same energy.
    let smollm2 = ledger_model(dir.path(), "smollm2");
    assert_eq!(smollm2["requests"], 10, "{smollm2}");
    assert!((f(&smollm2["energy_joules"]) - energies.iter().sum::<f64>()).abs() < 1e-6);

    // A second model (the same file under another name) through `profile compare`: one group
    // (same machine, sources and grader), each run on the front unless the other beats it on
    // both accuracy and energy, and a chart that names the front.
    let other = ModelServer::llama_as("smollm2-b");
    let out_b = dir.path().join("smollm2-b");
    let (_, summary_b) = gsm8k_profile(dir.path(), &other, "smollm2-b", &out_b);
    let chart = dir.path().join("front.svg");
    let compared: serde_json::Value = serde_json::from_str(&crate::common::run_cli(
        dir.path(),
        &[
            "profile",
            "compare",
            out.to_str().unwrap_or_default(),
            out_b.to_str().unwrap_or_default(),
            "--json",
            "--svg",
            chart.to_str().unwrap_or_default(),
        ],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let groups = compared.as_array().cloned().unwrap_or_default();
    assert_eq!(groups.len(), 1, "{compared}");
    let runs = groups[0]["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 2);
    let point = |s: &serde_json::Value| (f(&s["accuracy"]), f(&s["avg_per_query_energy_joules"]));
    let (a, b) = (point(&summary), point(&summary_b));
    let beats = |x: (f64, f64), y: (f64, f64)| x.0 >= y.0 && x.1 <= y.1 && (x.0 > y.0 || x.1 < y.1);
    assert_eq!(runs[0]["model"], "smollm2");
    assert_eq!(runs[0]["efficient"], !beats(b, a), "{compared}");
    assert_eq!(runs[1]["efficient"], !beats(a, b), "{compared}");
    assert_eq!(runs[0]["accuracy"], summary["accuracy"]);
    let svg = std::fs::read_to_string(&chart).unwrap_or_else(|e| panic!("{e}"));
    let mut reader = quick_xml::Reader::from_str(&svg);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("the chart is not well-formed: {e}"),
        }
    }
    assert!(svg.contains("efficient front") && svg.contains("smollm2-b"));

    // Both runs are kept as profiles of one evaluation: `models --best` picks the one with the
    // lower energy per query among those accurate enough, and says so when none is.
    let best = |min: &str| -> serde_json::Value {
        serde_json::from_str(&crate::common::run_cli(
            dir.path(),
            &["models", "--best", "--json", "--min-accuracy", min],
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let any = best("0");
    assert_eq!(any["eval"], "gsm8k-test-first40 (first 10)", "{any}");
    let cheaper = if b.1 < a.1 { "smollm2-b" } else { "smollm2" };
    assert_eq!(any["chosen"], cheaper, "{any}");
    let strict = best("0.95");
    let good = |s: &serde_json::Value| f(&s["accuracy"]) >= 0.95;
    if !good(&summary) && !good(&summary_b) {
        assert_eq!(strict["chosen"], serde_json::Value::Null, "{strict}");
        assert!(strict["why_none"]
            .as_str()
            .is_some_and(|w| w.contains("meets the targets")));
    }

    // Graded by a grader model (the same SmolLM2, through the same server): it only reads the
    // final number, which is compared with GSM8K's; its own requests are recorded as its
    // model's and counted apart, never in the graded figures.
    let out_llm = dir.path().join("judged");
    let (judged, summary_llm) =
        gsm8k_profile_graded(dir.path(), &server, "smollm2", &out_llm, "llm:smollm2", 3);
    assert_eq!(judged.len(), 3);
    let mut judge_joules = 0.0;
    for r in &judged {
        assert_eq!(r["grader"], "llm:smollm2", "{r}");
        assert!(
            r["why"]
                .as_str()
                .is_some_and(|w| w.starts_with("the grader model read ")),
            "{r}"
        );
        let own = &r["grader_record"];
        assert_eq!(own["model"], "smollm2", "{r}");
        assert_ne!(own["record_id"], r["record_id"], "{r}");
        // A few tokens: room for the reference's number written out (70000: 5 digits, a
        // separator and 4 to spare, 10 tokens; 3: the floor of 5), or NONE.
        let room = wattbar_core::eval::judge::room(r["expected"].as_str().unwrap_or_default());
        assert!(
            own["completion_tokens"]
                .as_u64()
                .is_some_and(|n| n <= u64::from(room)),
            "{r}"
        );
        judge_joules += f(&own["energy_joules"]);
    }
    let grading = &summary_llm["grader_models"][0];
    assert_eq!(
        (&grading["model"], &grading["requests"]),
        (&"smollm2".into(), &3.into())
    );
    assert!(
        (f(&grading["energy_joules"]) - judge_joules).abs() < 1e-9,
        "{summary_llm}"
    );
    let graded_mean = judged.iter().map(|r| f(&r["energy_joules"])).sum::<f64>()
        / (f(&summary_llm["correct"]) + f(&summary_llm["incorrect"]));
    if summary_llm["unevaluated"] == 0 {
        assert!(
            (f(&summary_llm["avg_per_query_energy_joules"]) - graded_mean).abs() < 1e-9,
            "{summary_llm}"
        );
    }
    // The ledger holds the grader's requests as records of their own: 10 + 3 answers, 3 reads.
    let smollm2 = ledger_model(dir.path(), "smollm2");
    assert_eq!(smollm2["requests"], 16, "{smollm2}");
}
