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
async fn a_foreign_host_is_refused_with_421() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let port = server.addr.port();
    for host in [
        format!("evil.example:{port}"),
        "attacker.test".to_string(),
        format!("localhost:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
    ] {
        let r = server
            .send("GET", "/v1/snapshot", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
        assert!(r.json()["error"].as_str().is_some());
    }
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let r = server
            .send("GET", "/v1/low-power", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    server.stop().await;
}

/// This machine's interface addresses beyond loopback, as the operating system lists them.
fn machine_addresses() -> Vec<IpAddr> {
    sysinfo::Networks::new_with_refreshed_list()
        .values()
        .flat_map(|n| n.ip_networks().iter().map(|net| net.addr))
        .filter(|ip| !ip.is_loopback())
        .collect()
}

fn host_of(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_listen_answers_to_this_machines_addresses_and_allowed_names() {
    let addresses = machine_addresses();
    let v4: Vec<IpAddr> = addresses.iter().copied().filter(IpAddr::is_ipv4).collect();
    assert!(
        !v4.is_empty(),
        "this test needs a non-loopback IPv4 interface; the machine has {addresses:?}"
    );
    let server = Server::start_with("t,watts\n0,10\n", None, "0.0.0.0:0", |bound, config| {
        config.extra_hosts = api::remote_hosts(bound, &["Prom.Example".to_string()]);
    })
    .await;
    // The power series exist from the first sample on.
    wait_until_sampled(&server).await;
    let port = server.addr.port();
    let metrics = |addr: SocketAddr, host: String| {
        let server = &server;
        async move {
            let r = server
                .send_to(addr, "GET", "/metrics", &[("Host", host.clone())], b"")
                .await;
            (host, r)
        }
    };
    // As a scraper on another machine arrives: to an interface address, naming it.
    for ip in &v4 {
        let to = SocketAddr::new(*ip, port);
        for host in [format!("{ip}:{port}"), ip.to_string()] {
            let (host, r) = metrics(to, host).await;
            assert_eq!(r.status, 200, "{host}: {r:?}");
            assert!(r.body.contains("wattbar_power_watts"), "{host}: {r:?}");
        }
    }
    let mut accepted = vec![format!("prom.example:{port}"), "PROM.EXAMPLE".to_string()];
    accepted.extend(
        addresses
            .iter()
            .map(|ip| format!("{}:{port}", host_of(*ip))),
    );
    if let Some(name) = sysinfo::System::host_name() {
        let label = name.split('.').next().unwrap_or(&name).to_string();
        accepted.extend([format!("{name}:{port}"), format!("{label}.local")]);
    }
    for host in accepted {
        let (host, r) = metrics(server.addr, host).await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    let to = SocketAddr::new(v4[0], port);
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("{}:{}", v4[0], port.wrapping_add(1)),
        format!("prom.example.evil.example:{port}"),
    ] {
        let (host, r) = metrics(to, host).await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
        assert!(r.json()["error"].as_str().is_some());
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_listen_still_refuses_the_machines_addresses() {
    let addresses = machine_addresses();
    assert!(!addresses.is_empty(), "no non-loopback interface here");
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |bound, config| {
        config.extra_hosts = api::remote_hosts(bound, &["proxy.example".to_string()]);
    })
    .await;
    let port = server.addr.port();
    let mut refused: Vec<String> = addresses
        .iter()
        .map(|ip| format!("{}:{port}", host_of(*ip)))
        .collect();
    if let Some(name) = sysinfo::System::host_name() {
        refused.push(format!("{name}:{port}"));
    }
    for host in refused {
        let r = server
            .send("GET", "/metrics", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
    }
    for host in [format!("localhost:{port}"), format!("proxy.example:{port}")] {
        let r = server
            .send("GET", "/metrics", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_the_bearer_token() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let body = br#"{"enabled": true}"#;
    let host = ("Host", server.host());
    let none = server
        .send("PUT", "/v1/low-power", std::slice::from_ref(&host), body)
        .await;
    assert_eq!(none.status, 401, "{none:?}");
    assert!(none
        .head
        .to_ascii_lowercase()
        .contains("www-authenticate: bearer"));
    let wrong = server
        .send(
            "PUT",
            "/v1/low-power",
            &[
                host.clone(),
                ("Authorization", format!("Bearer {}", "f".repeat(64))),
            ],
            body,
        )
        .await;
    assert_eq!(wrong.status, 401);
    let reset = server.send("POST", "/v1/session/reset", &[host], b"").await;
    assert_eq!(reset.status, 401);
    assert!(
        !server.engine.current().low_power.enabled,
        "nothing changed"
    );
    // An array of the fields in order is not the documented object.
    let array = server.write("PUT", "/v1/low-power", "[true]").await;
    assert_eq!(array.status, 400, "{array:?}");
    assert!(!server.engine.current().low_power.enabled);
    // The scheme's case is free (RFC 9110 §11.1).
    let ok = server
        .send(
            "PUT",
            "/v1/low-power",
            &[
                ("Host", server.host()),
                ("Authorization", format!("bearer {TOKEN}")),
            ],
            br#"{"enabled": true}"#,
        )
        .await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let j = ok.json();
    assert_eq!(j["enabled"], true);
    assert_eq!(j["reason"], "manual");
    assert!(j["since"].as_f64().is_some());
    assert_eq!(server.get("/v1/low-power").await.json()["enabled"], true);
    server.stop().await;
}

async fn with_origin(server: &Server, origin: String) -> Reply {
    let headers = [
        ("Host", server.host()),
        ("Origin", origin),
        ("Authorization", format!("Bearer {TOKEN}")),
    ];
    server
        .send("PUT", "/v1/low-power", &headers, br#"{"enabled":true}"#)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_another_origin_is_refused_even_with_the_token() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let port = server.addr.port();
    for origin in [
        "http://evil.example".to_string(),
        "null".to_string(),
        format!("https://localhost:{port}"),
    ] {
        let r = with_origin(&server, origin.clone()).await;
        assert_eq!(r.status, 403, "{origin}: {r:?}");
    }
    assert!(!server.engine.current().low_power.enabled);
    let same = with_origin(&server, format!("http://localhost:{port}")).await;
    assert_eq!(same.status, 200, "{same:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_json_errors() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let big = format!(r#"{{"enabled": true, "pad": "{}"}}"#, "x".repeat(70 * 1024));
    let r = server.write("PUT", "/v1/low-power", &big).await;
    assert_eq!(r.status, 413, "{r:?}");
    let r = server
        .write("PUT", "/v1/low-power", r#"{"enabled": tru"#)
        .await;
    assert_eq!(r.status, 400);
    let msg = r.json()["error"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_default();
    assert!(msg.starts_with("malformed JSON body"), "{msg}");
    let r = server
        .write("PUT", "/v1/low-power", r#"{"enabled": "yes"}"#)
        .await;
    assert_eq!(r.status, 400);
    let r = server.get("/v1/nothing-here").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "no such route: GET /v1/nothing-here");
    let r = server.write("DELETE", "/v1/snapshot", "").await;
    assert_eq!(r.status, 405, "{r:?}");
    let r = server.get("/v1/history?from=abc").await;
    assert_eq!(r.status, 400);
    let r = server.get("/v1/history?from=100&to=50").await;
    assert_eq!(r.status, 400);
    // Still serving after all of that.
    assert_eq!(server.get("/v1/snapshot").await.status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_sends_one_state_per_sample_and_ends_at_shutdown() {
    let server = Server::start("t,watts\n0,10\n1,20\n", None).await;
    let host = server.host();
    let addr = server.addr;
    let reader = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        let req = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while seen.matches("event: state").count() < 5 {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        (seen, s)
    });
    let (seen, mut socket) = reader.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(seen.contains("content-type: text/event-stream"), "{seen}");
    let seqs: Vec<u64> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    assert!(seqs.len() >= 5, "{seen}");
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{seqs:?}");
    let data: Vec<serde_json::Value> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert!(data.iter().any(|d| d["source"] == "replay"));
    // The open stream does not hold the server up.
    server.stop().await;
    let mut rest = Vec::new();
    let _ = socket.read_to_end(&mut rest);
}

/// Opens `/v1/stream` on a new connection and reads until its answer is known: the head and a
/// first state event for a 200, the whole reply otherwise. Returns the status, what was read and
/// the open connection.
fn open_stream(addr: SocketAddr, host: &str) -> (u16, String, TcpStream) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("{e}"));
    let req = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some((head, body)) = seen.split_once("\r\n\r\n") {
            let status: u16 = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("no status line in {seen:?}"));
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(str::to_string)
                })
                .and_then(|v| v.trim().parse::<usize>().ok());
            let complete = match status {
                200 => body.contains("event: state"),
                _ => length.is_some_and(|n| body.len() >= n),
            };
            if complete {
                return (status, seen, s);
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("the stream request got no complete answer: {seen:?}"),
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_clients_beyond_the_cap_get_503_until_one_leaves() {
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.max_streams = 2;
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    tokio::task::spawn_blocking(move || {
        let (first, _, leaving) = open_stream(addr, &host);
        let (second, _, mut staying) = open_stream(addr, &host);
        assert_eq!((first, second), (200, 200));
        let (status, refused, _) = open_stream(addr, &host);
        assert_eq!(status, 503, "{refused}");
        let lower = refused.to_ascii_lowercase();
        assert!(lower.contains("retry-after: 5\r\n"), "{refused}");
        assert!(
            lower.contains("content-type: application/json"),
            "{refused}"
        );
        let body = refused.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let error: serde_json::Value =
            serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert!(
            error["error"].as_str().is_some_and(|e| e.contains('2')),
            "{body}"
        );

        // The slot is freed once the server notices the client left (at its next event).
        let _ = leaving.shutdown(std::net::Shutdown::Both);
        drop(leaving);
        let deadline = Instant::now() + Duration::from_secs(30);
        let _replacement = loop {
            let (status, text, conn) = open_stream(addr, &host);
            if status == 200 {
                break conn;
            }
            assert_eq!(status, 503, "{text}");
            assert!(
                Instant::now() < deadline,
                "a stream slot was not freed within 5 s of a client leaving"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        // The client that stayed was not disturbed.
        let mut buf = [0u8; 4096];
        let n = staying.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 0);
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    server.stop().await;
}

/// Reads from `s` until the server closes it, which must happen before `within` (`what` names
/// the case); returns what it sent. Something written by `trickle` goes out before each read.
fn wait_for_close(
    what: &str,
    s: &mut TcpStream,
    within: Duration,
    mut trickle: impl FnMut(&mut TcpStream),
) -> String {
    let start = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            start.elapsed() < within,
            "{what}: the connection was still open after {within:?}; it sent {:?}",
            String::from_utf8_lossy(&got)
        );
        trickle(s);
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // A reset is the server closing on unread input.
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_a_request_are_closed_but_streams_stay() {
    let limit = Duration::from_millis(400);
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.header_timeout = limit;
        config.limits.request_timeout = limit;
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    let within = limit * 5;
    tokio::task::spawn_blocking(move || {
        let connect = || TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));

        // Connects and sends nothing.
        let sent = wait_for_close("silent", &mut connect(), within, |_| {});
        assert!(!sent.contains(" 200 "), "{sent}");

        // Sends half a request, then a header line now and then, never the end of the headers.
        let mut slow = connect();
        let start = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\n");
        slow.write_all(start.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut last = Instant::now();
        let sent = wait_for_close("trickling headers", &mut slow, within, |s| {
            if last.elapsed() >= limit / 4 {
                let _ = s.write_all(b"X-Slow: 1\r\n");
                last = Instant::now();
            }
        });
        assert!(!sent.contains(" 200 "), "{sent}");

        // One whole request, answered, then an idle keep-alive connection.
        let mut idle = connect();
        let req = format!("GET /v1/low-power HTTP/1.1\r\nHost: {host}\r\n\r\n");
        idle.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let sent = wait_for_close("idle keep-alive", &mut idle, within, |_| {});
        assert!(sent.starts_with("HTTP/1.1 200 "), "{sent}");

        // Headers of a write whose body never comes: 408 in JSON, then closed.
        let mut bodiless = connect();
        let req = format!(
            "PUT /v1/low-power HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: 17\r\n\r\n{{\"ena"
        );
        bodiless
            .write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let sent = wait_for_close("missing body", &mut bodiless, within, |_| {});
        assert!(sent.starts_with("HTTP/1.1 408 "), "{sent}");
        assert!(sent.contains("{\"error\":"), "{sent}");

        // An event stream outlives both limits several times over and keeps receiving.
        let (status, _, mut stream) = open_stream(addr, &host);
        assert_eq!(status, 200);
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap_or_else(|e| panic!("{e}"));
        let opened = Instant::now();
        let mut late_events = 0;
        let mut buf = [0u8; 4096];
        while opened.elapsed() < limit * 4 {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => panic!("the stream ended after {:?}", opened.elapsed()),
                Ok(n) => {
                    if opened.elapsed() > limit * 2 {
                        late_events += String::from_utf8_lossy(&buf[..n])
                            .matches("event: state")
                            .count();
                    }
                }
            }
        }
        assert!(late_events > 0, "no event after twice the limits");
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    server.stop().await;
}

fn energy_counter(metrics: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with("wattbar_energy_joules_total{domain=\"system\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no system energy counter in\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_energy_counter_is_there_from_the_first_scrape_and_moves_before_any_batch() {
    // A minute between batches: a counter that followed the store would sit still (or be absent)
    // for a minute, and rate() over it would read in steps.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = parse_trace("t,watts\n0,3600\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
    let prefs = Preferences {
        interval_ms: 100,
        ..Preferences::default()
    };
    let mut config = EngineConfig::new(prefs).with_store(dir.path().join("wattbar.db"));
    config.batch_interval = Duration::from_secs(60);
    let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
    // The counter and the moment of the state it was rendered from.
    let scrape = || {
        let p = engine.current();
        let text = wattbar_serve::metrics::render(&p, wattbar_engine::unix_now(), None);
        let at = p.snapshot.as_ref().map(|s| s.at.monotonic.as_secs_f64());
        (
            energy_counter(&wattbar_serve::metrics::to_prometheus_text(&text)),
            at,
        )
    };
    let (first, _) = scrape();
    assert!(first >= 0.0);
    engine_sampled(&engine).await;
    let (first, since) = scrape();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (second, until) = scrape();
    // 3600 W for the time between the two states (about a second).
    let seconds = until.zip(since).map_or(f64::NAN, |(b, a)| b - a);
    assert!(seconds > 0.0, "no sample between the scrapes");
    assert!(
        ((second - first) - 3600.0 * seconds).abs() <= 1e-6 * second,
        "{first} → {second} J in {seconds} s"
    );
    // Nothing was written yet (a batch a minute), yet the published lifetime is the counter's:
    // stored plus measured since, like today and the month.
    let p = engine.current();
    let text = wattbar_serve::metrics::render(&p, wattbar_engine::unix_now(), None);
    let counter = energy_counter(&wattbar_serve::metrics::to_prometheus_text(&text));
    let lifetime = p.totals.as_ref().map_or(f64::NAN, |t| t.lifetime.joules);
    assert!(
        counter > 0.0 && (lifetime - counter).abs() <= 1e-9 * counter,
        "lifetime {lifetime} J, counter {counter} J"
    );
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
    assert!(server.engine.current().session.joules.0 < 3600.0 * 0.5);
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
    assert!(totals["lifetime_joules_by_domain"]["system"].as_f64() >= Some(after_reset));
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
        "wattbar_cost_total{currency=\"EUR\"}",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferences_are_read_and_changed_one_field_at_a_time_with_the_token() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let all = server.get("/v1/preferences").await;
    assert_eq!(all.status, 200, "{all:?}");
    assert_eq!(all.json()["interval_ms"], 100);

    let unauthorized = server
        .send(
            "PUT",
            "/v1/preferences/price_per_kwh",
            &[("Host", server.host())],
            b"0.31",
        )
        .await;
    assert_eq!(unauthorized.status, 401, "{unauthorized:?}");

    let set = server
        .write("PUT", "/v1/preferences/price_per_kwh", "0.31")
        .await;
    assert_eq!(set.status, 200, "{set:?}");
    assert_eq!(set.json()["price_per_kwh"], 0.31);
    // Answered once published: the engine's state already has it.
    assert_eq!(server.engine.current().prefs.price_per_kwh.per_kwh(), 0.31);

    let refused = server
        .write("PUT", "/v1/preferences/price_per_kwh", "-2")
        .await;
    assert_eq!(refused.status, 400, "{refused:?}");
    assert_eq!(refused.json()["field"], "price_per_kwh");
    let message = refused.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !message.is_empty() && !message.starts_with("price"),
        "{message}"
    );
    assert_eq!(server.engine.current().prefs.price_per_kwh.per_kwh(), 0.31);

    let unknown = server
        .write("PUT", "/v1/preferences/colour", "\"red\"")
        .await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let malformed = server
        .write("PUT", "/v1/preferences/currency", "{not json")
        .await;
    assert_eq!(malformed.status, 400, "{malformed:?}");
    assert!(malformed.json()["error"]
        .as_str()
        .is_some_and(|e| e.contains("malformed JSON")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_reaching_before_the_engine_counts_each_second_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let before = wattbar_engine::unix_now();
    let server = Server::start("t,watts\n0,50\n", Some(&dir.path().join("w.db"))).await;
    wait_until_sampled(&server).await;
    // Batches every 200 ms: by now the store holds most of what the engine also keeps.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let to = wattbar_engine::unix_now();
    let alive = to - before;
    for span in [30.0, 300.0] {
        let e = server
            .get(&format!("/v1/energy?from={}&to={to}", to - span))
            .await
            .json();
        let joules = e["joules"].as_f64().unwrap_or_default();
        // 50 W for at most the engine's life: each second once, never the stored copy too.
        assert!(
            joules > 0.0 && joules <= 50.0 * alive * 1.01,
            "{span} s: {e}"
        );
        let covered = e["covered_fraction"].as_f64().unwrap_or(1.0);
        assert!(covered <= alive / span + 1e-9, "{span} s: {e}");
        let system = e["by_domain"]
            .as_array()
            .and_then(|d| d.iter().find(|p| p[0] == "system"))
            .and_then(|p| p[1].as_f64());
        if let Some(system) = system {
            assert!((system - joules).abs() <= 1e-6 * joules, "{span} s: {e}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_client_that_reads_nothing_loses_its_slot_and_the_windows_keep_theirs() {
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |_, config| {
        config.limits.max_streams = 1;
        config.limits.stream_write_timeout = Duration::from_secs(1);
    })
    .await;
    let (addr, host) = (server.addr, server.host());
    // A client that connects and never reads, with a small receive buffer so that the buffers
    // between it and the server fill within seconds.
    let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|e| panic!("{e}"));
    socket
        .set_recv_buffer_size(2048)
        .unwrap_or_else(|e| panic!("{e}"));
    let idle = socket.connect(addr).await.unwrap_or_else(|e| panic!("{e}"));
    let request = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
    let mut sent = 0;
    while sent < request.len() {
        idle.writable().await.unwrap_or_else(|e| panic!("{e}"));
        sent += idle.try_write(&request.as_bytes()[sent..]).unwrap_or(0);
    }
    // It reads its answer's head, then nothing more.
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        idle.readable().await.unwrap_or_else(|e| panic!("{e}"));
        let mut byte = [0u8; 1];
        if idle.try_read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::task::spawn_blocking(move || {
        // The idle client holds the one public slot.
        let (status, text, _) = open_stream(addr, &host);
        assert_eq!(status, 503, "{text}");
        // The app's window carries the token: a slot is kept for it.
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        let req = format!(
            "GET /v1/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or_else(|e| panic!("{e}"));
        let head = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        // Once the buffers before the idle client are full, its slot is taken back within the
        // write timeout.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, text, _) = open_stream(addr, &host);
            if status == 200 {
                break;
            }
            assert_eq!(status, 503, "{text}");
            assert!(
                Instant::now() < deadline,
                "a client that reads nothing kept its slot for 60 s"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    drop(idle);
    server.stop().await;
}

/// A source that stalls its next read for 3 s once asked: the engine is busy that long.
struct Stalling(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Source for Stalling {
    fn id(&self) -> &str {
        "stalling"
    }
    fn quality(&self) -> wattbar_core::Quality {
        wattbar_core::Quality::Measured
    }
    fn read(
        &mut self,
        _at: wattbar_core::Stamp,
    ) -> Result<Vec<wattbar_core::Reading>, wattbar_core::Error> {
        if self.0.swap(false, std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_secs(3));
        }
        Ok(Vec::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_engine_has_not_applied_yet_is_accepted_not_refused() {
    let stall = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trace = parse_trace("t,watts\n0,10\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(ReplaySource::new(trace)),
        Box::new(Stalling(stall.clone())),
    ];
    let server = Server::start_sources(sources, None, "127.0.0.1:0", |_, _| {}).await;
    wait_until_sampled(&server).await;
    // The engine is busy for 3 s, past the 2 s the API waits: the change is queued, and said so.
    stall.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = server
        .write("PUT", "/v1/low-power", r#"{"enabled": true}"#)
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    assert!(
        r.json()["error"].is_null() && r.json()["pending"] == true,
        "{r:?}"
    );
    // And it is applied once the engine is free. The state seen is let go at once: a borrow
    // kept holds the engine's next publication, and with it the shutdown below.
    let mut rx = server.engine.subscribe();
    let applied = tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|p| p.low_power.enabled),
    )
    .await
    .is_ok_and(|seen| seen.is_ok());
    assert!(applied, "the accepted change was never applied");
    server.stop().await;
}
