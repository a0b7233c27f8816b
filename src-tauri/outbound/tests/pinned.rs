//! A Home Assistant behind the self-signed certificate its docs describe (`openssl req -x509
//! -newkey rsa:4096 -keyout key.pem -out cert.pem -days 365 -nodes`), served by rustls on
//! loopback: refused against the system's roots with the fingerprint it saw, trusted once that
//! fingerprint is pinned, refused again under another pin.
#![cfg(not(target_os = "macos"))]

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use wattbar_outbound::{agent_with, config, Pin, WALL_METER};

/// The docs' self-signed certificate (CA:TRUE, as `openssl req -x509` makes it) and its key.
fn self_signed(dir: &Path) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-days", "365", "-nodes", "-subj", "/CN=homeassistant.local"])
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e}"));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let certs = CertificateDer::pem_file_iter(&cert)
        .unwrap_or_else(|e| panic!("{e}"))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{e}"));
    let key = PrivateKeyDer::from_pem_file(&key).unwrap_or_else(|e| panic!("{e}"));
    (certs, key)
}

/// An https server on loopback answering every request with a Home Assistant state; its port.
fn serve(certs: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("{e}"))
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap_or_else(|e| panic!("{e}"));
    let tls = Arc::new(tls);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().map_while(Result::ok) {
            let Ok(conn) = rustls::ServerConnection::new(tls.clone()) else {
                continue;
            };
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let body = r#"{"entity_id":"sensor.plug_power","state":"42.5"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.flush();
            stream.conn.send_close_notify();
            let _ = stream.flush();
        }
    });
    port
}

fn ask(port: u16, pin: Option<Pin>) -> Result<String, String> {
    let agent = agent_with(
        config(&WALL_METER, true)
            .map_err(|e| e.to_string())?
            .build(),
        ureq::unversioned::resolver::DefaultResolver::default(),
        pin,
    )
    .map_err(|e| e.to_string())?;
    let mut answer = agent
        .get(format!(
            "https://127.0.0.1:{port}/api/states/sensor.plug_power"
        ))
        .call()
        .map_err(|e| wattbar_outbound::reason(&e))?;
    answer
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())
}

#[test]
fn a_self_signed_home_assistant_is_refused_with_its_fingerprint_and_trusted_once_pinned() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (certs, key) = self_signed(dir.path());
    let fingerprint = Pin::of(certs[0].as_ref());
    let port = serve(certs, key);

    let refused = ask(port, None).err().unwrap_or_default();
    assert!(
        refused.contains(&fingerprint.to_string()) && refused.contains("tls_pin_sha256"),
        "{refused}"
    );

    let pinned = ask(port, Some(fingerprint)).unwrap_or_else(|e| panic!("{e}"));
    assert!(pinned.contains(r#""state":"42.5""#), "{pinned}");

    let other = Pin::of(b"another certificate");
    let refused = ask(port, Some(other)).err().unwrap_or_default();
    assert!(
        refused.contains(&format!("not the pinned {other}")),
        "{refused}"
    );
}
