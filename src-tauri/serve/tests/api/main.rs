//! The local API over real TCP: a real engine on a replayed trace, a real SQLite file, and raw
//! HTTP/1.1 requests so every header (Host, Origin, Authorization) is exactly what a test says.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use wattbar_core::{Chain, Preferences, Source};
use wattbar_engine::{spawn, EngineConfig, EngineHandle};
use wattbar_serve::api::{self, ApiConfig};
use wattbar_sources::replay::parse_trace;
use wattbar_sources::ReplaySource;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Server {
    /// Where requests go: the listen address, or 127.0.0.1 on its port for a wildcard listen.
    addr: SocketAddr,
    engine: EngineHandle,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(trace: &str, db: Option<&Path>) -> Server {
        Server::start_with(trace, db, "127.0.0.1:0", |_, _| {}).await
    }

    /// A server listening on `listen`, its API configured by `configure` (given the bound address).
    async fn start_with(
        trace: &str,
        db: Option<&Path>,
        listen: &str,
        configure: impl FnOnce(&SocketAddr, &mut ApiConfig),
    ) -> Server {
        let trace = parse_trace(trace).unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
        Server::start_sources(sources, db, listen, configure).await
    }

    /// A server whose engine reads `sources`.
    async fn start_sources(
        sources: Vec<Box<dyn Source>>,
        db: Option<&Path>,
        listen: &str,
        configure: impl FnOnce(&SocketAddr, &mut ApiConfig),
    ) -> Server {
        let prefs = Preferences {
            interval_ms: 100,
            ..Preferences::default()
        };
        let mut config = EngineConfig::new(prefs);
        config.batch_interval = Duration::from_millis(200);
        if let Some(db) = db {
            config = config.with_store(db.to_path_buf());
        }
        Server::start_engine(config, sources, listen, configure).await
    }

    /// A server whose engine is started as `config` says, reading `sources`.
    async fn start_engine(
        config: EngineConfig,
        sources: Vec<Box<dyn Source>>,
        listen: &str,
        configure: impl FnOnce(&SocketAddr, &mut ApiConfig),
    ) -> Server {
        let db = config.store.clone();
        let db = db.as_deref();
        let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let bound = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let (stop, stopped) = oneshot::channel::<()>();
        let mut api_config = ApiConfig {
            token: TOKEN.to_string(),
            db_path: db.map(Path::to_path_buf),
            ..ApiConfig::default()
        };
        configure(&bound, &mut api_config);
        let addr = if bound.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], bound.port()))
        } else {
            bound
        };
        let task = tokio::spawn(api::serve(listener, engine.reader(), api_config, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            engine,
            stop: Some(stop),
            task,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Sends one request with exactly these extra headers; returns status, headers and body.
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Reply {
        self.send_to(self.addr, method, path, headers, body).await
    }

    /// [`Server::send`] over a connection to `addr`, which must reach this server.
    async fn send_to(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Reply {
        let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (k, v) in headers {
            text.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method != "GET" {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        text.push_str("\r\n");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(body);
        tokio::task::spawn_blocking(move || raw(addr, &bytes))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, &[("Host", self.host())], b"").await
    }

    async fn write(&self, method: &str, path: &str, body: &str) -> Reply {
        self.send(
            method,
            path,
            &[
                ("Host", self.host()),
                ("Authorization", format!("Bearer {TOKEN}")),
                ("Content-Type", "application/json".into()),
            ],
            body.as_bytes(),
        )
        .await
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let finished = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
        assert!(finished.is_ok(), "the server did not stop within 5 s");
        self.engine
            .shutdown()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }
}

fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("{e}"));
    // A refused large body may close the socket before all of it is written: that is fine.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Reply {
        status,
        head: head.to_string(),
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

async fn wait_until_sampled(server: &Server) {
    engine_sampled(&server.engine).await;
}

async fn engine_sampled(engine: &EngineHandle) {
    let mut rx = engine.subscribe();
    let sampled = tokio::time::timeout(
        Duration::from_secs(60),
        rx.wait_for(|p| p.snapshot.is_some()),
    )
    .await;
    assert!(
        sampled.is_ok_and(|r| r.is_ok()),
        "no sample within a minute"
    );
}

mod hosts;
mod metrics;
mod rest;
mod scopes;
mod stream;
mod summary;
mod writes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_carries_the_replayed_watts_with_source_and_quality() {
    let server = Server::start("t,watts\n0,42.5\n", None).await;
    wait_until_sampled(&server).await;
    let r = server.get("/v1/snapshot").await;
    assert_eq!(r.status, 200, "{r:?}");
    let j = r.json();
    assert_eq!(j["watts"], 42.5);
    assert_eq!(j["source"], "replay");
    assert_eq!(j["quality"], "measured");
    // A trace of the whole machine covers the whole machine.
    assert_eq!(j["scope"], "system");
    assert_eq!(j["covers"], serde_json::json!([]));
    assert_eq!(j["scope_text"], "the whole machine");
    assert_eq!(j["low_power"]["enabled"], false);
    assert_eq!(j["low_power"]["recommended_model"], "qwen3:1b");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_says_what_a_fit_needs_before_there_is_one() {
    // The CPU package alone, no whole-machine reference: nothing to learn against, nothing made
    // up; what the parts are now is still said.
    let server = Server::start("t,watts,domain\n0,30,cpu\n", None).await;
    wait_until_sampled(&server).await;
    let r = server.get("/v1/calibration").await;
    assert_eq!(r.status, 200, "{r:?}");
    let j = r.json();
    assert!(j["learned"].is_null(), "{j}");
    assert_eq!(j["windows"], 0, "{j}");
    assert_eq!(j["windows_needed"], 12, "{j}");
    assert_eq!(j["standing_in"], false, "{j}");
    assert_eq!(j["components_watts"], 30.0, "{j}");
    assert_eq!(j["components_covers"], serde_json::json!(["cpu-package"]));
    assert!(
        j["reference_watts"].is_null() && j["calibrated_watts"].is_null(),
        "{j}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_totals_never_show_the_session_above_today_or_today_above_the_month() {
    // 3600 W, sampled every 100 ms, batches every 200 ms: over 2 s /v1/totals is read between
    // batches and at them, and each answer holds session ≤ today ≤ month ≤ lifetime.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("wattbar.db");
    let server = Server::start("t,watts\n0,3600\n", Some(&db)).await;
    wait_until_sampled(&server).await;
    let until = std::time::Instant::now() + Duration::from_secs(2);
    let mut checked = 0;
    while std::time::Instant::now() < until {
        let t = server.get("/v1/totals").await.json();
        let j = |v: &serde_json::Value| v["joules"].as_f64().unwrap_or(f64::NAN);
        let figures = [
            j(&t["session"]),
            j(&t["stored"]["today"]),
            j(&t["stored"]["month"]),
            j(&t["stored"]["lifetime"]),
        ];
        assert!(
            figures.windows(2).all(|w| w[0] <= w[1] + 1e-9),
            "session, today, month, lifetime: {figures:?}"
        );
        checked += 1;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(checked >= 20, "{checked} answers");
    server.stop().await;
}
