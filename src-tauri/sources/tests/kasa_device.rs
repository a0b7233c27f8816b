//! A Kasa plug asked over its legacy TCP protocol: a loopback server plays the device, speaking
//! the protocol byte for byte, with a captured answer read in place from
//! `../shared/fixtures/plugs/kasa/`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use wattbar_sources::plugs::kasa_tcp::{frame, unscramble, GET_REALTIME};
use wattbar_sources::plugs::{PlugClient, WallMeter};
use wattbar_sources::Error;

fn capture(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/plugs")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A device on loopback port 0: for each connection, reads one framed request and answers
/// `answer(request)` framed, or closes at once when that gives `None`.
fn device(answer: impl Fn(&str) -> Option<String> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut len = [0u8; 4];
            if stream.read_exact(&mut len).is_err() {
                continue;
            }
            let mut payload = vec![0u8; u32::from_be_bytes(len) as usize];
            if stream.read_exact(&mut payload).is_err() {
                continue;
            }
            let request = String::from_utf8(unscramble(&payload)).unwrap_or_default();
            if let Some(text) = answer(&request) {
                let _ = stream.write_all(&frame(text.as_bytes()));
            }
        }
    });
    addr
}

fn meter(addr: &str) -> WallMeter {
    WallMeter {
        url: format!("kasa://{addr}"),
        ..WallMeter::default()
    }
}

#[test]
fn a_kasa_plug_answers_its_emeter_over_tcp_and_is_read_like_its_capture() {
    // The KP125(US) capture: 100 277 mW, 12 170 Wh = 43 812 000 J.
    let answer = capture("kasa/kp125-us-fw1.0.6-emeter-100w.json");
    let addr = device(move |request| (request == GET_REALTIME).then(|| answer.clone()));
    let mut client = PlugClient::new(&meter(&addr)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(client.origin(), format!("kasa://{addr}"));
    let reading = client.read().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reading.watts, Some(100.277));
    assert_eq!(reading.energy_joules, Some(43_812_000.0));
    // Asked again, the same way.
    assert!(client.read().is_ok());
}

#[test]
fn a_plug_that_turns_the_old_protocol_away_is_refused_with_the_reason_never_0_w() {
    // Accepted and closed with nothing said, as KLAP firmware does.
    let addr = device(|_| None);
    let why = PlugClient::new(&meter(&addr)).and_then(|mut c| c.read());
    match why {
        Err(Error::Unavailable(why)) => assert!(why.contains("KLAP"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Nothing listening on the port at all: refused, said the same way.
    let (_held, port) = crate::refusing_port();
    let closed = format!("127.0.0.1:{port}");
    let why = PlugClient::new(&meter(&closed)).and_then(|mut c| c.read());
    assert!(
        matches!(why, Err(Error::Unavailable(ref w)) if w.contains("KLAP")),
        "{why:?}"
    );
    // A plug with no emeter answers an error inside the normal envelope: said, never 0 W.
    let answer = capture("kasa/hs100-us-v2-fw1.5.6-emeter-module-not-support.json");
    let addr = device(move |_| Some(answer.clone()));
    let why = PlugClient::new(&meter(&addr)).and_then(|mut c| c.read());
    assert!(
        matches!(why, Err(Error::Unavailable(ref w)) if w.contains("no energy meter")),
        "{why:?}"
    );
}

#[test]
fn a_plug_that_trickles_its_answer_is_given_up_when_its_time_is_out() {
    // It announces 200 bytes, then sends one every 1.5 s: before, each byte restarted the 2 s
    // limit, and the wall meter's thread was held for five minutes.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let _ = stream.write_all(&200u32.to_be_bytes());
                while stream.write_all(b"x").is_ok() {
                    std::thread::sleep(std::time::Duration::from_millis(1_500));
                }
            });
        }
    });
    let asked = std::time::Instant::now();
    let answer = wattbar_sources::plugs::kasa_tcp::ask(addr, std::time::Duration::from_secs(2));
    let took = asked.elapsed();
    let why = answer.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(why.contains("no whole answer in time"), "{why}");
    // Its 2 s, and the time one read takes to notice.
    assert!(took < std::time::Duration::from_secs(4), "{took:?}");
}
