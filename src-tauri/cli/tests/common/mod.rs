//! What the CLI's end-to-end tests share: a `wattbar-cli` with its folders in a temporary one,
//! and `serve` as a real process on a replayed trace.
#![allow(dead_code)]

pub mod model_server;
#[path = "../../../../tests/desktop/private_bus.rs"]
pub mod private_bus;
#[path = "../../../../tests/desktop/profiles_daemon.rs"]
pub mod profiles_daemon;
pub mod prometheus;

pub use http::{http, Answer};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn cli(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wattbar-cli"));
    c.env("WATTBAR_DATA_DIR", data)
        .env("XDG_DATA_HOME", data)
        .env("XDG_CONFIG_HOME", data)
        .env("TMPDIR", data)
        .env("RUST_LOG", "info")
        // Model servers' windows of 1 s, not 10: the same rules, ten times the windows a test
        // can wait for.
        .env("WATTBAR_SERVER_METRICS_WINDOW_MS", "1000")
        // This machine's own model servers, and the other tests', are never followed by
        // themselves: only a test that asks for it finds any.
        .env("WATTBAR_FIND_MODEL_SERVERS", "0")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("WATTBAR_REPLAY");
    c
}

/// The API token `serve` keeps in its data folder `data`, for writes.
/// What an earlier engine stored of resident models: the idle draw of each set of models
/// loaded (`""` for none), watts over 100 intervals with a 1 W spread, and `days` resident and
/// idle; written into the data folder's ledger before a test starts its engine.
pub fn seed_resident(
    data: &Path,
    sets: &[(&str, f64)],
    days: &[wattbar_core::inference::resident::ResidentDay],
) {
    use wattbar_core::inference::resident::SetBaseline;
    use wattbar_core::inference::Baseline;
    use wattbar_engine::store::{resident::BatchExtras, Store};
    let now = wattbar_engine::unix_now();
    let (mut store, _) =
        Store::open(&data.join("wattbar.db"), now).unwrap_or_else(|e| panic!("{e}"));
    let session = store
        .start_session(now, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let set_baselines: Vec<SetBaseline> = sets
        .iter()
        .map(|(key, watts)| SetBaseline {
            key: key.to_string(),
            models: [key]
                .iter()
                .filter(|k| !k.is_empty())
                .map(|k| k.to_string())
                .collect(),
            shares: if key.is_empty() { vec![] } else { vec![1.0] },
            baseline: Baseline {
                watts: *watts,
                spread_watts: Some(1.0),
                samples: 100,
                from: now - 600.0,
                to: now,
                method: "median".into(),
                coverage: None,
            },
        })
        .collect();
    let also = BatchExtras {
        baseline: None,
        set_baselines: &set_baselines,
        resident_days: days,
        ..Default::default()
    };
    store
        .write_batch_with(session, &[], 0.0, 0.0, &also)
        .unwrap_or_else(|e| panic!("{e}"));
}

pub fn api_token(data: &Path) -> String {
    std::fs::read_to_string(data.join("api-token"))
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_string()
}

/// `watch` arguments that give a ledger some history: fifteen samples 100 ms apart, written in
/// batches every 500 ms.
pub const FILL_LEDGER: [&str; 7] = [
    "watch",
    "--interval",
    "100ms",
    "--count",
    "15",
    "--batch",
    "500ms",
];

/// Asserts that a finished `wattbar-cli` exited 0, showing its stderr when it did not.
pub fn assert_ok(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `wattbar-cli ARGS` to the end; its stdout, after asserting it succeeded.
pub fn run_cli(data: &Path, args: &[&str]) -> String {
    let out = cli(data)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `node tests/llm/SCRIPT ARGS` (a driver of the official client libraries), asserts it
/// succeeded, and gives the one line of JSON it printed.
pub fn node_json(script: &str, args: &[&str]) -> serde_json::Value {
    node_json_with(script, args, &[])
}

/// [`node_json`] with these environment variables set.
pub fn node_json_with(script: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let out = Command::new("node")
        .arg(repo_root().join("tests/llm").join(script))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs `node tests/browser/SCRIPT` (Debian's Chromium through playwright-core) in the
/// repository with `env` and the temporary folder `tmp`, asserts it succeeded, and gives the one
/// JSON object it printed: what the page showed. Its screenshots go to `target/e2e/`
/// ([`screenshots`]).
pub fn browser_json(
    script: &str,
    tmp: &Path,
    env: &[(&str, &dyn AsRef<std::ffi::OsStr>)],
) -> serde_json::Value {
    let mut c = Command::new("node");
    c.arg(repo_root().join("tests/browser").join(script))
        .env("TMPDIR", tmp)
        .current_dir(repo_root());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("node is needed (scripts/setup checks for it): {e}"));
    assert!(
        out.status.success(),
        "browser test {script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Where the browser tests' screenshots go, made where it is not yet.
pub fn screenshots() -> PathBuf {
    let shots = repo_root().join("target/e2e");
    std::fs::create_dir_all(&shots).unwrap_or_else(|e| panic!("{e}"));
    shots
}

/// A loopback port nobody listens on now: for an address that must be named before its server
/// starts (a proxy told it is its own upstream), or one meant to refuse connections. A server the
/// tests start binds port 0 and its address is read back ([`Serve`]).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A server that cannot be told to listen on port 0 and say where it landed (mosquitto takes a
/// port 0 for a Unix socket), started on a port that was free a moment ago and proved its own:
/// `spawn(port)` starts it, and it is ready once the process listening on that port is the one
/// started. One that lost the port to another program meanwhile exits ("address in use") and is
/// started again on another; connecting alone would have talked to the other program.
pub fn start_on_a_port_of_its_own(
    what: &str,
    mut spawn: impl FnMut(u16) -> Child,
    log: impl Fn() -> String,
) -> (Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = spawn(port);
        if listens_in_time(what, &mut child, port, &log) {
            return (child, port);
        }
    }
    panic!("{what} exited five times before it listened:\n{}", log());
}

/// Waits until `child` is the process listening on loopback `port`: true then, false once it
/// exited first; a child that does neither in 30 s is killed and fails the test with its `log`.
pub fn listens_in_time(what: &str, child: &mut Child, port: u16, log: impl Fn() -> String) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if wattbar_sources::linux::listener::find_listener(Path::new("/"), port)
            .is_ok_and(|pid| pid == Some(child.id()))
        {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not listen on {port}:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The address a server's log names after `marker` (`listening on http://127.0.0.1:41234`),
/// for a server told to listen on port 0.
pub fn address_after(log: &str, marker: &str) -> Option<String> {
    log.lines().find_map(|l| {
        l.split_once(marker)
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(str::to_string)
    })
}

/// `serve` with the inference proxy on port 0 of loopback in front of `upstream`, on a replayed
/// constant draw of `watts`; answers it and the proxy's URL once the first sample is in.
pub fn serve_with_proxy(dir: &Path, upstream: &str, watts: f64, extra: &[&str]) -> (Serve, String) {
    let trace =
        format!("t,watts,domain,quality\n0,{watts},system,measured\n1,{watts},system,measured\n");
    let mut args = vec!["--llm-proxy", "127.0.0.1:0", "--llm-upstream", upstream];
    args.extend_from_slice(extra);
    let serve = Serve::start(dir, &trace, &args);
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.get("/v1/snapshot")["watts"].is_null() {
        assert!(Instant::now() < deadline, "no sample");
        std::thread::sleep(Duration::from_millis(50));
    }
    let proxy = serve.proxy();
    (serve, proxy)
}

/// `wattbar-cli low-power on|off` against the running `serve`, as a user switches it.
pub fn switch_low_power(data: &Path, serve: &Serve, state: &str) {
    let api = serve.url.trim_start_matches("http://").to_string();
    let out = cli(data)
        .args(["low-power", state, "--api", &api])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each record's model and, when low-power mode routed it, the model asked for.
pub fn served_and_asked(records: &[serde_json::Value]) -> Vec<(&str, Option<&str>)> {
    records
        .iter()
        .map(|r| {
            (
                r["model"].as_str().unwrap_or_default(),
                r["requested_model"].as_str(),
            )
        })
        .collect()
}

pub struct Serve {
    pub child: Child,
    pub url: String,
    /// The inference proxy's URL, where it runs one.
    pub proxy: Option<String>,
    pub log: std::sync::mpsc::Receiver<String>,
}

/// The URL a log line names after `marker` (`serving on http://…`).
fn url_after(line: &str, marker: &str) -> Option<String> {
    let rest = line.split(marker).nth(1)?;
    let url = rest.split_whitespace().next()?.trim_end_matches('/');
    Some(url.to_string())
}

impl Serve {
    /// Starts `serve` on port 0 of loopback with a replay trace; waits for its address.
    pub fn start(data: &Path, trace: &str, extra: &[&str]) -> Serve {
        let trace_path = data.join("trace.csv");
        std::fs::write(&trace_path, trace).unwrap_or_else(|e| panic!("{e}"));
        let mut c = cli(data);
        c.env("WATTBAR_REPLAY", &trace_path)
            .args(["serve", "--listen", "127.0.0.1:0", "--batch", "500ms"])
            .args(extra);
        Serve::spawn(c)
    }

    /// Runs `serve` as `c` says (it binds port 0) and reads the addresses it bound back from
    /// its log: the API's and, with `--llm-proxy`, the proxy's.
    pub fn spawn(mut c: Command) -> Serve {
        let proxied = c.get_args().any(|a| a == "--llm-proxy");
        let mut child = c
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // A deadline for a hung start, not a measure of speed: a debug build starting beside
        // the rest of the suite on 2 cores once took more than 20 s.
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut url, mut proxy) = (None, None);
        let mut said = Vec::new();
        while url.is_none() || (proxied && proxy.is_none()) {
            let line = log
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|e| {
                    let status = child.try_wait().ok().flatten();
                    panic!(
                        "serve printed no address ({e}; exited: {status:?}):\n{}",
                        said.join("\n")
                    )
                });
            url = url.or_else(|| url_after(&line, "serving on "));
            proxy = proxy.or_else(|| url_after(&line, "inference proxy on "));
            said.push(line);
        }
        Serve {
            child,
            url: url.unwrap_or_default(),
            proxy,
            log,
        }
    }

    /// The inference proxy's URL.
    pub fn proxy(&self) -> String {
        self.proxy
            .clone()
            .unwrap_or_else(|| panic!("this serve runs no inference proxy"))
    }

    /// Waits until the engine has made `n` inference records; answers them, newest first.
    pub fn records(&self, n: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.get("/v1/inference?limit=100")["records"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if r.len() >= n {
                return r;
            }
            assert!(Instant::now() < deadline, "{} records of {n}", r.len());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The API as the CLI and the windows reach it (writes need [`Client::with_token`]).
    ///
    /// [`Client::with_token`]: wattbar_client::Client::with_token
    pub fn client(&self) -> wattbar_client::Client {
        wattbar_client::Client::at(&self.url)
    }

    /// The body of `GET path` as text (`/metrics`).
    pub fn text(&self, path: &str) -> String {
        self.client()
            .get_text(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    pub fn get(&self, path: &str) -> serde_json::Value {
        self.client()
            .get(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Waits until the first model server followed by its `/metrics` has said it is of
    /// `family` (its first scrape, the baseline of its windows, is in); the view then.
    pub fn followed(&self, family: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let view = self.get("/v1/server-metrics");
            if view["servers"][0]["family"] == family {
                return view;
            }
            assert!(
                Instant::now() < deadline,
                "never followed as {family}: {view}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then the exit status and everything it logged.
    pub fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(killed.is_ok_and(|s| s.success()));
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status;
            }
            assert!(Instant::now() < deadline, "serve did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let lines = self.log.try_iter().collect();
        (status, lines)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a test server of `tests/` under node, which prints `{"port": N}` once it listens on
/// loopback; the process and its URL.
pub fn node_server(script: &str, args: &[&str]) -> (Child, String) {
    let (child, v) = node_server_said(script, args);
    let port = v["port"].as_u64().unwrap_or_else(|| panic!("{v}"));
    (child, format!("http://127.0.0.1:{port}"))
}

/// [`node_server`], with the whole first line it printed.
pub fn node_server_said(script: &str, args: &[&str]) -> (Child, serde_json::Value) {
    let mut child = Command::new("node")
        .arg(repo_root().join(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    (child, v)
}

/// The resident memory of process `pid`, MiB.
pub fn rss_mib(pid: u32) -> f64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_else(|e| panic!("{e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// A server on a loopback port of its own that hands each connection to `handle` on a thread of
/// its own; its `http://` URL.
pub fn loopback_server(handle: impl Fn(std::net::TcpStream) + Send + Sync + 'static) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "http://{}",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    let handle = std::sync::Arc::new(handle);
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let handle = std::sync::Arc::clone(&handle);
            std::thread::spawn(move || handle(stream));
        }
    });
    url
}

/// `tests/llm/upstream.mjs`: a model server that serves the genuine captures, paced.
pub struct Upstream {
    child: Child,
    pub url: String,
}

impl Upstream {
    /// Starts it on a free port, `pace_ms` between chunks.
    pub fn start(pace_ms: u64) -> Upstream {
        Upstream::start_with(pace_ms, &[])
    }

    /// Starts it with more of its options (`--ps-pad-mb N`).
    pub fn start_with(pace_ms: u64, extra: &[&str]) -> Upstream {
        let pace = pace_ms.to_string();
        let mut args = vec!["--port", "0", "--pace-ms", &pace];
        args.extend_from_slice(extra);
        let (child, url) = node_server("tests/llm/upstream.mjs", &args);
        Upstream { child, url }
    }

    pub fn stats(&self) -> serde_json::Value {
        http()
            .get(&format!("{}/__stats", self.url))
            .header("Host", "127.0.0.1")
            .call()
            .unwrap_or_else(|e| panic!("{e}"))
            .json()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP for what the typed client does not cover: the proxy, the fake and real model servers,
/// Prometheus.
pub mod http {
    /// ureq with every status an answer (never an error) and no proxy from the environment.
    pub fn http() -> ureq::Agent {
        ureq::Agent::config_builder()
            .proxy(None)
            .http_status_as_error(false)
            .build()
            .into()
    }

    /// What tests read of an answer.
    pub trait Answer {
        fn code(&self) -> u16;
        fn header_str(&self, name: &str) -> Option<&str>;
        /// The whole body as text; panics where it cannot be read.
        fn text(self) -> String;
        fn json(self) -> serde_json::Value;
        fn reader(self) -> ureq::BodyReader<'static>;
    }

    impl Answer for ureq::http::Response<ureq::Body> {
        fn code(&self) -> u16 {
            self.status().as_u16()
        }

        fn header_str(&self, name: &str) -> Option<&str> {
            self.headers().get(name).and_then(|v| v.to_str().ok())
        }

        fn text(mut self) -> String {
            self.body_mut()
                .with_config()
                .limit(1 << 30)
                .read_to_string()
                .unwrap_or_else(|e| panic!("{e}"))
        }

        fn json(self) -> serde_json::Value {
            let text = self.text();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        }

        fn reader(self) -> ureq::BodyReader<'static> {
            self.into_body().into_reader()
        }
    }
}
