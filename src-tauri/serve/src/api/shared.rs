//! What every route of one server shares: its configuration and limits, the state behind the
//! routes (the engine, the host guard, the stream slots, the serialized state), and the JSON
//! error and body reader they answer with.

use super::hosts::HostGuard;
use crate::metrics::SelfUsage;
use crate::view::StatePayload;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::Stream;
use wattbar_engine::ledger_reader::LedgerReader;
use wattbar_engine::{EngineReader, PublishedState};

pub const DEFAULT_PORT: u16 = 9471;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9471";
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest span `/v1/history` answers in one request.
pub const MAX_HISTORY_SECONDS: f64 = 400.0 * 86_400.0;
/// How long a write waits for the engine to publish its effect.
pub(super) const APPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// `/v1/stream` clients at once, by default: a dashboard tab or router each. The state is
/// serialized once for all of them, so each costs only its socket.
pub const MAX_STREAMS: usize = 32;
/// `/v1/stream` clients with the token (the app's own windows) that may follow once the others
/// hold every slot: a page or program that opens [`MAX_STREAMS`] streams locks no window out.
pub const OWNER_STREAMS: usize = 4;
/// How long a stream client may leave a state unread once the buffers before it are full; then
/// its slot goes to the next client. A client that reads, however slowly, never meets it.
pub const STREAM_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to send a request's headers, by default; generous for any real client, even on a LAN.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to answer a request, by default; the slowest handler (a write) gives up after 2 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// What a stream client turned away is told to wait, in seconds.
pub(super) const STREAM_RETRY_AFTER_S: u32 = 5;

/// What one server gives its clients at most; the module documentation says how each is applied.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `/v1/stream` clients at once (0: none).
    pub max_streams: usize,
    /// How long a connection may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long a request may take, from its headers to its response.
    pub request_timeout: Duration,
    /// How long a stream client may leave a state unread before its slot is taken back.
    pub stream_write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_streams: MAX_STREAMS,
            header_timeout: HEADER_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            stream_write_timeout: STREAM_WRITE_TIMEOUT,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ApiConfig {
    /// The bearer token writes must carry.
    pub token: String,
    /// Host names accepted besides the loopback ones: [`remote_hosts`](super::hosts::remote_hosts) gives them for a listen
    /// address. Compared as [`hosts`](super::hosts) says; a port here never matches.
    pub extra_hosts: Vec<String>,
    /// The SQLite ledger, read for `/v1/history`.
    pub db_path: Option<PathBuf>,
    /// The dashboard's files, served at `/`.
    pub ui_dir: Option<PathBuf>,
    /// Stream clients and timeouts; `Limits::default()` for the documented defaults.
    pub limits: Limits,
}

pub(super) struct Shared {
    /// The ledger, read-only and bounded; the engine's own when it is the same file.
    pub(super) ledger: Option<LedgerReader>,
    pub(super) engine: EngineReader,
    pub(super) config: ApiConfig,
    /// The names `Host` may carry: loopback and `config.extra_hosts`, with this port or none.
    pub(super) hosts: HostGuard,
    pub(super) closing: watch::Receiver<bool>,
    pub(super) usage: Mutex<Usage>,
    /// One permit per open event stream.
    pub(super) streams: Arc<tokio::sync::Semaphore>,
    /// The slots kept for clients with the token ([`OWNER_STREAMS`]).
    pub(super) owner_streams: Arc<tokio::sync::Semaphore>,
    pub(super) state_json: Arc<StateJson>,
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
}

/// What a write answers when the engine has the change but has not published its effect within
/// [`APPLY_TIMEOUT`] (a slow source holds it): 202, since it will be applied; a retry would
/// apply it twice.
pub(super) fn accepted(what: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({
            "pending": true,
            "message": format!(
                "the engine has {what} and deals with it after the sample it is taking; \
                 read the state to see the outcome"
            ),
        })),
    )
        .into_response()
}

/// What a route answers when the engine or its ledger could not: 503, with `Retry-After` when
/// the ledger was only busy.
pub(super) fn unavailable(e: &wattbar_engine::Error) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    if matches!(e, wattbar_engine::Error::Busy) {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static(LEDGER_RETRY_AFTER_S),
        );
    }
    response
}

/// What a client turned away by a busy ledger is told to wait, in seconds.
const LEDGER_RETRY_AFTER_S: &str = "1";

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

/// The last published state as the JSON the event stream sends, made once per `seq` for every
/// client.
#[derive(Default)]
pub(super) struct StateJson {
    slot: Mutex<Option<(u64, Arc<str>)>>,
}

impl StateJson {
    pub(super) fn get(&self, p: &PublishedState) -> Result<Arc<str>, String> {
        // Serializing under the lock makes clients woken by the same publication wait for the
        // first one's JSON instead of each making their own.
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seq, json)) = slot.as_ref() {
            if *seq == p.seq {
                return Ok(Arc::clone(json));
            }
        }
        let json: Arc<str> = serde_json::to_string(&StatePayload::from(p))
            .map_err(|e| e.to_string())?
            .into();
        // A client that saw an older state than the cached one does not evict the newer JSON
        // that every other client is about to ask for.
        if slot.as_ref().is_none_or(|(seq, _)| *seq < p.seq) {
            *slot = Some((p.seq, Arc::clone(&json)));
        }
        Ok(json)
    }
}

/// Every state `states` publishes from now on (the current one first), as JSON from `cache`.
pub(super) fn state_json_stream(
    states: watch::Receiver<Arc<PublishedState>>,
    cache: Arc<StateJson>,
) -> impl Stream<Item = (u64, Result<Arc<str>, String>)> {
    WatchStream::new(states).map(move |p: Arc<PublishedState>| (p.seq, cache.get(&p)))
}

pub(super) struct Usage {
    system: sysinfo::System,
    pid: Option<sysinfo::Pid>,
}

impl Usage {
    pub(super) fn new() -> Self {
        Usage {
            system: sysinfo::System::new(),
            pid: sysinfo::get_current_pid().ok(),
        }
    }

    pub(super) fn read(&mut self) -> Option<SelfUsage> {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate};
        let pid = self.pid?;
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[pid]),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let p = self.system.process(pid)?;
        // On macOS the physical footprint, as Activity Monitor shows it: RSS there counts every
        // shared framework page whole.
        #[cfg(target_os = "macos")]
        let resident_bytes = wattbar_sources::macos::rusage::read_rusage_v6(std::process::id())
            .map_or_else(|_| p.memory(), |r| r.phys_footprint_bytes);
        #[cfg(not(target_os = "macos"))]
        let resident_bytes = p.memory();
        Some(SelfUsage {
            cpu_seconds: p.accumulated_cpu_time() as f64 / 1000.0,
            resident_bytes,
        })
    }
}

pub(super) fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, (StatusCode, String)> {
    let bytes = body.map_err(|e| (e.status(), e.body_text()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("malformed JSON body: {e}")))
}

/// [`json_body`] for a body documented as a JSON object: serde would also fill a struct from
/// an array of its fields in order (`[true]`), which no client means.
pub(super) fn json_object<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, (StatusCode, String)> {
    let value: serde_json::Value = json_body(body)?;
    if !value.is_object() {
        return Err((
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object".into(),
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("malformed JSON body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_ledger_is_503_with_when_to_come_back_and_a_broken_one_503_without() {
        let busy = unavailable(&wattbar_engine::Error::Busy);
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            busy.headers()
                .get(axum::http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok()),
            Some("1")
        );
        let broken = unavailable(&wattbar_engine::Error::Stopped);
        assert_eq!(broken.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(broken
            .headers()
            .get(axum::http::header::RETRY_AFTER)
            .is_none());
    }
    use std::time::Duration;

    /// A real published state with a sample in it, from an engine on a replayed trace.
    async fn published() -> Arc<PublishedState> {
        use wattbar_core::{Chain, Preferences, Source};
        use wattbar_sources::{replay::parse_trace, ReplaySource};
        let trace = parse_trace("t,watts\n0,42.5\n").unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
        let prefs = Preferences {
            interval_ms: 100,
            ..Preferences::default()
        };
        let engine = wattbar_engine::spawn(
            Chain::new(sources),
            wattbar_engine::EngineConfig::new(prefs),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut rx = engine.subscribe();
        let sampled = tokio::time::timeout(
            Duration::from_secs(5),
            rx.wait_for(|p| p.snapshot.is_some()),
        )
        .await
        .map(|r| r.map(|p| Arc::clone(&p)));
        engine.shutdown().await.unwrap_or_else(|e| panic!("{e}"));
        match sampled {
            Ok(Ok(p)) => p,
            _ => panic!("the engine published no sample within 5 s"),
        }
    }

    /// The next state each client's stream yields.
    async fn next_of_each<S>(clients: &mut [S]) -> Vec<(u64, Arc<str>)>
    where
        S: Stream<Item = (u64, Result<Arc<str>, String>)> + Unpin,
    {
        let mut out = Vec::new();
        for client in clients.iter_mut() {
            match client.next().await {
                Some((seq, Ok(json))) => out.push((seq, json)),
                other => panic!("no state: {other:?}"),
            }
        }
        out
    }

    #[tokio::test]
    async fn every_stream_client_gets_the_same_serialization_of_a_state() {
        let first = published().await;
        let (tx, rx) = watch::channel(Arc::clone(&first));
        let cache = Arc::new(StateJson::default());
        let mut clients: Vec<_> = (0..8)
            .map(|_| Box::pin(state_json_stream(rx.clone(), Arc::clone(&cache))))
            .collect();
        let seen = next_of_each(&mut clients).await;
        let expected = serde_json::to_string(&StatePayload::from(first.as_ref()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&*seen[0].1, expected);
        assert!(seen.iter().all(|(seq, _)| *seq == first.seq));
        // One allocation shared by all: serialized once, not once per client.
        assert!(seen.iter().all(|(_, j)| Arc::ptr_eq(j, &seen[0].1)));

        let second = Arc::new(PublishedState {
            seq: first.seq + 1,
            ..(*first).clone()
        });
        tx.send(Arc::clone(&second))
            .unwrap_or_else(|e| panic!("{e}"));
        let seen_next = next_of_each(&mut clients).await;
        assert!(seen_next.iter().all(|(seq, _)| *seq == second.seq));
        assert!(seen_next
            .iter()
            .all(|(_, j)| Arc::ptr_eq(j, &seen_next[0].1)));
        assert!(!Arc::ptr_eq(&seen_next[0].1, &seen[0].1));
        let payload: serde_json::Value =
            serde_json::from_str(&seen_next[0].1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(payload["seq"], second.seq);
        assert_eq!(payload["watts"], 42.5);
    }

    #[tokio::test]
    async fn a_client_behind_gets_its_own_state_and_keeps_the_newer_one_cached() {
        let first = published().await;
        let second = PublishedState {
            seq: first.seq + 1,
            ..(*first).clone()
        };
        let cache = StateJson::default();
        let newer = cache.get(&second).unwrap_or_else(|e| panic!("{e}"));
        let older = cache.get(&first).unwrap_or_else(|e| panic!("{e}"));
        let seq = |json: &str| {
            serde_json::from_str::<serde_json::Value>(json).unwrap_or_else(|e| panic!("{e}"))["seq"]
                .clone()
        };
        assert_eq!(seq(&older), first.seq);
        assert_eq!(seq(&newer), second.seq);
        let again = cache.get(&second).unwrap_or_else(|e| panic!("{e}"));
        assert!(Arc::ptr_eq(&again, &newer));
    }
}
