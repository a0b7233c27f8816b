//! Many machines as an admin runs them: two `wattbar-cli serve` on replayed traces, scraped every
//! second by Debian's real `prometheus` with the committed rules (`packaging/prometheus/wattbar.yml`,
//! as they are: 1 min windows, so the test waits for one to fill, about 70 s). Each host's watts
//! rule must match that host's own ledger over the rule's window, the J/token rule each host's
//! own inference record, and the Grafana dashboard (`packaging/grafana/wattbar.json`) must pass
//! Grafana's own schema and every query of it answer with data. Then `wattbar-cli fleet`, once
//! from each host's API and once from Prometheus, with a third host stopped: both give the same
//! figures, and the stopped host is down and left out of the total.

use crate::common::prometheus::{num, Prometheus};
use crate::common::{repo_root, Serve};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A 1 min rate over 1 s scrapes: the rule's sample at T covers the 60 s before it.
const WINDOW_S: f64 = 60.0;
const MODEL: &str = "fleet-model";

/// `host:port` of a serve, the `instance` label Prometheus gives it.
fn instance(serve: &Serve) -> String {
    serve.url.trim_start_matches("http://").to_string()
}

/// `POST /v1/inference` with the serve's token: `tokens` completion tokens at 20 tokens/s, ending
/// 0.2 s before its last sample. Answers the record.
fn record_inference(serve: &Serve, data: &Path, tokens: u64) -> serde_json::Value {
    let token = crate::common::api_token(data);
    let now = num(&serve.get("/v1/snapshot")["at"]);
    let body = serde_json::json!({
        "model": MODEL, "completion_tokens": tokens, "tokens_per_second": 20.0, "end": now - 0.2
    });
    serve
        .client()
        .with_token(&token)
        .post("/v1/inference", Some(&body))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Every query expression of every panel, rows' panels included, with the panel's title.
fn dashboard_queries(panels: &[serde_json::Value], out: &mut Vec<(String, String)>) {
    for p in panels {
        let title = p["title"].as_str().unwrap_or_default().to_string();
        for t in p["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if let Some(expr) = t["expr"].as_str() {
                out.push((title.clone(), expr.to_string()));
            }
        }
        if let Some(inner) = p["panels"].as_array() {
            dashboard_queries(inner, out);
        }
    }
}

#[test]
fn two_hosts_in_prometheus_the_rules_match_each_ledger_and_every_dashboard_query_answers() {
    let started = Instant::now();
    let dir_a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir_b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir_p = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A: a constant 60 W. B: 100 W for 25 s, then 200 W for 25 s, looping: a 50 s period, so the
    // mean of a 60 s window depends on where it lies and the rule must cover the ledger's window.
    let a = Serve::start(dir_a.path(), "t,watts\n0,60\n", &["--interval", "100ms"]);
    let b = Serve::start(
        dir_b.path(),
        "t,watts\n0,100\n25,200\n",
        &["--interval", "100ms"],
    );
    let hosts = [(&a, dir_a.path()), (&b, dir_b.path())];
    // C: 40 W, scraped, then stopped before the fleet view looks.
    let dir_c = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let c = Serve::start(dir_c.path(), "t,watts\n0,40\n", &["--interval", "100ms"]);
    let instance_c = instance(&c);

    let rules = repo_root().join("packaging/prometheus/wattbar.yml");
    let rules = rules
        .canonicalize()
        .unwrap_or_else(|e| panic!("{rules:?}: {e}"));
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_else(|e| panic!("{e}"));
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: wattbar\n    static_configs:\n      - targets: [{}, {}, {}]\n",
        quoted(&rules.display().to_string()),
        quoted(&instance(&a)),
        quoted(&instance(&b)),
        quoted(&instance_c),
    );
    let prom = Prometheus::start(dir_p.path(), &config);
    prom.wait_for(
        r#"wattbar_energy_joules_total{job="wattbar",domain="system"}"#,
        3,
        Duration::from_secs(20),
    );

    // One inference record on each host; once Prometheus holds its counters, a second one: the
    // J/token rule (an increase over 1 h) is then the second record's energy over its tokens.
    for (serve, data) in hosts {
        record_inference(serve, data, 40);
    }
    prom.wait_for(
        &format!(r#"wattbar_inference_tokens_total{{model="{MODEL}",kind="completion"}} == 40"#),
        2,
        Duration::from_secs(20),
    );
    let second: Vec<serde_json::Value> = hosts
        .iter()
        .map(|(serve, data)| record_inference(serve, data, 60))
        .collect();

    // (a) Watts: the rule's last sample at T against the ledger over [T - 60 s, T], once the
    // window starts after the host's first scrape.
    for (serve, _) in hosts {
        let inst = instance(serve);
        let counter =
            format!(r#"wattbar_energy_joules_total{{domain="system",instance="{inst}"}}"#);
        let first_scrape = prom
            .samples(&counter, "5m")
            .first()
            .map(|s| s.0)
            .unwrap_or_else(|| panic!("{inst} was never scraped"));
        let rule = format!(r#"instance:wattbar_power_watts:rate1m{{instance="{inst}"}}"#);
        let deadline = Instant::now() + Duration::from_secs(120);
        let (t, watts) = loop {
            let last = prom.samples(&rule, "10s").last().copied();
            if let Some((t, w)) = last {
                if t - WINDOW_S > first_scrape + 1.0 {
                    break (t, w);
                }
            }
            assert!(
                Instant::now() < deadline,
                "{rule}: no full window yet: {last:?}, first scrape at {first_scrape}"
            );
            std::thread::sleep(Duration::from_millis(500));
        };
        let ledger = serve.get(&format!("/v1/energy?from={}&to={t}", t - WINDOW_S));
        assert!(num(&ledger["covered_fraction"]) > 0.98, "{inst}: {ledger}");
        let mean = num(&ledger["mean_watts"]);
        eprintln!(
            "{inst}: rule {watts:.3} W, ledger {mean:.3} W over [{}, {t}]",
            t - WINDOW_S
        );
        assert!(
            (watts - mean).abs() <= 0.02 * mean,
            "{inst}: the rule says {watts} W, the ledger {mean} W over the same minute: {ledger}"
        );
        assert!((59.0..=201.0).contains(&mean), "{inst}: {ledger}");
    }

    // J per token: each host's second record.
    for ((serve, _), record) in hosts.iter().zip(&second) {
        let inst = instance(serve);
        let want = num(&record["energy_joules"]) / 60.0;
        assert!(want > 0.0, "{record}");
        let expr = format!(
            r#"instance_model:wattbar_inference_joules_per_token:increase1h{{instance="{inst}",model="{MODEL}"}}"#
        );
        let got = num(&prom.wait_for(&expr, 1, Duration::from_secs(10))[0]["value"][1]);
        eprintln!("{inst}: rule {got:.4} J/token, record {want:.4} J/token");
        assert!(
            (got - want).abs() <= 0.01 * want,
            "{inst}: the rule says {got} J/token, the record {want}: {record}"
        );
    }

    // (b) Every query of the dashboard, as Grafana would send it with both hosts selected.
    let path = repo_root().join("packaging/grafana/wattbar.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let dashboard: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert_grafana_schema(&path, &dashboard);
    let both = format!("({}|{})", instance(&a), instance(&b));
    let host_var = dashboard["templating"]["list"]
        .as_array()
        .and_then(|l| l.iter().find(|v| v["name"] == "host"))
        .unwrap_or_else(|| panic!("the dashboard has no `host` variable"));
    let definition = host_var["query"]["query"]
        .as_str()
        .or_else(|| host_var["query"].as_str())
        .unwrap_or_else(|| panic!("{host_var}"));
    // label_values(METRIC, LABEL): the hosts Grafana lists.
    let (metric, label) = definition
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .and_then(|s| s.split_once(','))
        .map(|(m, l)| (m.trim(), l.trim()))
        .unwrap_or_else(|| panic!("{definition}"));
    let listed: Vec<String> = prom
        .query(&format!("group by ({label}) ({metric})"))
        .iter()
        .filter_map(|s| s["metric"][label].as_str().map(str::to_string))
        .collect();
    for (serve, _) in hosts {
        assert!(listed.contains(&instance(serve)), "{listed:?}");
    }

    let mut queries = Vec::new();
    dashboard_queries(
        dashboard["panels"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default(),
        &mut queries,
    );
    assert!(queries.len() >= 10, "{queries:?}");
    for (title, expr) in &queries {
        let mut e = expr.clone();
        for (var, value) in [
            ("${host}", both.as_str()),
            ("$host", both.as_str()),
            ("$__rate_interval", "1m"),
            ("$__interval", "15s"),
            ("$__range", "1h"),
        ] {
            e = e.replace(var, value);
        }
        assert!(!e.contains('$'), "{title}: a variable is left in {e}");
        let result = prom.query(&e);
        assert!(!result.is_empty(), "{title}: no data for {e}");
    }
    eprintln!("{} dashboard queries answered", queries.len());

    // (c) The fleet view, with C stopped.
    let (status, _) = c.terminate();
    assert!(status.success(), "{status}");
    prom.wait_for(
        &format!(r#"up{{instance="{instance_c}"}} == 0"#),
        1,
        Duration::from_secs(20),
    );
    let everyone = [instance(&a), instance(&b), instance_c.clone()].join(",");
    let asked = Instant::now();
    let direct = fleet(dir_p.path(), &["--hosts", &everyone, "--timeout", "2s"]);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "a stopped host held the view past its timeout: {:?}",
        asked.elapsed()
    );
    let scraped = fleet(dir_p.path(), &["--prometheus", &prom.url]);
    for view in [&direct, &scraped] {
        assert_eq!(view["hosts_up"], 2, "{view}");
        assert_eq!(view["hosts_total"], 3, "{view}");
        let row = |inst: &str| {
            view["hosts"]
                .as_array()
                .and_then(|h| h.iter().find(|r| r["host"] == inst))
                .cloned()
                .unwrap_or_else(|| panic!("{inst} is not in {view}"))
        };
        let down = row(&instance_c);
        assert_eq!(down["health"], "down", "{view}");
        assert!(
            down["watts"].is_null(),
            "a stopped host is no figure, not 0 W: {view}"
        );
        let (wa, wb) = (
            num(&row(&instance(&a))["watts"]),
            num(&row(&instance(&b))["watts"]),
        );
        assert_eq!(wa, 60.0, "{view}");
        assert!(wb == 100.0 || wb == 200.0, "{view}");
        // The total is the healthy hosts' sum, exactly.
        assert_eq!(num(&view["total_watts"]), wa + wb, "{view}");
        for inst in [instance(&a), instance(&b)] {
            let r = row(&inst);
            assert_eq!(r["health"], "up", "{view}");
            assert_eq!(r["scope"], "system", "{view}");
            assert_eq!(r["quality"], "measured", "{view}");
            assert!(r["low_power"].is_boolean(), "{view}");
        }
    }
    // Today's energy: the same store's figure, read a few seconds apart (at most 200 W more
    // per second between the two views, and a scrape and a batch behind).
    let apart = num(&scraped["at"]) - num(&direct["at"]);
    for inst in [instance(&a), instance(&b)] {
        let kwh = |view: &serde_json::Value| {
            view["hosts"]
                .as_array()
                .and_then(|h| h.iter().find(|r| r["host"] == inst.as_str()))
                .map(|r| num(&r["today_kwh"]))
                .unwrap_or(f64::NAN)
        };
        let low_power = |view: &serde_json::Value| {
            view["hosts"]
                .as_array()
                .and_then(|h| h.iter().find(|r| r["host"] == inst.as_str()))
                .map(|r| r["low_power"].clone())
        };
        assert_eq!(low_power(&direct), low_power(&scraped), "{inst}");
        let (d, p) = (kwh(&direct), kwh(&scraped));
        let slack = 200.0 * (apart.abs() + 1.0 + 0.5) / 3.6e6;
        eprintln!("{inst}: today {d:.6} kWh from its API, {p:.6} kWh from Prometheus");
        assert!(
            d > 0.0 && (d - p).abs() <= slack,
            "{inst}: {d} against {p} kWh"
        );
    }
    let table = String::from_utf8_lossy(
        &crate::common::cli(dir_p.path())
            .args([
                "fleet",
                "--hosts",
                &everyone,
                "--count",
                "1",
                "--timeout",
                "2s",
            ])
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
            .stdout,
    )
    .into_owned();
    assert!(table.contains("2 of 3 hosts up"), "{table}");
    assert!(table.contains("down: "), "{table}");
    eprintln!("{table}{:.0} s in all", started.elapsed().as_secs_f64());
}

/// `tests/grafana/check-dashboard.mjs`: the dashboard against Grafana's own dashboard and panel
/// types (`@grafana/schema`, checked by the TypeScript compiler); and a copy with one field of the
/// wrong type, which it must refuse.
fn assert_grafana_schema(path: &Path, dashboard: &serde_json::Value) {
    let check = |file: &Path| {
        Command::new("node")
            .arg(repo_root().join("tests/grafana/check-dashboard.mjs"))
            .arg(file)
            .output()
            .unwrap_or_else(|e| panic!("node: {e}"))
    };
    let out = check(path);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(summary["valid"], true, "{summary}");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broken = dir.path().join("broken.json");
    let mut wrong = dashboard.clone();
    wrong["schemaVersion"] = serde_json::json!("39");
    std::fs::write(&broken, wrong.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let out = check(&broken);
    assert_eq!(out.status.code(), Some(1), "a string schemaVersion passed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("schemaVersion"));
}

/// One refresh of `wattbar-cli fleet ARGS --json`.
fn fleet(data: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["fleet", "--json", "--count", "1"];
    all.extend_from_slice(args);
    let out = crate::common::run_cli(data, &all);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}
