//! `/metrics`: the energy counter, the scope of each figure, promtool.

use super::*;

/// The headline's lifetime counter of a replayed whole-machine figure (the `system` scope).
fn energy_counter(metrics: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with("wattbar_energy_joules_total{domain=\"system\",scope=\"system\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no system energy counter in\n{metrics}"))
}

/// A series' value in a scrape, if it is there.
fn value_of(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scraped_energy_counter_is_already_in_the_file_so_a_crash_cannot_take_it_back() {
    // 3600 W sampled every 100 ms, a batch every 300 ms: the file always trails the samples.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let trace = parse_trace("t,watts\n0,3600\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
    let prefs = Preferences {
        interval_ms: 100,
        ..Preferences::default()
    };
    let mut config = EngineConfig::new(prefs).with_store(db.clone());
    config.batch_interval = Duration::from_millis(300);
    let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
    engine_sampled(&engine).await;
    let (mut seen, mut moved) = (Vec::new(), 0);
    for _ in 0..40 {
        let p = engine.current();
        let text = wattbar_serve::metrics::to_prometheus_text(&wattbar_serve::metrics::render(
            &p,
            wattbar_engine::unix_now(),
            None,
        ));
        // What a process started now would read: the committed file, after the scrape.
        let stored = wattbar_ledger::store::Store::open_read_only(&db)
            .and_then(|s| s.lifetime_by_scope())
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|(_, j)| j)
            .sum::<f64>();
        let unwritten = value_of(&text, "wattbar_energy_unwritten_joules ");
        if let Some(counter) = value_of(
            &text,
            "wattbar_energy_joules_total{domain=\"system\",scope=\"system\"}",
        ) {
            assert!(
                counter <= stored + 1e-9,
                "exported {counter} J, the file holds {stored} J"
            );
            // The part not yet written is a gauge of its own, and no more than a batch or so
            // (300 ms at 3600 W is 1080 J, with a sample's step on top).
            let unwritten = unwritten.unwrap_or_else(|| panic!("no unwritten gauge in\n{text}"));
            assert!((0.0..=3600.0 * 0.5).contains(&unwritten), "{unwritten} J");
            if seen.last().is_some_and(|last| counter > *last) {
                moved += 1;
            }
            seen.push(counter);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.windows(2).all(|w| w[1] >= w[0]), "{seen:?}");
    // Two seconds of batches every 300 ms: the counter moved with them.
    assert!(moved >= 3, "moved {moved} times: {seen:?}");
    engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_energy_counter_never_decreases_across_a_reset_and_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let server = Server::start("t,watts\n0,3600\n", Some(&db)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let first = energy_counter(&server.get("/metrics").await.body);
    assert!(first > 0.0);
    let reset = server.write("POST", "/v1/session/reset", "").await;
    assert_eq!(reset.status, 200, "{reset:?}");
    assert!(server.engine.current().energy.session.joules.0 < 3600.0 * 0.5);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after_reset = energy_counter(&server.get("/metrics").await.body);
    assert!(after_reset >= first, "{after_reset} < {first}");
    server.stop().await;
    let server = Server::start("t,watts\n0,3600\n", Some(&db)).await;
    let r = server.get("/metrics").await;
    let after_restart = energy_counter(&r.body);
    assert!(
        after_restart >= after_reset,
        "{after_restart} < {after_reset}"
    );
    assert!(r.head.contains("text/plain; version=0.0.4"), "{}", r.head);
    let om = server
        .send(
            "GET",
            "/metrics",
            &[
                ("Host", server.host()),
                (
                    "Accept",
                    "application/openmetrics-text;version=1.0.0".into(),
                ),
            ],
            b"",
        )
        .await;
    assert!(
        om.head.contains("application/openmetrics-text"),
        "{}",
        om.head
    );
    assert!(om.body.ends_with("# EOF\n"));
    assert!(om.body.contains("# TYPE wattbar_energy_joules counter"));
    let totals = server.get("/v1/totals").await.json();
    assert!(totals["lifetime_joules_by_scope"]["system"].as_f64() >= Some(after_reset));
    let history = server.get("/v1/history?range=1h").await.json();
    assert!(
        history["points"].as_array().is_some_and(|p| !p.is_empty()),
        "{history}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headline_summed_from_the_cpu_says_it_covers_the_cpu_package_only() {
    let server = Server::start("t,watts,domain\n0,60,cpu\n", None).await;
    wait_until_sampled(&server).await;
    let j = server.get("/v1/snapshot").await.json();
    // Filed under "system" as the headline, yet it is the CPU package's 60 W and no more.
    assert_eq!(j["watts"], 60.0, "{j}");
    assert_eq!(j["scope"], "components", "{j}");
    assert_eq!(j["covers"], serde_json::json!(["cpu-package"]), "{j}");
    assert_eq!(j["scope_text"], "the CPU package only", "{j}");
    let cpu = j["breakdown"]
        .as_array()
        .and_then(|b| b.iter().find(|r| r["domain"] == "cpu"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(cpu["scope"], "components", "{j}");
    assert_eq!(cpu["covers"], serde_json::json!(["cpu-package"]), "{j}");
    let metrics = server.get("/metrics").await.body;
    server.stop().await;
    for domain in ["system", "cpu"] {
        let line = format!(
            "wattbar_power_watts{{domain=\"{domain}\",device=\"\",source=\"replay\",\
             quality=\"measured\",scope=\"components\"}} 60"
        );
        assert!(metrics.contains(&line), "{line} missing from\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_scrape_passes_promtool_check_metrics() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start("t,watts\n0,25\n", Some(&dir.path().join("w.db"))).await;
    wait_until_sampled(&server).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let metrics = server.get("/metrics").await.body;
    server.stop().await;
    for name in [
        "wattbar_power_watts{",
        "wattbar_energy_joules_total{",
        "wattbar_cost_total{currency=\"EUR\",scope=\"system\"}",
        "wattbar_low_power_mode 0",
        "wattbar_sample_age_seconds ",
        "wattbar_source_up{source=\"replay\"} 1",
        "wattbar_self_cpu_seconds_total ",
        "wattbar_self_resident_bytes ",
        "wattbar_source_read_seconds_total{source=\"replay\"} ",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
    // Sampled at once and then every 200 ms for at least 600 ms: the replay was read each time.
    let reads = metrics
        .lines()
        .find_map(|l| l.strip_prefix("wattbar_source_reads_total{source=\"replay\"} "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(reads.is_some_and(|n| n >= 3), "{reads:?}\n{metrics}");
    assert!(metrics.contains(
        "wattbar_power_watts{domain=\"system\",device=\"\",source=\"replay\",quality=\"measured\",scope=\"system\"} 25"
    ));
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool is needed (scripts/setup installs it): {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(metrics.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}\n{metrics}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
