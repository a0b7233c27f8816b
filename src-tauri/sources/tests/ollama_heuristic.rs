//! The Ollama model-size heuristic end to end: a tiny HTTP server on 127.0.0.1 stands in for
//! Ollama and serves `/api/ps` bodies.

use crate::refusing_port;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;
use wattbar_core::{Domain, Quality, Source, Stamp, Watts};
use wattbar_sources::ollama::{OllamaHeuristic, NO_MODEL_LOADED};
use wattbar_sources::Error;

fn at(secs: u64) -> Stamp {
    Stamp::new(Duration::from_secs(secs), 1_700_000_000.0)
}

/// Serves one response per `(status line, body)`, one connection each, on one thread. Returns
/// the base URL and the thread, which yields the request lines it saw.
fn serve(responses: Vec<(&'static str, String)>) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let handle = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for (status, body) in responses {
            let (mut stream, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
            let mut reader = BufReader::new(stream.try_clone().unwrap_or_else(|e| panic!("{e}")));
            let mut request_line = String::new();
            reader
                .read_line(&mut request_line)
                .unwrap_or_else(|e| panic!("{e}"));
            requests.push(request_line.trim_end().to_string());
            loop {
                let mut header = String::new();
                let n = reader
                    .read_line(&mut header)
                    .unwrap_or_else(|e| panic!("{e}"));
                if n == 0 || header == "\r\n" {
                    break;
                }
            }
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream
                .write_all(reply.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        requests
    });
    (format!("http://{addr}"), handle)
}

fn model(name: &str, size_vram: u64) -> String {
    format!(
        r#"{{"name":"{name}","model":"{name}","size":{size_vram},"digest":"x","details":{{"format":"gguf"}},"expires_at":"2024-06-04T14:38:31.83753-07:00","size_vram":{size_vram}}}"#
    )
}

#[test]
fn the_source_reads_the_loaded_models_from_api_ps() {
    let two = format!(
        r#"{{"models":[{},{}]}}"#,
        model("mistral:latest", 5_137_025_024),
        model("llama3.2:latest", 2_000_000_000)
    );
    let (base, server) = serve(vec![
        ("200 OK", two),
        ("200 OK", r#"{"models":[]}"#.to_string()),
    ]);
    let mut source = OllamaHeuristic::new(base, 2.0);
    assert_eq!(source.id(), "ollama-heuristic");
    assert_eq!(source.quality(), Quality::Heuristic);

    let sample = source.sample(at(1)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sample.readings.len(), 1);
    let r = &sample.readings[0];
    assert_eq!(r.domain, Domain::Gpu);
    assert_eq!(r.source, "ollama-heuristic");
    assert_eq!(r.quality, Quality::Heuristic);
    // (5.137025024 + 2.0) GB × 2 W/GB.
    let w = r.watts.unwrap_or(Watts(-1.0)).0;
    assert!((w - 14.274_050_048).abs() < 1e-9, "{w}");
    assert_eq!(sample.state["ollama_models"][1]["name"], "llama3.2:latest");
    assert_eq!(
        sample.state["ollama_models"][0]["size_vram_bytes"],
        5_137_025_024u64
    );

    // The models were unloaded: no reading, and the reason says so.
    let err = source.read(at(2)).err().map(|e| e.to_string());
    assert_eq!(err, Some(format!("transient: {NO_MODEL_LOADED}")));

    let requests = server.join().unwrap_or_else(|_| panic!("server thread"));
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].starts_with("GET /api/ps HTTP/1.1"),
        "{requests:?}"
    );
}

#[test]
fn ollama_not_running_is_a_reason_not_zero_watts() {
    let (_held, port) = refusing_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut source = OllamaHeuristic::new(base.clone(), 2.0);
    match source.sample(at(1)) {
        Err(Error::Transient(reason)) => {
            assert!(reason.contains("Ollama is not answering"), "{reason}");
            assert!(reason.contains(&base), "{reason}");
        }
        other => panic!("expected a transient error, got {other:?}"),
    }
    assert!(source.read(at(2)).is_err());
}

#[test]
fn an_ollama_that_is_not_running_is_asked_again_after_10_20_40_then_every_60_s() {
    let (held, port) = refusing_port();
    let mut source = OllamaHeuristic::new(format!("http://127.0.0.1:{port}"), 2.0);
    let first = source.sample(at(0)).err();
    assert!(first.is_some());
    // Asked again at 10, 30, 70 and 130 s, refused each time.
    for t in [10, 30, 70, 130] {
        assert_eq!(source.sample(at(t)).err(), first, "at {t} s");
    }
    // Ollama starts on that port: until 190 s the source repeats the old reason...
    held.listen(16).unwrap_or_else(|e| panic!("{e}"));
    let listener = TcpListener::from(held);
    listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    for t in [131, 160, 189] {
        assert_eq!(source.sample(at(t)).err(), first, "at {t} s");
    }
    assert!(
        listener.accept().is_err(),
        "it connected during the quiet time"
    );
    // ...and at 190 s it asks again: the connection is queued before `sample` returns.
    let _ = source.sample(at(190));
    assert!(listener.accept().is_ok(), "it did not ask again at 190 s");
}

#[test]
fn an_http_error_or_a_model_only_in_system_memory_gives_no_reading() {
    let (base, server) = serve(vec![
        ("500 Internal Server Error", "{}".to_string()),
        ("200 OK", format!(r#"{{"models":[{}]}}"#, model("phi3", 0))),
        ("200 OK", "not json".to_string()),
    ]);
    let mut source = OllamaHeuristic::new(base, 2.0);
    let e1 = source.sample(at(1)).err().map(|e| e.to_string());
    assert!(
        e1.as_deref().is_some_and(|e| e.contains("HTTP 500")),
        "{e1:?}"
    );
    let e2 = source.sample(at(2)).err().map(|e| e.to_string());
    assert!(
        e2.as_deref()
            .is_some_and(|e| e.contains("phi3") && e.contains("not VRAM")),
        "{e2:?}"
    );
    assert!(matches!(source.sample(at(3)), Err(Error::Parse { .. })));
    server.join().unwrap_or_else(|_| panic!("server thread"));
}
