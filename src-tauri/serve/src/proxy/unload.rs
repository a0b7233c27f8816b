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

use super::server_api::{ps, send, HttpClient};
use super::upstream::Upstream;
use bytes::Bytes;
use hyper::Method;
use wattbar_core::inference::model_key;
use wattbar_core::inference::resident::Unload;

/// Unloads the idle models each time the mode switches on, until the engine stops; each
/// outcome goes to the engine, which records it and says it once.
pub(super) async fn follow(
    engine: wattbar_engine::EngineReader,
    upstream: Upstream,
    client: HttpClient,
) {
    let mut engaged = engine.engagements();
    let reporter = engine.reporter();
    while engaged.changed().await.is_ok() {
        if !engine.current().prefs.low_power.unload_idle {
            continue;
        }
        let unload = unload_idle(&engine, &upstream, &client).await;
        match &unload.error {
            None => tracing::info!(
                "low-power mode: unloaded {:?} from {upstream}; kept {:?} (requests in flight)",
                unload.unloaded,
                unload.kept
            ),
            Some(e) => tracing::warn!(
                "low-power mode: unloaded {:?}, then stopped: {e}",
                unload.unloaded
            ),
        }
        reporter.unloaded(unload);
    }
}

/// Unloads each model the server holds that no request in flight is using; stops at the first
/// failure, saying what was done before it. `t` is left for the reporter to stamp.
pub(super) async fn unload_idle(
    engine: &wattbar_engine::EngineReader,
    upstream: &Upstream,
    client: &HttpClient,
) -> Unload {
    let mut out = Unload {
        t: 0.0,
        server: upstream.to_string(),
        unloaded: Vec::new(),
        kept: Vec::new(),
        error: None,
    };
    let loaded = match ps(client, upstream).await {
        Ok(loaded) => loaded,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    // Requests name models as users type them (`gemma3`); the server lists `gemma3:latest`.
    // As the engine last published them: every start and end is published at once.
    let in_flight: std::collections::BTreeSet<String> = engine
        .current()
        .inference
        .models_in_flight
        .iter()
        .map(|m| model_key(m))
        .collect();
    for model in loaded {
        if in_flight.contains(&model_key(&model.name)) {
            out.kept.push(model.name);
            continue;
        }
        // Not streamed: one short answer (Ollama's `done_reason: "unload"`).
        let ask = serde_json::json!({ "model": model.name, "keep_alive": 0, "stream": false })
            .to_string();
        let sent = send(
            client,
            upstream,
            Method::POST,
            "/api/generate",
            Bytes::from(ask),
        )
        .await;
        match sent {
            Ok((status, _)) if status.is_success() => out.unloaded.push(model.name),
            Ok((status, body)) => {
                out.error = Some(format!(
                    "unloading {} answered {status}: {}",
                    model.name,
                    String::from_utf8_lossy(&body)
                ));
                return out;
            }
            Err(e) => {
                out.error = Some(format!("unloading {}: {e}", model.name));
                return out;
            }
        }
    }
    out
}
