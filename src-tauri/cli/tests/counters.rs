//! The lifetime counters as Prometheus and an OTLP backend build on them, through crashes: a
//! `serve` on a replayed 100 W machine, scraped every second by Debian's real `prometheus` and
//! pushing to an OTLP receiver every second, is killed -9 ten times at moments drawn from a fixed
//! seed, and started again on the same data folder each time.
//!
//! The price feed gives +50 EUR/MWh for the first 25 s, then -50 (a sunny Sunday in DE), so
//! money is paid, then credited; one run resets its session. The headline changes scope every
//! 2 s: 100 W measured for the whole system, then 100 W on the CPU package alone (as a plug
//! that drops out leaves the sensors), so every counter kept per scope is checked too; the
//! machine runs on mains in the first scope and on a 70 Wh battery in the second, so the
//! battery's wear counter grows too. Each run
//! proxies a model server (the genuine Ollama captures, `tests/llm/upstream.mjs`) whose
//! `/api/ps` holds gemma3 loaded and idle; the ledger starts with its idle draw measured (10 W
//! with nothing loaded, 30 W with gemma3), so its resident idle energy grows at 20 W. Each run
//! also follows a model server by its own `/metrics` (a llama.cpp stand-in whose counters grow
//! by 10 prompt and 50 completion tokens a scrape), in windows of 1 s. Each run sends one
//! request through the proxy on a key that only counts, and one on a key whose budget holds
//! nothing (refused), so the keys' counters are followed too.
//!
//! What must hold: no scraped, pushed or published value of any counter ever goes down: every
//! `_total` series Prometheus scraped, found by enumeration (so a counter added later is checked
//! without editing this test), has `resets()` 0 and no sample below the one before it; so does
//! every cumulative sum pushed over OTLP under one start time, and every MQTT field that Home
//! Assistant's discovery calls `total_increasing` (Debian's mosquitto, read by `mosquitto_sub`),
//! never sent as `-0.0`. `increase()` of
//! the energy over the whole run is at most the energy drawn, and loses at most one batch per
//! kill; every push carries the same start time.
//!
//! Each run binds port 0; Prometheus scrapes one fixed target, a forwarder of the test's own
//! (also on port 0) that passes each scrape to whichever run is up, its `Host` named as the API
//! requires. Prometheus' own service discovery would take up to 5 s to follow a new port, longer
//! than most runs here live.

use crate::common::prometheus::{num, Prometheus};
use crate::common::{cli, Serve, Upstream};
use crate::mqtt::{Broker, Message, Subscriber, PREFIX};
use crate::otlp::Receiver;
use std::io::{copy, BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattbar_serve::metrics::documented::{documented_series, undocumented};
use wattbar_serve::metrics::SINCE_START_COUNTERS;

const WATTS: f64 = 100.0;
const KILLS: usize = 10;
/// The batch interval: long enough that a scrape often sees energy not yet written, as a
/// default 10 s batch does.
const BATCH_S: f64 = 2.0;
/// The sampling period asked for.
const PERIOD_S: f64 = 0.1;

/// The headline's energy, as Prometheus selects it: one series per scope.
const ENERGY: &str = "wattbar_energy_joules_total{domain=\"system\"}";
/// Seconds in each scope before the headline changes to the other.
const SCOPE_S: f64 = 2.0;
/// Counters that must be among those found: a run that exported none of them checked nothing.
const EXPECTED: [&str; 11] = [
    "wattbar_energy_joules_total",
    "wattbar_cost_total",
    "wattbar_credit_total",
    "wattbar_battery_wear_cost_total",
    "wattbar_inference_requests_total",
    "wattbar_inference_energy_joules_total",
    "wattbar_model_resident_idle_joules_total",
    "wattbar_server_tokens_total",
    "wattbar_server_energy_joules_total",
    "wattbar_key_energy_joules_total",
    "wattbar_key_requests_total",
];
/// EUR per MWh in every slot of the test's price feed.
const NEGATIVE_EUR_PER_MWH: f64 = -50.0;

/// A fixed sequence in [0, 1): the kill moments are the same at every run of the test.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A TCP forwarder on a loopback port of its own, to the address it is told; its threads end
/// with the test's process.
struct Forwarder {
    address: String,
    to: Arc<Mutex<String>>,
}

impl Forwarder {
    fn start() -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let address = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let to = Arc::new(Mutex::new(String::new()));
        let target = Arc::clone(&to);
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let to = target.lock().map(|t| t.clone()).unwrap_or_default();
                std::thread::spawn(move || {
                    // A run that is down refuses: the scrape fails, as it would without us.
                    let Ok(server) = TcpStream::connect(&to) else {
                        return;
                    };
                    let (Ok(c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
                        return;
                    };
                    // Scrapes are GETs with no body: each request is its header lines.
                    let up = std::thread::spawn(move || {
                        for line in BufReader::new(c2).lines().map_while(Result::ok) {
                            let line = if line.to_ascii_lowercase().starts_with("host:") {
                                format!("Host: {to}")
                            } else {
                                line
                            };
                            if write!(s2, "{line}\r\n").is_err() {
                                break;
                            }
                        }
                        let _ = s2.shutdown(Shutdown::Write);
                    });
                    let (mut c, mut s) = (client, server);
                    let _ = copy(&mut s, &mut c);
                    let _ = c.shutdown(Shutdown::Both);
                    let _ = up.join();
                });
            }
        });
        Forwarder { address, to }
    }

    fn to(&self, serve: &Serve) {
        if let Ok(mut to) = self.to.lock() {
            *to = serve.url.trim_start_matches("http://").to_string();
        }
    }
}

/// A price feed in Energy-Charts' shape of 5-minute slots: +50 EUR/MWh until 25 s from now,
/// then [`NEGATIVE_EUR_PER_MWH`] for two hours; its address. A net cost would rise, then fall.
fn feed_turning_negative() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    let turn = now.floor() + 25.0;
    let starts: Vec<f64> = (-2..24).map(|i| turn + f64::from(i) * 300.0).collect();
    let prices: Vec<f64> = starts
        .iter()
        .map(|s| {
            if *s < turn {
                -NEGATIVE_EUR_PER_MWH
            } else {
                NEGATIVE_EUR_PER_MWH
            }
        })
        .collect();
    crate::prices::serve_once(
        serde_json::json!({"unix_seconds": starts, "price": prices, "unit": "EUR / MWh"}),
    )
}

/// Where each run reports beyond the machine.
struct Outside<'a> {
    receiver: &'a Receiver,
    forwarder: &'a Forwarder,
    broker: &'a Broker,
    upstream: &'a Upstream,
    /// The followed model server's `/metrics`.
    server: &'a str,
}

fn start(data: &Path, to: &Outside) -> Serve {
    let trace = data.join("trace.csv");
    std::fs::write(
        &trace,
        format!(
            "t,watts,domain,on_battery,battery_design_wh\n0,{WATTS},system,0,70\n\
             {SCOPE_S},{WATTS},cpu,1,70\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(data);
    c.env("WATTBAR_REPLAY", &trace)
        .env("WATTBAR_SERVER_METRICS_WINDOW_MS", "1000")
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "100ms"])
        .args(["--batch", &format!("{BATCH_S}s")])
        .args([
            "--otlp-endpoint",
            &to.receiver.url(),
            "--otlp-interval",
            "1s",
        ])
        .args(["--mqtt", &format!("mqtt://127.0.0.1:{}", to.broker.port)])
        .args(["--mqtt-topic-prefix", PREFIX, "--mqtt-interval", "1s"])
        .args([
            "--llm-proxy",
            "127.0.0.1:0",
            "--llm-upstream",
            &to.upstream.url,
        ])
        .args(["--server-metrics", to.server]);
    let serve = Serve::spawn(c);
    to.forwarder.to(&serve);
    serve
}

/// The state fields Home Assistant's discovery documents among `messages` call
/// `total_increasing`, by their template's `value_json.FIELD`.
fn total_increasing_fields(messages: &[Message]) -> Vec<String> {
    let mut fields: Vec<String> = messages
        .iter()
        .filter(|m| m.topic.starts_with("homeassistant/") && m.topic.ends_with("/config"))
        .filter_map(|m| serde_json::from_str::<serde_json::Value>(&m.payload).ok())
        .filter(|doc| doc["state_class"] == "total_increasing")
        .filter_map(|doc| {
            let template = doc["value_template"].as_str()?;
            let field = template.split("value_json.").nth(1)?;
            Some(field.trim_end_matches(['}', ' ']).to_string())
        })
        .collect();
    fields.sort();
    fields.dedup();
    fields
}

/// Through the proxy: a request on a key that only counts (a record charged to it), one on a
/// key whose budget holds nothing (429, counted as refused).
fn keyed_requests(serve: &Serve, counted: &str, tight: &str) {
    use crate::common::{http, Answer};
    let proxy = serve.proxy();
    for (secret, status) in [(counted, 200), (tight, 429)] {
        let answer = http()
            .post(&format!("{proxy}/api/generate"))
            .header("Authorization", &format!("Bearer {secret}"))
            .send_json(serde_json::json!({"model": "gemma3", "prompt": "x", "stream": false}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.code(), status);
    }
}

/// `wattbar-cli key add ARGS` with no engine running; the secret.
fn add_key(data: &Path, args: &[&str]) -> String {
    let mut all = vec!["key", "add"];
    all.extend_from_slice(args);
    let made: serde_json::Value =
        serde_json::from_str(&crate::common::run_cli(data, &all)).unwrap_or_default();
    made["secret"].as_str().unwrap_or_default().to_string()
}

/// A record for work the client measured, ending just before the last sample.
fn post_record(serve: &Serve, data: &Path) -> bool {
    let now = serve.get("/v1/snapshot")["at"].as_f64().unwrap_or(0.0);
    let body = serde_json::json!({
        "model": "crash-model", "completion_tokens": 10, "tokens_per_second": 20.0,
        "end": now - 0.2
    });
    serve
        .client()
        .with_token(&crate::common::api_token(data))
        .post("/v1/inference", Some(&body))
        .is_ok()
}

fn assert_never_decreases(what: &str, samples: &[(f64, f64)]) {
    for pair in samples.windows(2) {
        assert!(
            pair[1].1 >= pair[0].1,
            "{what} went down from {} at {} to {} at {}",
            pair[0].1,
            pair[0].0,
            pair[1].1,
            pair[1].0
        );
    }
}

#[test]
fn ten_kill_9s_never_take_back_a_counter_prometheus_or_otlp_saw() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let forwarder = Forwarder::start();
    let prom = Prometheus::start(
        dir.path(),
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: wattbar\n    static_configs:\n      - targets: ['{}']\n",
            forwarder.address
        ),
    );
    let receiver = Receiver::start(0);
    let broker = Broker::start(dir.path(), None);
    let mut subscriber = Subscriber::start(broker.port);
    let upstream = Upstream::start(0);
    let server = crate::server_metrics::busy_llama_server();
    let outside = Outside {
        receiver: &receiver,
        forwarder: &forwarder,
        broker: &broker,
        upstream: &upstream,
        server: &server,
    };
    // The idle draw an earlier engine measured: 10 W with nothing loaded, 30 W with gemma3.
    crate::common::seed_resident(data.path(), &[("", 10.0), ("gemma3:latest", 30.0)], &[]);
    let prefs = serde_json::json!({
        "price_feed": {"source": "energy-charts", "bzn": "DE-LU", "url": feed_turning_negative()},
        "battery_price": 200.0
    });
    std::fs::write(data.path().join("preferences.json"), prefs.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let counted = add_key(data.path(), &["counted"]);
    let tight = add_key(data.path(), &["tight", "--budget", "1J/day"]);
    let mut draws = Draws(48);
    // What each killed run had drawn by its last read, and the most it can have drawn after.
    let (mut drawn, mut slack) = (0.0, 0.0);
    let mut posted = 0u64;
    for kill in 0..=KILLS {
        let mut serve = start(data.path(), &outside);
        let life = Duration::from_secs_f64(2.5 + 4.0 * draws.next());
        let until = Instant::now() + life;
        if kill % 2 == 0 && post_record(&serve, data.path()) {
            posted += 1;
        }
        keyed_requests(&serve, &counted, &tight);
        if kill == 3 {
            // A session reset halfway: what the session held is drawn, and it starts again.
            std::thread::sleep(Duration::from_secs(1));
            let read = Instant::now();
            let session = session_joules(&serve);
            let reset = serve
                .client()
                .with_token(&crate::common::api_token(data.path()))
                .post("/v1/session/reset", None);
            assert!(reset.is_ok(), "{reset:?}");
            drawn += session;
            slack += WATTS * (read.elapsed().as_secs_f64() + PERIOD_S);
        }
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        if kill == KILLS {
            // Every family exported (keys, the feed, the servers, residency among them) is in
            // the docs' list, with its type and labels.
            let listed = documented_series(include_str!("../../../docs/api.md"))
                .unwrap_or_else(|e| panic!("docs/api.md: {e}"));
            let exposition = serve.text("/metrics");
            for expected in EXPECTED {
                let family = format!("# TYPE {expected} counter");
                assert!(exposition.contains(&family), "{family} in {exposition}");
            }
            let problems = undocumented(&exposition, &listed);
            assert!(
                problems.is_empty(),
                "docs/api.md's Metrics series and /metrics differ: {problems:#?}"
            );
            // The last run ends cleanly: everything it measured is written.
            let session = session_joules(&serve);
            // Prometheus scrapes the last batch before the stop.
            std::thread::sleep(Duration::from_secs(2));
            let session_after = session_joules(&serve);
            let (status, _) = serve.terminate();
            assert!(status.success());
            drawn += session;
            slack += session_after - session + WATTS * 1.0;
            break;
        }
        let before = Instant::now();
        let session = session_joules(&serve);
        serve.child.kill().unwrap_or_else(|e| panic!("{e}"));
        let _ = serve.child.wait();
        drawn += session;
        // Between the read and the kill: that time at 100 W, and a sample's step.
        slack += WATTS * (before.elapsed().as_secs_f64() + PERIOD_S);
    }
    let ran = started.elapsed().as_secs_f64();
    // Prometheus has scraped everything it will.
    std::thread::sleep(Duration::from_secs(2));
    let range = format!("{}s", ran.ceil() as u64 + 10);

    // Every counter Prometheus scraped, found by its name: none ever went back.
    let every = prom.query(&format!(
        "{{__name__=~\".+_total\",job=\"wattbar\"}}[{range}]"
    ));
    let mut names: Vec<String> = every
        .iter()
        .filter_map(|s| s["metric"]["__name__"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.dedup();
    for expected in EXPECTED {
        assert!(
            names.iter().any(|n| n == expected),
            "no {expected} in {names:?}"
        );
    }
    let since_start = |name: &str| SINCE_START_COUNTERS.contains(&name);
    for series in &every {
        let name = series["metric"]["__name__"].as_str().unwrap_or_default();
        let samples: Vec<(f64, f64)> = series["values"]
            .as_array()
            .map(|v| v.iter().map(|p| (num(&p[0]), num(&p[1]))).collect())
            .unwrap_or_default();
        if since_start(name) {
            // A process's own count starts again with the process: at most once per restart.
            let drops = samples.windows(2).filter(|w| w[1].1 < w[0].1).count();
            assert!(drops <= KILLS, "{}: {drops} drops", series["metric"]);
        } else {
            assert_never_decreases(&series["metric"].to_string(), &samples);
        }
    }
    // resets() drops the name: asked one name at a time, so no two series share a label set.
    let resets: Vec<String> = names
        .iter()
        .filter(|name| !since_start(name))
        .flat_map(|name| {
            prom.query(&format!("resets({name}[{range}]) > 0"))
                .iter()
                .map(|s| format!("{name}{}", s["metric"]))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(resets.is_empty(), "Prometheus saw resets: {resets:?}");
    eprintln!("{} counters checked: {}", every.len(), names.join(", "));
    // The negative slots were credited, at most every joule drawn at 0.05 EUR per kWh; the
    // positive ones were paid.
    let credit = prom
        .query(&format!(
            "sum(max_over_time(wattbar_credit_total[{range}]))"
        ))
        .first()
        .map_or(0.0, |s| num(&s["value"][1]));
    let most = (drawn + slack) / 3.6e6 * -NEGATIVE_EUR_PER_MWH / 1000.0;
    assert!(
        credit > 0.0 && credit <= most + 1e-12,
        "credited {credit} EUR of at most {most}"
    );
    let paid = prom
        .query(&format!("sum(max_over_time(wattbar_cost_total[{range}]))"))
        .first()
        .map_or(0.0, |s| num(&s["value"][1]));
    assert!(paid > 0.0 && paid <= most + 1e-12, "paid {paid} EUR");

    // Per scope, what Prometheus saw the counter grow by, and where it first saw it.
    let energy: Vec<Vec<(f64, f64)>> = prom
        .query(&format!("{ENERGY}[{range}]"))
        .iter()
        .map(|s| {
            s["values"]
                .as_array()
                .map(|v| v.iter().map(|p| (num(&p[0]), num(&p[1]))).collect())
                .unwrap_or_default()
        })
        .collect();
    let scopes = energy.len() as f64;
    assert!(scopes >= 2.0, "the headline changed scope: {scopes} series");
    let first: f64 = energy.iter().filter_map(|s| s.first()).map(|s| s.1).sum();
    let last: f64 = energy.iter().filter_map(|s| s.last()).map(|s| s.1).sum();
    let seen = last - first;
    // The stored lifetime after the clean stop: every run's energy less what the kills lost.
    let stored = lifetime_joules(data.path());
    let lost_at_most = KILLS as f64 * WATTS * (BATCH_S + PERIOD_S);
    eprintln!(
        "{ran:.0} s, {KILLS} kills: drawn {drawn:.0} J (+ up to {slack:.0}), stored {stored:.0} J, \
         Prometheus saw {seen:.0} J from its first scrape, {} records posted",
        posted
    );
    assert!(
        stored <= drawn + slack + 1e-6,
        "stored {stored} J > drawn {drawn} + {slack} J"
    );
    assert!(
        stored >= drawn - lost_at_most,
        "stored {stored} J: more than a batch per kill lost of {drawn} J"
    );
    assert!(
        seen <= stored + 1e-6,
        "Prometheus saw {seen} J grow, the ledger holds {stored} J"
    );
    // increase() over the whole run, summed over the scopes: Prometheus extrapolates each
    // series to the range's ends, by at most half a scrape interval on each side where it
    // starts or ends inside the range.
    let increase = prom
        .query(&format!("sum(increase({ENERGY}[{range}]))"))
        .first()
        .map(|s| num(&s["value"][1]))
        .unwrap_or(f64::NAN);
    assert!(
        increase <= drawn + slack + WATTS * scopes,
        "increase() read {increase} J where {drawn} J were drawn"
    );
    assert!(
        increase >= drawn - lost_at_most - first - WATTS * 2.0 * scopes,
        "increase() read {increase} J where {drawn} J were drawn"
    );
    // gemma3 was held loaded and idle: its energy at 20 W grew, at most over the whole run.
    let resident = prom
        .query(&format!(
            "max_over_time(wattbar_model_resident_idle_joules_total[{range}])"
        ))
        .first()
        .map_or(0.0, |s| num(&s["value"][1]));
    assert!(
        resident > 0.0 && resident <= 20.0 * ran,
        "resident idle {resident} J in {ran:.0} s"
    );
    eprintln!("gemma3 resident and idle: {resident:.0} J at 20 W");
    let requests = prom.samples(
        "wattbar_inference_requests_total{model=\"crash-model\"}",
        &range,
    );
    assert!(
        requests
            .last()
            .is_some_and(|s| s.1 as u64 <= posted && s.1 >= 1.0),
        "{requests:?} of {posted} posted"
    );

    // OTLP: every push in the order received, one start time throughout.
    let pushes = receiver.drain();
    let energies: Vec<(f64, f64)> = pushes.iter().filter_map(|p| p.energy()).collect();
    assert!(energies.len() >= KILLS, "{} pushes", energies.len());
    assert_never_decreases("hw.host.energy", &energies);
    let starts: Vec<f64> = pushes
        .iter()
        .filter_map(|p| p.start("hw.host.energy"))
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] == w[1]),
        "start times moved: {starts:?}"
    );
    // Every cumulative sum pushed, found by its kind: none goes down under one start time (a
    // new start time is a reset, as OTLP has it, and only a since-start count may have one).
    let mut last: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    let mut series = std::collections::BTreeSet::new();
    for (name, start, value) in pushes.iter().flat_map(|p| p.cumulative_sums()) {
        series.insert(name.clone());
        if let Some((start_before, before)) = last.get(&name) {
            if *start_before == start {
                assert!(
                    value >= *before,
                    "{name} went down from {before} to {value}"
                );
            } else {
                assert!(
                    !name.starts_with("\"hw.host.energy\""),
                    "{name}'s start time moved"
                );
            }
        }
        last.insert(name, (start, value));
    }
    eprintln!("{} OTLP cumulative sums checked: {series:?}", series.len());
    assert!(!series.is_empty());

    // MQTT: every field discovery calls total_increasing, in every state published, in order.
    let messages = subscriber.drain(Duration::from_secs(1));
    let fields = total_increasing_fields(&messages);
    assert!(fields.iter().any(|f| f == "energy_kwh"), "{fields:?}");
    let states: Vec<serde_json::Value> = messages
        .iter()
        .filter(|m| m.topic == format!("{PREFIX}/state"))
        .filter_map(|m| serde_json::from_str(&m.payload).ok())
        .collect();
    for state in &states {
        let negative_zero = state
            .as_object()
            .into_iter()
            .flatten()
            .any(|(_, v)| v.as_f64().is_some_and(|x| x == 0.0 && x.is_sign_negative()));
        assert!(!negative_zero, "-0.0 sent: {state}");
    }
    assert!(states.len() >= KILLS, "{} states", states.len());
    for field in &fields {
        let values: Vec<(f64, f64)> = states
            .iter()
            .filter_map(|s| Some((s["at"].as_f64()?, s[field.as_str()].as_f64()?)))
            .collect();
        assert!(values.len() >= KILLS, "{field}: {} values", values.len());
        assert_never_decreases(&format!("MQTT {field}"), &values);
    }
    eprintln!(
        "MQTT total_increasing fields checked over {} states: {fields:?}",
        states.len()
    );
}

/// `total[field]` with the same field of each of its `other_scopes`: a total in every scope.
fn in_every_scope(total: &serde_json::Value, field: &str) -> f64 {
    let others: f64 = total["other_scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o[field].as_f64().unwrap_or(f64::NAN))
        .sum();
    total[field].as_f64().unwrap_or(f64::NAN) + others
}

/// The session's energy in every scope it measured (its headline's and the others').
fn session_joules(serve: &Serve) -> f64 {
    in_every_scope(&serve.get("/v1/totals")["session"], "joules")
}

/// The stored lifetime in every scope, as `totals --json` reads it.
fn lifetime_joules(data: &Path) -> f64 {
    let out = cli(data)
        .args(["totals", "--json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    in_every_scope(&v["lifetime"], "kwh") * 3.6e6
}
