//! `wattbar-cli profile` against a model server that serves genuine captured responses
//! (`tests/llm/upstream.mjs` over `tests/fixtures/llm/`), on a replayed 100 W machine: each
//! query's energy is 100 W × its own window, and its tokens are the capture's.

use crate::common::{assert_ok, cli, Serve, Upstream};

use std::path::Path;

const PROMPTS: &str = r#"{"prompt":"Tell me a joke about OpenTelemetry","id":"joke","answer":"opentelemetry"}
{"prompt":"And another one","answer":"kubernetes"}
{"prompt":"A third"}
"#;
const HUNDRED_WATTS: &str = "t,watts\n0,100\n1,100\n";

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn records(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("records.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn each_query_is_100_w_over_its_window(r: &serde_json::Value) {
    let expected = 100.0 * f(&r["wall_seconds"]);
    let got = f(&r["energy_joules"]);
    assert!(
        (got - expected).abs() <= 0.03 * expected + 0.5,
        "{got} J for {expected} J: {r}"
    );
    assert!((f(&r["joules_per_token"]) - got / f(&r["completion_tokens"])).abs() < 1e-9);
    assert_eq!(r["quality"], "measured");
    assert_eq!(r["covered"], 1.0, "{r}");
    // A steady draw, measured: nothing inside an interval can have differed.
    assert!(f(&r["energy_bound_joules"]) < 0.01, "{r}");
    assert!(
        r["tokens_source"] == "server" || r["tokens_source"] == "client",
        "{r}"
    );
}

/// Profiles `model` over the three prompts through `api`, asserts it succeeded, and gives its
/// records, one a prompt.
fn profile(
    dir: &Path,
    upstream: &Upstream,
    api: &str,
    model: &str,
    replay: Option<&str>,
) -> Vec<serde_json::Value> {
    std::fs::write(dir.join("prompts.jsonl"), PROMPTS).unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(dir);
    if let Some(trace) = replay {
        std::fs::write(dir.join("trace.csv"), trace).unwrap_or_else(|e| panic!("{e}"));
        c.env("WATTBAR_REPLAY", dir.join("trace.csv"));
    }
    c.args([
        "profile",
        "--model",
        model,
        "--api",
        api,
        "--idle",
        "1s",
        "--upstream",
    ])
    .arg(&upstream.url)
    .arg("--prompts")
    .arg(dir.join("prompts.jsonl"))
    .arg("--out")
    .arg(dir.join("out"));
    assert_ok(&c.output().unwrap_or_else(|e| panic!("{e}")));
    let rs = records(&dir.join("out"));
    assert_eq!(rs.len(), 3);
    rs
}

#[test]
fn ollama_prompts_through_the_proxy_land_in_the_model_ledger_with_their_energy() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let upstream = Upstream::start(10);
    let rs = profile(
        dir.path(),
        &upstream,
        "ollama",
        "llama3",
        Some(HUNDRED_WATTS),
    );
    for r in &rs {
        // SOURCES.md: the llama3 generate stream, 17 prompt and 71 completion tokens,
        // 31.524983 tokens/s as the server timed it.
        assert_eq!(
            (r["prompt_tokens"].as_u64(), r["completion_tokens"].as_u64()),
            (Some(17), Some(71))
        );
        assert!((f(&r["tokens_per_second"]) - 31.524983).abs() < 1e-5);
        // 71 lines 10 ms apart: the answer takes at least 0.7 s, its first token far less.
        assert!(f(&r["wall_seconds"]) >= 0.7 && f(&r["ttft_seconds"]) < f(&r["wall_seconds"]));
        each_query_is_100_w_over_its_window(r);
        // The idle machine drew the same 100 W: nothing is left net.
        assert!(f(&r["net_energy_joules"]).abs() < 2.0, "{r}");
        assert!(r["response"]
            .as_str()
            .is_some_and(|t| t.starts_with("A joke about OpenTelemetry")));
    }
    assert_eq!(rs[0]["id"], "joke");
    assert_eq!(rs[1]["id"], 2);
    // Graded by `contains`, the default: the reference appears in the first answer, not in the
    // second; the third has none, so it is not evaluated.
    let verdicts: Vec<&serde_json::Value> = rs.iter().map(|r| &r["verdict"]).collect();
    assert_eq!(verdicts, ["correct", "incorrect", "unevaluated"]);
    assert!(rs.iter().all(|r| r["grader"] == "contains"));
    assert_eq!(rs[1]["why"], "the answer lacks \"kubernetes\"");

    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary["queries"], 3);
    // How it was measured, in words, beside the graded figures (which count measured queries
    // under a name of their own).
    assert!(
        summary["measured"]
            .as_str()
            .is_some_and(|m| m.starts_with("sampled by this run every")),
        "{summary}"
    );
    assert_eq!(summary["measured_queries"], 2);
    // What the energy is: the replayed machine, whole, measured; every query wholly measured.
    let energy = &summary["energy"];
    assert_eq!(
        (
            &energy["scope"],
            &energy["quality"],
            &energy["least_covered"]
        ),
        (&"system".into(), &"measured".into(), &1.0.into()),
        "{summary}"
    );
    let bounds: f64 = rs.iter().map(|r| f(&r["energy_bound_joules"])).sum();
    assert!(
        (f(&energy["bound_joules"]) - bounds).abs() < 1e-9,
        "{summary}"
    );
    assert_eq!(summary["totals"]["completion_tokens"], 213);
    let total: f64 = rs.iter().map(|r| f(&r["energy_joules"])).sum();
    assert!((f(&summary["totals"]["energy_joules"]) - total).abs() < 1e-9);
    let jpt = &summary["per_query"]["joules_per_token"];
    assert!(f(&jpt["min"]) <= f(&jpt["median"]) && f(&jpt["median"]) <= f(&jpt["max"]));
    // One of the two evaluated is correct: 0.5 ÷ the mean of their two energies.
    assert_eq!(
        (
            &summary["correct"],
            &summary["incorrect"],
            &summary["unevaluated"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
    assert_eq!(summary["accuracy"], 0.5);
    let two = (f(&rs[0]["energy_joules"]) + f(&rs[1]["energy_joules"])) / 2.0;
    assert!((f(&summary["avg_per_query_energy_joules"]) - two).abs() < 1e-9);
    assert!((f(&summary["intelligence_per_joule"]) - 0.5 / two).abs() < 1e-12);
    assert!((f(&summary["joules_per_correct_answer"]) - 2.0 * two).abs() < 1e-9);

    // The records are in the model ledger, as a proxied request's are.
    let models = cli(dir.path())
        .args(["models", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let models: serde_json::Value = serde_json::from_slice(&models.stdout).unwrap_or_default();
    let llama = &models["models"][0];
    assert_eq!(
        (llama["model"].as_str(), llama["requests"].as_u64()),
        (Some("llama3"), Some(3))
    );
    assert!((f(&llama["energy_joules"]) - total).abs() < 1e-6);
    assert_eq!(upstream.stats()["requests"], 3);

    // The graded run is kept as a profile of its evaluation (the prompts file's name): at 50 %
    // llama3 is good enough, at 60 % it is not, and says why.
    assert_eq!(summary["eval"], "prompts");
    let best = |min: &str| -> serde_json::Value {
        let out = cli(dir.path())
            .args(["models", "--best", "--json", "--min-accuracy", min])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ok(&out);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"))
    };
    let good = best("0.5");
    assert_eq!(
        (&good["chosen"], &good["eval"]),
        (&"llama3".into(), &"prompts".into())
    );
    let kept = &good["weighed"][0];
    assert_eq!(
        (&kept["queries"], &kept["correct"], &kept["label"]),
        (&3.into(), &1.into(), &"out".into())
    );
    assert!((f(&kept["avg_per_query_energy_joules"]) - two).abs() < 1e-9);
    let short = best("0.6");
    assert_eq!(short["chosen"], serde_json::Value::Null);
    assert_eq!(short["weighed"][0]["why"], "accuracy 50.0 % below 60.0 %");
}

#[test]
fn a_profile_on_a_laptops_battery_says_each_answers_share_and_wear() {
    // 100 W from a 70 Wh battery priced 200 EUR for 1,000 cycles: each answer's energy all
    // the battery's, wearing 200 ÷ 70 = 2.857 EUR a kWh of it.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("preferences.json"),
        r#"{"battery_price": 200, "currency": "EUR"}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let upstream = Upstream::start(10);
    let trace = "t,watts,on_battery,battery_design_wh\n0,100,1,70\n1,100,1,70\n";
    let rs = profile(dir.path(), &upstream, "ollama", "llama3", Some(trace));
    let mut energy = 0.0;
    for r in &rs {
        let e = f(&r["energy_joules"]);
        let b = &r["battery"];
        assert!((f(&b["joules"]) - e).abs() < 1e-6, "{r}");
        assert_eq!(f(&b["share_percent"]), 100.0);
        assert!(
            (f(&b["wear"]) - e / 3.6e6 * 200.0 / 70.0).abs() < 1e-12,
            "{r}"
        );
        energy += e;
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let b = &summary["totals"]["battery"];
    assert!((f(&b["joules"]) - energy).abs() < 1e-6, "{summary}");
    assert!((f(&b["wear"]) - energy / 3.6e6 * 200.0 / 70.0).abs() < 1e-12);
    assert_eq!(b["currency"], "EUR");
}

#[test]
fn with_serve_running_openai_prompts_are_handed_to_its_ledger() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let upstream = Upstream::start(10);
    let serve = Serve::start(dir.path(), HUNDRED_WATTS, &["--interval", "100ms"]);
    // No trace for the profile itself: it must not sample, the running engine measures.
    let rs = profile(dir.path(), &upstream, "openai", "gpt-oss", None);
    for r in &rs {
        // SOURCES.md: the llama.cpp gpt-oss stream, usage 84 prompt and 57 completion tokens,
        // content "Olá!" after its reasoning.
        assert_eq!(
            (r["prompt_tokens"].as_u64(), r["completion_tokens"].as_u64()),
            (Some(84), Some(57))
        );
        assert_eq!(r["response"], "Olá!");
        each_query_is_100_w_over_its_window(r);
    }
    let ledger = serve.get("/v1/inference?limit=10");
    let ids: Vec<u64> = ledger["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["model"] == "gpt-oss")
        .filter_map(|r| r["id"].as_u64())
        .collect();
    assert_eq!(ids.len(), 3, "{ledger}");
    assert!(rs
        .iter()
        .all(|r| r["record_id"].as_u64().is_some_and(|id| ids.contains(&id))));
    // The running engine kept the profile: "Olá!" holds neither reference, so none is correct.
    let kept = serve.get("/v1/profiles");
    let p = &kept["profiles"][0];
    assert_eq!(
        (&p["model"], &p["eval"]),
        (&"gpt-oss".into(), &"prompts".into()),
        "{kept}"
    );
    assert_eq!(
        (&p["correct"], &p["incorrect"], &p["accuracy"]),
        (&0.into(), &2.into(), &0.0.into())
    );
    assert_eq!(p["joules_per_correct_answer"], serde_json::Value::Null);
}

#[test]
fn a_bad_prompts_file_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let upstream = Upstream::start(10);
    std::fs::write(
        dir.path().join("prompts.jsonl"),
        "{\"prompt\":\"ok\"}\n{\"id\":2}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args([
            "profile",
            "--model",
            "llama3",
            "--upstream",
            &upstream.url,
            "--prompts",
        ])
        .arg(dir.path().join("prompts.jsonl"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: no \"prompt\""));
    assert_eq!(upstream.stats()["requests"], 0);
}
