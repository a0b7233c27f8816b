//! The routes that read the published state: `/metrics`, `/v1/snapshot`, `/v1/dashboard`,
//! `/v1/totals` and the event stream `/v1/stream`, which serializes each state once for every
//! client.

use super::{error, Shared, STREAM_RETRY_AFTER_S};
use crate::metrics::{self, SelfUsage};
use crate::view::{DashboardPayload, StatePayload};
use crate::{unix_now, Published};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::Stream;

/// The last published state as the JSON the event stream sends, made once per `seq` for every
/// client.
#[derive(Default)]
pub(super) struct StateJson {
    slot: Mutex<Option<(u64, Arc<str>)>>,
}

impl StateJson {
    fn get(&self, p: &Published) -> Result<Arc<str>, String> {
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
fn state_json_stream(
    states: watch::Receiver<Arc<Published>>,
    cache: Arc<StateJson>,
) -> impl Stream<Item = (u64, Result<Arc<str>, String>)> {
    WatchStream::new(states).map(move |p: Arc<Published>| (p.seq, cache.get(&p)))
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

    fn read(&mut self) -> Option<SelfUsage> {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate};
        let pid = self.pid?;
        self.system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[pid]),
            true,
            ProcessRefreshKind::nothing().with_cpu().with_memory(),
        );
        let p = self.system.process(pid)?;
        Some(SelfUsage {
            cpu_seconds: p.accumulated_cpu_time() as f64 / 1000.0,
            resident_bytes: p.memory(),
        })
    }
}

pub(super) async fn get_metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let usage = shared
        .usage
        .lock()
        .map(|mut u| u.read())
        .unwrap_or_else(|mut e| e.get_mut().read());
    let body = metrics::render(&shared.engine.current(), unix_now(), usage);
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if openmetrics {
        (
            [(header::CONTENT_TYPE, metrics::OPENMETRICS_CONTENT_TYPE)],
            body,
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::TEXT_CONTENT_TYPE)],
            metrics::to_prometheus_text(&body),
        )
            .into_response()
    }
}

pub(super) async fn get_snapshot(State(shared): State<Arc<Shared>>) -> Json<StatePayload> {
    Json(StatePayload::from(shared.engine.current().as_ref()))
}

pub(super) async fn get_dashboard(State(shared): State<Arc<Shared>>) -> Json<DashboardPayload> {
    Json(DashboardPayload {
        state: StatePayload::from(shared.engine.current().as_ref()),
        history: shared.engine.recent(),
    })
}

#[derive(Serialize)]
pub(super) struct TotalsBody {
    session: wattbar_core::SessionTotals,
    /// Today, this month and lifetime from the store, as of the last batch.
    stored: Option<crate::ledger::LedgerTotals>,
    lifetime_joules_by_domain: std::collections::BTreeMap<String, f64>,
}

pub(super) async fn get_totals(State(shared): State<Arc<Shared>>) -> Json<TotalsBody> {
    let p = shared.engine.current();
    Json(TotalsBody {
        session: p.session.clone(),
        stored: p.totals.clone(),
        lifetime_joules_by_domain: p.lifetime_by_domain.iter().cloned().collect(),
    })
}

pub(super) async fn get_stream(State(shared): State<Arc<Shared>>) -> Response {
    let Ok(slot) = Arc::clone(&shared.streams).try_acquire_owned() else {
        let mut r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} event streams are open, the most this server keeps; try again later",
                shared.config.limits.max_streams
            ),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(STREAM_RETRY_AFTER_S));
        return r;
    };
    let mut closing = shared.closing.clone();
    let closed = async move {
        let _ = closing.wait_for(|c| *c).await;
    };
    let events = state_json_stream(shared.engine.subscribe(), Arc::clone(&shared.state_json))
        .map(move |(seq, json)| {
            // The stream owns the slot: hyper drops the stream when the client goes away or the
            // server closes it, and that frees the slot.
            let _slot = &slot;
            let event = match json {
                Ok(json) => Event::default()
                    .event("state")
                    .id(seq.to_string())
                    .data(&*json),
                Err(e) => Event::default().comment(format!("unencodable state: {e}")),
            };
            Ok::<_, Infallible>(event)
        })
        .take_until(Box::pin(closed));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A real published state with a sample in it, from an engine on a replayed trace.
    async fn published() -> Arc<Published> {
        use wattbar_core::{Chain, Preferences, Source};
        use wattbar_sources::{replay::parse_trace, ReplaySource};
        let trace = parse_trace("t,watts\n0,42.5\n").unwrap_or_else(|e| panic!("{e}"));
        let sources: Vec<Box<dyn Source>> = vec![Box::new(ReplaySource::new(trace))];
        let prefs = Preferences {
            interval_ms: 100,
            ..Preferences::default()
        };
        let engine = crate::spawn(Chain::new(sources), crate::EngineConfig::new(prefs))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut rx = engine.subscribe();
        let sampled = tokio::time::timeout(
            Duration::from_secs(5),
            rx.wait_for(|p| p.snapshot.is_some()),
        )
        .await
        .map(|r| r.map(|p| Arc::clone(&p)));
        engine.shutdown().await;
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

        let second = Arc::new(Published {
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
        let second = Published {
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
