//! Writes: the bearer token, the origin, bad requests and preferences.

use super::*;

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
        !server.engine.current().low_power.state.enabled,
        "nothing changed"
    );
    // An array of the fields in order is not the documented object.
    let array = server.write("PUT", "/v1/low-power", "[true]").await;
    assert_eq!(array.status, 400, "{array:?}");
    assert!(!server.engine.current().low_power.state.enabled);
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
    assert!(!server.engine.current().low_power.state.enabled);
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
        rx.wait_for(|p| p.low_power.state.enabled),
    )
    .await
    .is_ok_and(|seen| seen.is_ok());
    assert!(applied, "the accepted change was never applied");
    server.stop().await;
}
