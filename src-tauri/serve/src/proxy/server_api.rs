//! The proxy's own calls to the model server's API, besides the requests it passes on: which
//! models it holds (`GET /api/ps`) and unloading one. Each answer is read up to
//! [`MAX_ANSWER_BYTES`], in [`TIMEOUT`].

use super::body::{error_chain, full, ProxyBody};
use super::upstream::Upstream;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::time::Duration;
use wattbar_core::inference::resident::Loaded;

/// Most bytes of an answer read: a list of loaded models, or one unload's short answer.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// How long each call may take.
const TIMEOUT: Duration = Duration::from_secs(10);

pub(super) type HttpClient = Client<HttpConnector, ProxyBody>;

/// Why [`ps`] has no answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum PsError {
    /// The server has no `/api/ps` (llama.cpp's): it cannot say, now or later.
    NotOffered(String),
    /// It could not be reached, answered an error or something unreadable.
    Failed(String),
}

impl std::fmt::Display for PsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PsError::NotOffered(s) | PsError::Failed(s) => f.write_str(s),
        }
    }
}

pub(super) async fn send(
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
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| match e.downcast_ref::<LengthLimitError>() {
                Some(_) => format!(
                    "the answer is over {} KiB, more than any list of models",
                    MAX_ANSWER_BYTES / 1024
                ),
                None => error_chain(e.as_ref()),
            })?
            .to_bytes();
        Ok::<_, String>((status, bytes))
    });
    answer
        .await
        .map_err(|_| format!("{path}: no answer within {} s", TIMEOUT.as_secs()))?
}

/// The models the server holds now.
pub(super) async fn ps(client: &HttpClient, upstream: &Upstream) -> Result<Vec<Loaded>, PsError> {
    let (status, body) = send(client, upstream, Method::GET, "/api/ps", Bytes::new())
        .await
        .map_err(|e| PsError::Failed(format!("GET /api/ps at {upstream}: {e}")))?;
    if status == StatusCode::NOT_FOUND {
        return Err(PsError::NotOffered(format!(
            "the model server at {upstream} has no /api/ps: it cannot say which models it \
             holds, nor unload them (Ollama can; llama.cpp's server cannot)"
        )));
    }
    if !status.is_success() {
        return Err(PsError::Failed(format!(
            "GET /api/ps at {upstream} answered {status}"
        )));
    }
    let models = wattbar_sources::ollama::parse_ps(&String::from_utf8_lossy(&body))
        .map_err(|e| PsError::Failed(format!("GET /api/ps at {upstream}: {e}")))?;
    Ok(models
        .into_iter()
        .map(|m| Loaded {
            name: m.name,
            size_vram_bytes: m.size_vram_bytes,
            size_bytes: m.size_bytes,
        })
        .collect())
}
