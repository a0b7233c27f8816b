//! Unloading idle models when low-power mode switches on (preference
//! `unload_idle_models_in_low_power`, off by default).
//!
//! Rules:
//! - Woken only when the mode switches on, never by the samples in between.
//! - With the preference on, the server is asked which models it holds (`GET /api/ps`), and each
//!   one no request through the proxy is using is unloaded the way Ollama does it: one
//!   `POST /api/generate {"model": name, "keep_alive": 0, "stream": false}` per model, nothing
//!   else.
//! - A server without `/api/ps` (llama.cpp's) cannot unload: that is said, and nothing is sent.
//! - Each outcome is logged once per engagement.

use super::body::{error_chain, full, ProxyBody};
use super::upstream::Upstream;
use crate::inference::Tracker;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::time::Duration;

/// How long each request to the model server may take.
const TIMEOUT: Duration = Duration::from_secs(10);

type HttpClient = Client<HttpConnector, ProxyBody>;

/// Unloads the idle models each time the mode switches on, until the engine stops.
pub(super) async fn follow(engine: crate::EngineReader, upstream: Upstream, client: HttpClient) {
    let mut engaged = engine.engagements();
    while engaged.changed().await.is_ok() {
        if !engine.current().prefs.low_power.unload_idle {
            continue;
        }
        match unload_idle(&engine.tracker(), &upstream, &client).await {
            Ok(Unloaded { done, busy }) => tracing::info!(
                "low-power mode: unloaded {} idle model(s) {done:?} from {upstream}; kept {busy:?} \
                 (requests in flight)",
                done.len()
            ),
            Err(e) => tracing::warn!("low-power mode: no model was unloaded: {e}"),
        }
    }
}

/// What [`unload_idle`] did.
#[derive(Debug, PartialEq)]
pub(super) struct Unloaded {
    pub done: Vec<String>,
    /// Loaded, and left loaded: a request was using it.
    pub busy: Vec<String>,
}

async fn send(
    client: &HttpClient,
    upstream: &Upstream,
    method: Method,
    path: &str,
    body: Bytes,
) -> Result<(StatusCode, Bytes), String> {
    let uri = upstream.uri(path).map_err(|e| e.to_string())?;
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(hyper::header::HOST, upstream.authority.clone())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(full(body))
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(TIMEOUT, async {
        let response = client.request(request).await.map_err(|e| error_chain(&e))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| error_chain(&e))?
            .to_bytes();
        Ok::<_, String>((status, bytes))
    });
    answer
        .await
        .map_err(|_| format!("{path}: no answer within {} s", TIMEOUT.as_secs()))?
}

/// Unloads each model the server holds that no request in flight is using.
pub(super) async fn unload_idle(
    tracker: &Tracker,
    upstream: &Upstream,
    client: &HttpClient,
) -> Result<Unloaded, String> {
    let (status, body) = send(client, upstream, Method::GET, "/api/ps", Bytes::new()).await?;
    if status == StatusCode::NOT_FOUND {
        return Err(format!(
            "the model server at {upstream} has no /api/ps: it cannot say which models it \
             holds, nor unload them (Ollama can; llama.cpp's server cannot)"
        ));
    }
    if !status.is_success() {
        return Err(format!("GET /api/ps at {upstream} answered {status}"));
    }
    let text = String::from_utf8_lossy(&body);
    let loaded = wattbar_sources::ollama::parse_ps(&text).map_err(|e| e.to_string())?;
    let in_flight = tracker.models_in_flight();
    let mut out = Unloaded {
        done: Vec::new(),
        busy: Vec::new(),
    };
    for model in loaded {
        if in_flight.contains(&model.name) {
            out.busy.push(model.name);
            continue;
        }
        // Not streamed: one short answer (Ollama's `done_reason: "unload"`).
        let ask = serde_json::json!({ "model": model.name, "keep_alive": 0, "stream": false })
            .to_string();
        let (status, body) = send(
            client,
            upstream,
            Method::POST,
            "/api/generate",
            Bytes::from(ask),
        )
        .await?;
        if !status.is_success() {
            return Err(format!(
                "unloading {} answered {status}: {}",
                model.name,
                String::from_utf8_lossy(&body)
            ));
        }
        out.done.push(model.name);
    }
    Ok(out)
}
