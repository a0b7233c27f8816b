//! The client against a real engine and its API on a replayed trace, found through a real data
//! folder's lock file, and against a peer that accepts and never answers.

use super::*;
use std::net::TcpListener;
use wattbar_core::{Chain, Preferences, Source};
use wattbar_engine::{spawn, EngineConfig};
use wattbar_serve::api::{self, ApiConfig};
use wattbar_sources::replay::parse_trace;
use wattbar_sources::ReplaySource;

/// An engine recording into `dir` at a steady 42 W, its API on a port of its own, named in the
/// folder's lock file as the app names it.
fn engine_in(dir: &Path) -> (tokio::runtime::Runtime, wattbar_engine::EngineHandle) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let trace = parse_trace("t,watts\n0,42\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
    let mut config = EngineConfig::new(Preferences {
        interval_ms: 100,
        ..Preferences::default()
    })
    .with_store(dir.join("wattbar.db"));
    config.api = Some(addr.to_string());
    let engine = spawn(Chain::new(sources), config).unwrap_or_else(|e| panic!("{e}"));
    let token =
        wattbar_engine::home::secrets::load_or_create(dir).unwrap_or_else(|e| panic!("{e}"));
    let api_config = ApiConfig {
        token,
        ..ApiConfig::default()
    };
    runtime.spawn(api::serve(
        listener,
        engine.reader(),
        api_config,
        std::future::pending(),
    ));
    (runtime, engine)
}

#[test]
fn a_client_finds_the_engine_by_its_folder_reads_follows_and_writes_with_its_token() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (_runtime, _engine) = engine_in(dir.path());
    let client =
        Client::find(dir.path(), Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    let snapshot = client.get("/v1/snapshot").unwrap_or_else(|e| panic!("{e}"));
    assert!(snapshot.is_object(), "{snapshot}");
    let state: Value = client
        .stream()
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .filter_map(|s| serde_json::from_str::<Value>(&s).ok())
        .find(|s| s["watts"].as_f64() == Some(42.0))
        .unwrap_or_else(|| panic!("no state at 42 W"));
    assert!(state["seq"].as_u64().is_some(), "{state}");
    // A write with the folder's token is taken; without a token it is refused, and the refusal
    // carries the engine's words.
    let prefs = client
        .put("/v1/preferences/interval_ms", &serde_json::json!(500))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prefs["interval_ms"], 500, "{prefs}");
    let anonymous = Client::at(client.base());
    let refused = anonymous.put("/v1/preferences/interval_ms", &serde_json::json!(250));
    assert_eq!(refused.as_ref().err().and_then(Error::status), Some(401));
    let invalid = client.put("/v1/preferences/interval_ms", &serde_json::json!("fast"));
    match invalid {
        Err(Error::Refused {
            status: 400,
            field,
            message,
            ..
        }) => {
            assert_eq!(field.as_deref(), Some("interval_ms"), "{message}");
            assert!(!message.is_empty());
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn no_engine_is_not_running_and_an_engine_that_never_answers_is_unreachable_not_a_hang() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        Client::find(dir.path(), Duration::ZERO),
        Err(Error::NotRunning(_))
    ));
    // A peer that takes the connection and says nothing, as a wedged engine would.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = silent.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        let conn = silent.accept();
        let _ = wait.recv();
        drop(conn);
    });
    let client = Client::at(&addr.to_string()).with_timeout(Duration::from_millis(300));
    assert!(matches!(
        client.get("/v1/snapshot"),
        Err(Error::Unreachable { .. })
    ));
    drop(done);
    let _ = held.join();
}

#[test]
fn a_stream_event_over_4_mib_ends_the_stream_saying_so_after_the_events_before_it() {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let peer = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
        let mut request = [0u8; 4096];
        let _ = conn.read(&mut request);
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\
              : a comment line, skipped\r\ndata: {\"watts\":42}\r\n\r\n",
        );
        // A line that is not data, 5 MiB long: skipped without being held.
        let _ = conn.write_all(&vec![b':'; 5 << 20]);
        let _ = conn.write_all(b"\r\n");
        // One `data:` line of 6 MiB with no end: the client must not wait for its end.
        let _ = conn.write_all(b"data: ");
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..6 {
            if conn.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut stream = Client::at(&addr.to_string())
        .stream()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stream.next().map(|r| r.unwrap_or_else(|e| panic!("{e}"))),
        Some("{\"watts\":42}".to_string())
    );
    let refused = stream.next();
    assert!(
        matches!(&refused, Some(Err(Error::BadAnswer { why, .. })) if why.contains("over 4 MiB")),
        "{refused:?}"
    );
    assert!(stream.next().is_none());
    drop(stream);
    let _ = peer.join();
}
