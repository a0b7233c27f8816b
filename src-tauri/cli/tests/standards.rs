//! `profile --report standards` as a user runs it: SmolLM2 on llama.cpp's real `llama-server`
//! over GSM8K's first 20 questions (the shared capture, read in place), on a replayed 100 W
//! machine, with a carbon feed in the GB Carbon Intensity API's shape at 200 g/kWh. Every figure
//! is worked again here from the run's own records.

use crate::common::model_server::ModelServer;
use crate::common::{assert_ok, cli, repo_root};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    } else {
        v[n / 2]
    }
}

#[test]
fn smollm2_on_gsm8k_in_each_leaderboards_units_worked_from_its_records() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let now = wattbar_engine::unix_now();
    let from = (now / 1800.0).floor() * 1800.0;
    let iso = |t: f64| {
        chrono::DateTime::from_timestamp(t as i64, 0)
            .map(|d| d.format("%Y-%m-%dT%H:%MZ").to_string())
            .unwrap_or_default()
    };
    // 200 g in every half-hour from the one in force: a run across a boundary reads the same.
    let periods: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            let start = from + f64::from(i) * 1800.0;
            serde_json::json!({"from": iso(start), "to": iso(start + 1800.0),
                               "intensity": {"forecast": 200, "index": "moderate"}})
        })
        .collect();
    let url = crate::prices::serve_once(serde_json::json!({"data": {"regionid": 12,
        "shortname": "South West England", "postcode": "BS7", "data": periods}}));
    std::fs::write(
        dir.path().join("preferences.json"),
        serde_json::json!({"carbon_feed": {"source": "gb-carbon-intensity", "postcode": "BS7",
                                          "url": url}})
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("trace.csv"), "t,watts\n0,100\n1,100\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let server = ModelServer::llama();
    let gsm8k = repo_root().join("../shared/fixtures/evals/gsm8k-test-first40.jsonl");
    let out = dir.path().join("out");
    let mut c = cli(dir.path());
    c.env("WATTBAR_REPLAY", dir.path().join("trace.csv"))
        .args([
            "profile", "--model", "smollm2", "--api", "openai", "--format", "gsm8k",
        ])
        .args([
            "--max",
            "20",
            "--max-tokens",
            "64",
            "--idle",
            "2s",
            "--report",
            "standards",
        ])
        .args(["--upstream", &server.url])
        .arg("--prompts")
        .arg(&gsm8k)
        .arg("--out")
        .arg(&out);
    let ran = c.output().unwrap_or_else(|e| panic!("{e}"));
    assert_ok(&ran);
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(said.contains("by the standards' definitions"), "{said}");

    let records: Vec<serde_json::Value> = std::fs::read_to_string(out.join("records.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(records.len(), 20);
    let energy: f64 = records.iter().map(|r| f(&r["energy_joules"])).sum();
    let bound: f64 = records.iter().map(|r| f(&r["energy_bound_joules"])).sum();
    let tokens: f64 = records.iter().map(|r| f(&r["completion_tokens"])).sum();
    let grams: f64 = records.iter().map(|r| f(&r["carbon_g"])).sum();
    let correct = records.iter().filter(|r| r["verdict"] == "correct").count() as f64;
    let accuracy = correct / 20.0;
    let mean_watts = records.iter().map(|r| f(&r["mean_watts"])).sum::<f64>() / 20.0;
    let itl = median(records.iter().map(|r| f(&r["itl_seconds"])).collect());
    // Each record's grams are its energy at 200 g/kWh, the feed's slot.
    for r in &records {
        let want = f(&r["energy_joules"]) / 3.6e6 * 200.0;
        assert!((f(&r["carbon_g"]) - want).abs() < 1e-12, "{r}");
    }

    let figures: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(out.join("standards.json")).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let figure = |name: &str| -> &serde_json::Value {
        figures
            .iter()
            .find(|x| x["figure"] == name)
            .unwrap_or_else(|| panic!("no {name}: {figures:?}"))
    };
    let close = |name: &str, want: f64| {
        let got = f(&figure(name)["value"]);
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{name}: {got} against {want} worked from the records"
        );
    };
    close("J per response", energy / 20.0);
    assert!((f(&figure("J per response")["bound"]) - bound / 20.0).abs() < 1e-9);
    close("J per output token", energy / tokens);
    close("median inter-token latency, ms", itl * 1000.0);
    close("gCO₂e per output token", grams / tokens);
    if correct > 0.0 {
        close("accuracy per joule", accuracy / (energy / 20.0));
        close("accuracy per watt", accuracy / mean_watts);
    } else {
        assert_eq!(figure("accuracy per joule")["value"], 0.0);
    }
    for r in [figure("J per response"), figure("gCO₂e per output token")] {
        assert_eq!(
            (&r["scope"], &r["quality"]),
            (&"system".into(), &"measured".into())
        );
    }
    // The replayed machine is the whole machine: no GPU alone, no plug.
    let aes = figure("GPU Wh per 1,000 queries");
    assert_eq!(aes["value"], serde_json::Value::Null);
    assert_eq!(
        aes["why"],
        "it counts the GPU's energy alone; this run measured system"
    );
    assert_eq!(
        figure("J per query at the wall")["value"],
        serde_json::Value::Null
    );
    assert!(figure("J per output token")["source"]
        .as_str()
        .is_some_and(|s| s.contains("ml.energy")));

    // The ledger kept the profile whole: `models --standards` gives the same figures.
    let listed: serde_json::Value = serde_json::from_str(&crate::common::run_cli(
        dir.path(),
        &["models", "--standards", "--json"],
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let kept = &listed["models"][0];
    assert_eq!(kept["model"], "smollm2");
    assert_eq!(kept["eval"], "gsm8k-test-first40 (first 20)");
    // The same figures, each number to the last digit JSON keeps (serde_json reads a float
    // back within one unit in the last place).
    let again = kept["figures"]
        .as_array()
        .unwrap_or_else(|| panic!("no figures: {listed}"));
    assert_eq!(again.len(), figures.len());
    for (a, b) in again.iter().zip(&figures) {
        for key in ["standard", "figure", "scope", "quality", "why", "source"] {
            assert_eq!(a[key], b[key], "{key}: {a} against {b}");
        }
        for key in ["value", "bound"] {
            match (a[key].as_f64(), b[key].as_f64()) {
                (Some(x), Some(y)) => assert!((x - y).abs() <= 1e-12 * y.abs(), "{a} against {b}"),
                _ => assert_eq!(a[key], b[key], "{key}: {a} against {b}"),
            }
        }
    }
}
