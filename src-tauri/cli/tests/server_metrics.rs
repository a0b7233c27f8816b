//! `serve --server-metrics URL` as a user of llama-server runs it: the server's own token
//! counters, read once a window with no proxy, beside the energy of a replayed 100 W machine.
//!
//! The server here stands in for `llama-server --metrics` (not built on this machine yet): it
//! writes its counters under llama.cpp's names (those of the genuine capture in
//! `../shared/fixtures/server-metrics/`), as the test sets them.

use crate::common::Serve;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Prompt tokens, predicted tokens and requests processing, as the server says them now.
type Counters = Arc<Mutex<(u64, u64, u64)>>;

/// The stand-in server on loopback; its URL.
fn llama_server(counters: Counters) -> String {
    llama_server_with_key(counters, None)
}

/// A stand-in whose counters move by 10 prompt and 50 predicted tokens after each scrape, as a
/// server in steady use; its URL.
pub fn busy_llama_server() -> String {
    stand_in(Arc::new(Mutex::new((0, 0, 0))), None, (10, 50))
}

/// The stand-in, answering 401 to a scrape without `Authorization: Bearer {key}` where a key
/// is set (as llama-server's `--api-key` does).
fn llama_server_with_key(counters: Counters, key: Option<&'static str>) -> String {
    stand_in(counters, key, (0, 0))
}

/// The stand-in; `step`: prompt and predicted tokens added after each answer.
fn stand_in(counters: Counters, key: Option<&'static str>, step: (u64, u64)) -> String {
    use std::io::{BufRead, BufReader, Write};
    crate::common::loopback_server(move |mut stream| {
        let mut reader = BufReader::new(&mut stream);
        let mut line = String::new();
        let mut authorized = key.is_none();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            if let Some(key) = key {
                authorized |= line.trim_end() == format!("authorization: Bearer {key}")
                    || line.trim_end() == format!("Authorization: Bearer {key}");
            }
            line.clear();
        }
        if !authorized {
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            return;
        }
        let (p, c, r) = counters
            .lock()
            .map(|mut g| {
                let now = *g;
                g.0 += step.0;
                g.1 += step.1;
                now
            })
            .unwrap_or_default();
        let body = format!(
            "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n\
             # TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {p}\n\
             # HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n\
             # TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {c}\n\
             # TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing {r}\n"
        );
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body.as_bytes());
    })
}

/// Waits for a window that `want` accepts; the server's view then.
fn window(serve: &Serve, want: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = serve.get("/v1/server-metrics");
        if let Some(w) = view["windows"]
            .as_array()
            .and_then(|ws| ws.iter().find(|w| want(w)))
        {
            return w.clone();
        }
        assert!(Instant::now() < deadline, "no such window: {view}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_servers_own_counters_give_tokens_and_joules_per_token_per_window_and_a_restart_costs_one_window(
) {
    // The windows and sums live in the ledger: a kill -9 and a new `serve` take nothing back.
    let counters: Counters = Arc::new(Mutex::new((6886, 3469, 0)));
    let url = llama_server(Arc::clone(&counters));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(
        dir.path(),
        "t,watts\n0,100\n",
        &["--interval", "200ms", "--server-metrics", &url],
    );
    serve.followed("llama.cpp");

    // 40 prompt and 150 predicted tokens in a window of a 100 W machine: its energy is
    // 100 W × the window's span, and J/token that over the 150.
    if let Ok(mut c) = counters.lock() {
        *c = (6926, 3619, 0);
    }
    let w = window(&serve, |w| w["completion_tokens"] == 150.0);
    assert_eq!(w["prompt_tokens"], 40.0, "{w}");
    assert_eq!(
        w["model"],
        serde_json::Value::Null,
        "llama.cpp names no model"
    );
    let span = f(&w["to"]) - f(&w["from"]);
    let joules = f(&w["energy_joules"]);
    assert!((joules - 100.0 * span).abs() <= 0.02 * 100.0 * span, "{w}");
    assert!(
        (f(&w["joules_per_token"]) - joules / 150.0).abs() < 1e-9,
        "{w}"
    );
    assert_eq!(
        (&w["concurrent"], &w["coarse"]),
        (&false.into(), &false.into())
    );

    // Restarted: the counters start again from nothing. The window across the restart is not
    // counted; the one after it is.
    if let Ok(mut c) = counters.lock() {
        *c = (5, 10, 0);
    }
    // The engine says it once it has read the lower counters: only then do they move on.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = serve
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("the restart was never seen: {e}"));
        if line.contains("went back") {
            break;
        }
    }
    if let Ok(mut c) = counters.lock() {
        *c = (25, 60, 0);
    }
    let after = window(&serve, |w| w["completion_tokens"] == 50.0);
    assert_eq!(after["prompt_tokens"], 20.0, "{after}");
    let all = serve.get("/v1/server-metrics")["windows"].clone();
    let counted: Vec<f64> = all
        .as_array()
        .map(|ws| ws.iter().map(|w| f(&w["completion_tokens"])).collect())
        .unwrap_or_default();
    assert_eq!(
        counted,
        [150.0, 50.0],
        "only the two windows that made tokens: {all}"
    );
    let energy: f64 = all
        .as_array()
        .map(|ws| ws.iter().map(|w| f(&w["energy_joules"])).sum())
        .unwrap_or_default();
    // The replayed draw is the whole machine's: each window says so.
    assert!(
        all.as_array()
            .is_some_and(|ws| ws.iter().all(|w| w["scope"] == "system")),
        "{all}"
    );

    // /metrics counts the two windows once the ledger has them: 150 + 50 = 200 predicted tokens,
    // 40 + 20 = 60 prompt tokens, and the two windows' joules.
    let deadline = Instant::now() + Duration::from_secs(30);
    while sample(
        &serve.text("/metrics"),
        "wattbar_server_tokens_total",
        "completion",
    ) != Some(200.0)
    {
        assert!(Instant::now() < deadline, "{}", serve.text("/metrics"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = serve.text("/metrics");
    assert_eq!(
        sample(&text, "wattbar_server_tokens_total", "prompt"),
        Some(60.0)
    );
    let exported = sample(&text, "wattbar_server_energy_joules_total", "").unwrap_or(f64::NAN);
    assert!((exported - energy).abs() < 1e-6, "{exported} vs {energy}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("wattbar_server_energy_joules_total{")
                && l.contains("scope=\"system\"")),
        "{text}"
    );

    // Killed (SIGKILL, no goodbye) and started again on the same ledger: the series start where
    // they were, before the server is even scraped.
    drop(serve);
    let again = Serve::start(
        dir.path(),
        "t,watts\n0,100\n",
        &["--interval", "200ms", "--server-metrics", &url],
    );
    let text = again.text("/metrics");
    assert_eq!(
        sample(&text, "wattbar_server_tokens_total", "completion"),
        Some(200.0),
        "{text}"
    );
    let kept = sample(&text, "wattbar_server_energy_joules_total", "").unwrap_or(f64::NAN);
    assert!((kept - energy).abs() < 1e-6, "{kept} vs {energy}");
}

/// The value of the series of `name` whose labels hold `kind="{kind}"` (any, for `""`).
fn sample(text: &str, name: &str, kind: &str) -> Option<f64> {
    let want = format!("kind=\"{kind}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| kind.is_empty() || l.contains(&want))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn the_preference_follows_a_server_with_its_token_kept_apart_and_checks_its_kind() {
    use std::os::unix::fs::PermissionsExt;
    let counters: Counters = Arc::new(Mutex::new((10, 20, 0)));
    let url = llama_server_with_key(counters, Some("sk-llama-key"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start(dir.path(), "t,watts\n0,100\n", &["--interval", "200ms"]);
    let token = crate::common::api_token(dir.path());
    let client = serve.client().with_token(&token);
    let set = |value: serde_json::Value| {
        client
            .put("/v1/preferences/server_metrics", &value)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let status = |want: &dyn Fn(&serde_json::Value) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let view = serve.get("/v1/server-metrics");
            if want(&view["servers"][0]) {
                return view["servers"][0].clone();
            }
            assert!(Instant::now() < deadline, "{view}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // Without its key the server refuses, and the reason is shown.
    set(serde_json::json!([{"url": url}]));
    let refused = status(&|s| s["error"].as_str().is_some_and(|e| e.contains("401")));
    assert_eq!(refused["family"], serde_json::Value::Null, "{refused}");

    // With it, followed; the key is in a file of its own, for this user alone.
    let prefs = set(serde_json::json!([{"url": url, "token": "sk-llama-key"}]));
    assert_eq!(prefs["server_metrics"][0]["has_secret"], true, "{prefs}");
    assert!(!prefs.to_string().contains("sk-llama-key"), "{prefs}");
    status(&|s| s["family"] == "llama.cpp" && s["error"].is_null());
    let kept = std::fs::read_to_string(dir.path().join("preferences.json")).unwrap_or_default();
    assert!(!kept.contains("sk-llama-key"), "{kept}");
    let secret = dir.path().join("server-metrics.secret.json");
    let mode = std::fs::metadata(&secret).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode.ok(), Some(0o600));

    // Named as vLLM, which it is not: said, and not counted. The token set before is kept.
    set(serde_json::json!([{"url": url, "kind": "vllm"}]));
    let wrong = status(&|s| s["error"].as_str().is_some_and(|e| e.contains("not vLLM")));
    assert!(
        wrong["error"]
            .as_str()
            .is_some_and(|e| e.contains("answers as llama.cpp")),
        "{wrong}"
    );

    // Cleared: followed no more.
    set(serde_json::json!([]));
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.get("/v1/server-metrics")["servers"]
        .as_array()
        .is_some_and(|s| !s.is_empty())
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!secret.exists());
}
