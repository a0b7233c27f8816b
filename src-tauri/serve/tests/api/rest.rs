//! The engine's pace at rest as the API sets it: any request but `/metrics` brings back the
//! configured pace, and an open event stream holds it there.

use super::*;
use std::sync::Arc;
use wattbar_core::{Domain, Joules, Quality, Reading, Stamp, Watts};
use wattbar_engine::PublishedState;

/// A GPU at 100 W counting its energy in real time: a headline from a counter.
struct Counter(Instant);

impl Source for Counter {
    fn id(&self) -> &str {
        "nvml"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        Ok(vec![Reading {
            energy_counter: Some(Joules(100.0 * self.0.elapsed().as_secs_f64())),
            ..Reading::power(Domain::Gpu, Watts(100.0), "nvml", Quality::Measured, at)
                .with_device("0")
        }])
    }
}

/// 100 ms while someone looks, 1 s at rest, resting 3 s after the last request.
async fn resting_server() -> Server {
    let prefs = Preferences {
        interval_ms: 100,
        rest_interval_ms: 1000,
        ..Preferences::default()
    };
    let mut config = EngineConfig::new(prefs).resting_when_unwatched();
    config.rest_after = Duration::from_secs(3);
    let sources: Vec<Box<dyn Source>> = vec![Box::new(Counter(Instant::now()))];
    Server::start_engine(config, sources, "127.0.0.1:0", |_, _| {}).await
}

/// The first state published after `seq` for which `pred` holds, within 10 s.
async fn published_after(
    server: &Server,
    seq: u64,
    pred: impl Fn(&PublishedState) -> bool,
) -> Arc<PublishedState> {
    let mut rx = server.engine.subscribe();
    let wait = async {
        loop {
            let p = rx.borrow_and_update().clone();
            if p.seq > seq && pred(&p) {
                return p;
            }
            if rx.changed().await.is_err() {
                panic!("engine stopped");
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .unwrap_or_else(|_| panic!("not published within 10 s"))
}

/// The next sample's state after the current one.
async fn next_sample(server: &Server) -> Arc<PublishedState> {
    let now = server.engine.current();
    let at = |p: &PublishedState| p.snapshot.as_ref().map(|s| s.at.monotonic);
    let before = at(&now);
    published_after(server, now.seq, |p| at(p) > before).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_wakes_the_resting_engine_and_a_prometheus_scrape_does_not() {
    let server = resting_server().await;
    published_after(&server, 0, |p| p.pace.period_ms == 1000).await;
    // Prometheus asks every second: the engine stays at rest.
    for _ in 0..3 {
        let scrape = server.get("/metrics").await;
        assert_eq!(scrape.status, 200);
        assert!(scrape.body.contains("wattbar_sample_age_seconds"));
        assert_eq!(next_sample(&server).await.pace.period_ms, 1000);
    }
    // Anything else is someone looking: the configured pace from the next sample on.
    assert_eq!(server.get("/v1/snapshot").await.status, 200);
    assert_eq!(next_sample(&server).await.pace.period_ms, 100);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_event_stream_holds_the_pace_until_it_closes() {
    let server = resting_server().await;
    published_after(&server, 0, |p| p.pace.period_ms == 1000).await;
    let (addr, host) = (server.addr, server.host());
    let mut stream = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        let req = format!("GET /v1/stream HTTP/1.1\r\nHost: {host}\r\n\r\n");
        s.write_all(req.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        s
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let awake = published_after(&server, 0, |p| p.pace.period_ms == 100).await;
    // Twice the quiet it rests after, and still at the configured pace.
    let held = published_after(&server, awake.seq, |p| {
        p.snapshot
            .as_ref()
            .zip(awake.snapshot.as_ref())
            .is_some_and(|(a, b)| a.at.monotonic >= b.at.monotonic + Duration::from_secs(6))
    })
    .await;
    assert_eq!(held.pace.period_ms, 100);
    // Closed: at rest again.
    let _ = stream.write_all(b"");
    drop(stream);
    published_after(&server, held.seq, |p| p.pace.period_ms == 1000).await;
    server.stop().await;
}
