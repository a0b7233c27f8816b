//! `wattbar-cli --version` and `--help` print and exit, with no engine started.

use crate::common::cli;

#[test]
fn version_and_help_print_and_exit_with_no_engine_started() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = cli(dir.path())
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    // The workspace's version and the commit checked out, which a fresh clone builds.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(head.len(), 12, "git rev-parse: {head}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("wattbar-cli {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
    let out = cli(dir.path())
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: wattbar-cli <COMMAND>"));
    let out = cli(dir.path())
        .arg("--bogus")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // Nothing was started: no lock, ledger or token in the data folder.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A loopback server that answers every request with `body`; its URL.
fn serve_bytes(body: Vec<u8>) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let url = format!(
        "http://{}/manifest.json",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = &stream;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    url
}

/// `manifest` signed with the test key of `seed`, as a release would publish it; and that key's
/// public half, base64.
fn signed(seed: u8, manifest: &str) -> (Vec<u8>, String) {
    wattbar_release::update::sign(&[seed; 32], manifest)
}

fn check(dir: &std::path::Path, url: Option<&str>, key: &str) -> std::process::Output {
    let mut c = cli(dir);
    c.env("WATTBAR_UPDATE_TEST_KEY", key)
        .args(["version", "--check"]);
    if let Some(url) = url {
        c.args(["--manifest", url]);
    }
    c.output().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_newer_signed_release_is_reported_with_how_to_update_and_a_tampered_one_is_refused() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let manifest = r#"{"version": "99.0.0", "released": "2027-01-01", "expires": "2100-01-01"}"#;
    let (body, key) = signed(42, manifest);

    let out = check(dir.path(), Some(&serve_bytes(body.clone())), &key);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        said.contains("a newer release exists: 99.0.0, released 2027-01-01"),
        "{said}"
    );
    // The test's program belongs to no package: a source build.
    assert!(
        said.contains("Update with: a new build from source"),
        "{said}"
    );

    // One byte of the signed text changed (99.0.0 → 99.0.1): refused, and nothing of it shown.
    let tampered = String::from_utf8_lossy(&body).replace("99.0.0", "99.0.1");
    let out = check(dir.path(), Some(&serve_bytes(tampered.into_bytes())), &key);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refused") && err.contains("does not verify"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("99.0"),
        "{out:?}"
    );

    // Signed, but by a key this program does not trust.
    let (foreign, _) = signed(43, manifest);
    let out = check(dir.path(), Some(&serve_bytes(foreign)), &key);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn the_same_release_is_up_to_date_and_the_check_is_off_until_a_url_is_set() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let manifest = format!(
        r#"{{"version": "{}", "expires": "2100-01-01"}}"#,
        env!("CARGO_PKG_VERSION")
    );
    let (body, key) = signed(42, &manifest);
    let out = check(dir.path(), Some(&serve_bytes(body)), &key);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));

    let out = check(dir.path(), None, &key);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("the update check is off"));
}

#[test]
fn an_expired_manifest_and_an_older_one_replayed_are_refused_and_say_why() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Signed by the right key, but its time is over.
    let (expired, key) = signed(42, r#"{"version": "99.0.0", "expires": "2000-01-01"}"#);
    let out = check(dir.path(), Some(&serve_bytes(expired)), &key);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expired on 2000-01-01"), "{err}");

    // 99.0.0 taken, then 98.0.0 (signed and in its time, but older): a replay.
    let (newer, _) = signed(42, r#"{"version": "99.0.0", "expires": "2100-01-01"}"#);
    let out = check(dir.path(), Some(&serve_bytes(newer)), &key);
    assert!(out.status.success(), "{out:?}");
    let (older, _) = signed(42, r#"{"version": "98.0.0", "expires": "2100-01-01"}"#);
    let out = check(dir.path(), Some(&serve_bytes(older)), &key);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("older than 99.0.0"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("98.0.0"));
}
