//! What Wattbar asks of other machines, under the outbound policy: https checked against the
//! roots the system trusts (a CA the test makes, trusted through `SSL_CERT_FILE` or not), no
//! downgrade to plain http, and no secret on a command line or in a log.

use crate::common::{cli, node_server_said, Serve};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A CA and a certificate it issued for localhost and 127.0.0.1; and a second CA that issued
/// nothing here.
struct Pki {
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e}"));
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

fn pki(dir: &Path) -> Pki {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for name in ["ca", "other-ca"] {
        let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
        let subject = format!("/CN=Wattbar test {name}");
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend([
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            &subject,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(dir, &args);
    }
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend([
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    Pki {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        cert: dir.join("leaf.pem"),
        key: dir.join("leaf.key"),
    }
}

/// `tests/tls/server.mjs` with the test's certificate, killed when dropped.
struct Https {
    child: Child,
    port: u16,
}

impl Https {
    fn start(pki: &Pki, manifest: &Path, token: &str) -> Https {
        let (child, said) = node_server_said(
            "tests/tls/server.mjs",
            &[
                "--cert",
                &pki.cert.to_string_lossy(),
                "--key",
                &pki.key.to_string_lossy(),
                "--manifest",
                &manifest.to_string_lossy(),
                "--token",
                token,
            ],
        );
        let port = said["port"].as_u64().unwrap_or_default() as u16;
        Https { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }
}

impl Drop for Https {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `wattbar-cli version --check --manifest URL` trusting only the roots in `roots`.
fn check(dir: &Path, url: &str, key: &str, roots: &Path) -> (bool, String, String) {
    let out = cli(dir)
        .env("WATTBAR_UPDATE_TEST_KEY", key)
        .env("SSL_CERT_FILE", roots)
        .env_remove("SSL_CERT_DIR")
        .args(["version", "--check", "--manifest", url])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_manifest_is_read_over_https_once_its_ca_is_trusted_and_refused_with_the_reason_while_not() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pki = pki(dir.path());
    let (body, key) = wattbar_release::update::sign(
        &[42; 32],
        r#"{"version": "99.0.0", "released": "2027-01-01", "expires": "2100-01-01"}"#,
    );
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, body).unwrap_or_else(|e| panic!("{e}"));
    let server = Https::start(&pki, &manifest, "unused");
    let url = server.url("/manifest.json");

    let (ok, said, err) = check(dir.path(), &url, &key, &pki.ca);
    assert!(ok, "{said}{err}");
    assert!(said.contains("a newer release exists: 99.0.0"), "{said}");

    // The system's roots, as this test sets them, do not hold the CA: refused, and said why.
    let (ok, said, err) = check(dir.path(), &url, &key, &pki.other_ca);
    eprintln!("untrusted: {err}");
    assert!(!ok, "{said}");
    assert!(err.contains("certificate"), "{err}");
    assert!(!said.contains("99.0.0"), "{said}");

    // A redirect from https to plain http is not followed.
    let (ok, _, err) = check(dir.path(), &server.url("/to-http"), &key, &pki.ca);
    eprintln!("downgrade: {err}");
    assert!(!ok);
    assert!(err.contains("plain http"), "{err}");
}

/// A file only its owner reads, holding `secret`.
fn secret_file(dir: &Path, name: &str, secret: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("{secret}\n")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    path
}

/// `serve` with the Home Assistant sensor as its wall meter, trusting only `roots`.
fn serve_reading_home_assistant(
    dir: &Path,
    server: &Https,
    token_file: &Path,
    roots: &Path,
) -> Serve {
    let trace = dir.join("trace.csv");
    std::fs::write(&trace, "t,watts,domain\n0,60,cpu\n").unwrap_or_else(|e| panic!("{e}"));
    let mut c = cli(dir);
    c.env("WATTBAR_REPLAY", &trace)
        .env("SSL_CERT_FILE", roots)
        .env_remove("SSL_CERT_DIR")
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--batch",
            "500ms",
            "--wall-meter",
        ])
        .arg(server.url("/api/states/sensor.plug_power"))
        .arg("--wall-meter-token-file")
        .arg(token_file);
    Serve::spawn(c)
}

#[test]
fn a_home_assistant_sensor_is_read_over_https_with_its_token_from_a_file_and_never_shown() {
    const TOKEN: &str = "ha-t0ken-s3cret";
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pki = pki(dir.path());
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, "{}").unwrap_or_else(|e| panic!("{e}"));
    let server = Https::start(&pki, &manifest, TOKEN);
    let token_file = secret_file(dir.path(), "ha-token", TOKEN);

    let trusted = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve_reading_home_assistant(trusted.path(), &server, &token_file, &pki.ca);
    // The capture's 77.1 W heads as the wall.
    let deadline = Instant::now() + Duration::from_secs(20);
    let snapshot = loop {
        let s = serve.get("/v1/snapshot");
        if s["scope"] == "wall" {
            break s;
        }
        assert!(Instant::now() < deadline, "the wall never headed: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(snapshot["watts"], 77.1, "{snapshot}");
    // Nothing on its command line, as `ps` shows it to every local user, holds the token.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", serve.child.id()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!String::from_utf8_lossy(&cmdline).contains(TOKEN));
    let (_, log) = serve.terminate();
    assert!(!log.iter().any(|l| l.contains(TOKEN)), "{log:?}");

    // Without the CA among the roots: no wall, and the reason is the certificate.
    let untrusted = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve_reading_home_assistant(untrusted.path(), &server, &token_file, &pki.other_ca);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = serve.get("/v1/snapshot");
        let why = s["unavailable"]
            .as_array()
            .and_then(|u| u.iter().find(|u| u["source"] == "wall-meter"))
            .map(|u| u["reason"].to_string());
        if let Some(why) = why {
            eprintln!("the wall, untrusted: {why}");
            assert!(why.contains("certificate"), "{why}");
            assert_ne!(s["scope"], "wall", "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "no reason for the wall: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_password_on_the_command_line_is_refused_and_never_repeated() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .args([
            "watch",
            "--count",
            "1",
            "--wall-meter",
            "http://admin:hunter2@127.0.0.1:9/",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--wall-meter-password-file"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");

    // An OTLP endpoint with credentials: refused, and the password is not in the message.
    let out = cli(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--otlp-endpoint",
            "http://u:hunter2@127.0.0.1:4318",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("password"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

/// A collector that takes each push and then answers as `answer` does; its URL.
fn hostile_collector(answer: fn(&mut std::net::TcpStream)) -> String {
    use std::io::{BufRead, BufReader, Read};
    crate::common::loopback_server(move |mut stream| {
        let mut reader = BufReader::new(&mut stream);
        let mut length = 0usize;
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            line.clear();
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        answer(&mut stream);
    })
}

fn serve_pushing_to(dir: &Path, url: &str) -> Serve {
    Serve::start(
        dir,
        "t,watts\n0,100\n",
        &["--otlp-endpoint", url, "--otlp-interval", "1s"],
    )
}

#[test]
fn a_collector_that_answers_without_end_costs_no_memory() {
    use std::io::Write;
    // 200, then a body that never ends: 1 MiB of zeros at a time, as fast as it is taken.
    let url = hostile_collector(|stream| {
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\r\n");
        let chunk = vec![0u8; 1 << 20];
        while stream.write_all(&chunk).is_ok() {}
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve_pushing_to(dir.path(), &url);
    let mut peak: f64 = 0.0;
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        peak = peak.max(crate::common::rss_mib(serve.child.id()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, log) = serve.terminate();
    eprintln!("peak RSS {peak:.1} MiB over six pushes of an endless answer");
    // Six pushes, each cut off after 64 KiB: `serve` stays at its size (10 MiB at rest); before
    // the cap, one such collector took it to 2 GB.
    assert!(peak < 50.0, "{peak} MiB");
    assert!(
        log.iter().any(|l| l.contains("cut off past 64 KiB")),
        "{log:?}"
    );
}

#[test]
fn a_collector_that_never_answers_holds_a_stop_a_few_seconds_and_the_store_is_written_first() {
    // Takes each push and says nothing, keeping the connection open.
    let url = hostile_collector(|_| std::thread::sleep(Duration::from_secs(3_600)));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve_pushing_to(dir.path(), &url);
    // A push is in flight (one a second, each waiting out its 10 s).
    std::thread::sleep(Duration::from_secs(3));
    let asked = Instant::now();
    let (status, log) = serve.terminate();
    let took = asked.elapsed();
    eprintln!("stopped in {took:?} with a collector that never answers");
    assert!(status.success(), "{status:?} {log:?}");
    // The last push is given 3 s, far inside a service manager's 10 s; before, 16.9 s.
    assert!(took < Duration::from_secs(8), "{took:?}");
    let written = log.iter().position(|l| l.contains("the store is written"));
    let gave_up = log.iter().position(|l| l.contains("did not finish"));
    assert!(written.is_some() && gave_up.is_some(), "{log:?}");
    assert!(written < gave_up, "{log:?}");
}

/// How many times the https server was asked for `path` (curl, trusting the test's CA).
fn asked(server: &Https, pki: &Pki, path: &str) -> u64 {
    let out = Command::new("curl")
        .args(["-sf", "--cacert"])
        .arg(&pki.ca)
        .arg(server.url("/__asked"))
        .output()
        .unwrap_or_else(|e| panic!("curl: {e}"));
    let asked: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    asked[path].as_u64().unwrap_or(0)
}

#[test]
fn otlp_pushes_over_https_once_its_ca_is_trusted_and_says_the_tls_reason_while_not() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pki = pki(dir.path());
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, "{}").unwrap_or_else(|e| panic!("{e}"));
    let server = Https::start(&pki, &manifest, "unused");
    let pushing = |roots: &Path| {
        let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let trace = data.path().join("trace.csv");
        std::fs::write(&trace, "t,watts\n0,100\n").unwrap_or_else(|e| panic!("{e}"));
        let mut c = cli(data.path());
        c.env("WATTBAR_REPLAY", &trace)
            .env("SSL_CERT_FILE", roots)
            .env_remove("SSL_CERT_DIR")
            .args(["serve", "--listen", "127.0.0.1:0", "--otlp-interval", "1s"])
            .arg("--otlp-endpoint")
            .arg(server.url(""));
        (Serve::spawn(c), data)
    };

    let (serve, _data) = pushing(&pki.ca);
    let deadline = Instant::now() + Duration::from_secs(20);
    while asked(&server, &pki, "/v1/metrics") < 2 {
        assert!(Instant::now() < deadline, "no push arrived over https");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, log) = serve.terminate();
    assert!(!log.iter().any(|l| l.contains("otlp:")), "{log:?}");

    // Roots without the CA: nothing is pushed, and the warning says it is the certificate.
    let before = asked(&server, &pki, "/v1/metrics");
    let (serve, _data) = pushing(&pki.other_ca);
    let deadline = Instant::now() + Duration::from_secs(20);
    let warned = loop {
        let line = serve
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("no warning: {e}"));
        if line.contains("otlp:") {
            break line;
        }
    };
    assert!(warned.contains("certificate"), "{warned}");
    assert_eq!(asked(&server, &pki, "/v1/metrics"), before);
}
