//! The routes that read the published state: `/metrics`, `/v1/snapshot`, `/v1/dashboard`,
//! `/v1/totals` and the event stream `/v1/stream`, which serializes each state once for every
//! client.

use super::shared::{error, state_json_stream, Shared, STREAM_RETRY_AFTER_S};
use crate::metrics;
use crate::summary::Summary;
use crate::view::{DashboardPayload, StatePayload};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;
use wattbar_engine::unix_now;

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

pub(super) async fn get_summary(State(shared): State<Arc<Shared>>) -> Json<Summary> {
    Json(Summary::new(
        &shared.engine.current(),
        crate::summary::host_name(),
        unix_now(),
    ))
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
    stored: Option<wattbar_ledger::ledger::LedgerTotals>,
    lifetime_joules_by_domain: std::collections::BTreeMap<String, f64>,
    /// The headline's lifetime per scope, as committed (the counters `/metrics` exports);
    /// `unrecorded` is energy kept before scopes were.
    lifetime_joules_by_scope: std::collections::BTreeMap<&'static str, f64>,
}

pub(super) async fn get_totals(State(shared): State<Arc<Shared>>) -> Json<TotalsBody> {
    let p = shared.engine.current();
    Json(TotalsBody {
        session: p.energy.session.clone(),
        stored: p.kept.totals.clone(),
        lifetime_joules_by_domain: p.kept.committed.by_domain.iter().cloned().collect(),
        lifetime_joules_by_scope: p
            .kept
            .committed
            .by_scope
            .iter()
            .map(|(s, j)| (wattbar_core::Scope::shown(*s), *j))
            .collect(),
    })
}

/// `/v1/calibration`: what was learned from the parts to a whole-machine reference, why a fit
/// was refused, and what it gives now: the parts' watts and the reference's (while it reads),
/// the figure the fit makes of the parts and its bound.
#[derive(Serialize)]
pub(super) struct CalibrationBody {
    #[serde(flatten)]
    view: wattbar_engine::stages::calibration::CalibrationView,
    components_watts: Option<f64>,
    components_covers: Vec<String>,
    reference_watts: Option<f64>,
    reference_scope: Option<wattbar_core::Scope>,
    /// The fit applied to the parts now, with its bound: what the headline is (or would be
    /// without the reference).
    calibrated_watts: Option<f64>,
    calibrated_bound_watts: Option<f64>,
}

/// `GET /v1/server-metrics`: the model servers followed by their own counters, their last
/// windows (tokens, energy, J/token per model), newest last, and each model's sums as the
/// ledger committed them (what `/metrics` exports).
#[derive(Serialize)]
pub(super) struct ServerMetricsBody {
    #[serde(flatten)]
    view: Arc<wattbar_engine::server_metrics::ServerMetricsView>,
    totals: Vec<wattbar_core::inference::server_totals::ServerTotal>,
}

pub(super) async fn get_server_metrics(
    State(shared): State<Arc<Shared>>,
) -> Json<ServerMetricsBody> {
    let p = shared.engine.current();
    Json(ServerMetricsBody {
        view: Arc::clone(&p.inference.servers),
        totals: p.kept.committed.server_totals.clone(),
    })
}

pub(super) async fn get_calibration(State(shared): State<Arc<Shared>>) -> Json<CalibrationBody> {
    let p = shared.engine.current();
    let snapshot = p.snapshot.as_ref();
    let parts = snapshot.and_then(|s| s.components());
    let reference = snapshot.and_then(|s| s.reference());
    let view = p.energy.calibration.as_ref().clone();
    let fit = view.learned.as_ref().map(|l| &l.fit);
    let calibrated = fit
        .zip(parts.as_ref())
        .map(|(f, (w, _))| (f.predict(*w), f.bound(*w)));
    Json(CalibrationBody {
        components_watts: parts.as_ref().map(|(w, _)| w.0),
        components_covers: parts.map(|(_, c)| c.covers).unwrap_or_default(),
        reference_watts: reference.map(|(w, _)| w.0),
        reference_scope: reference.map(|(_, s)| s),
        calibrated_watts: calibrated.map(|(w, _)| w.0),
        calibrated_bound_watts: calibrated.map(|(_, b)| b.0),
        view,
    })
}

pub(super) async fn get_stream(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let slot = Arc::clone(&shared.streams)
        .try_acquire_owned()
        .or_else(|e| match super::guard::authorised(&shared, &headers) {
            true => Arc::clone(&shared.owner_streams).try_acquire_owned(),
            false => Err(e),
        });
    let Ok(slot) = slot else {
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
        .map(|(seq, json)| match json {
            Ok(json) => Event::default()
                .event("state")
                .id(seq.to_string())
                .data(&*json),
            Err(e) => Event::default().comment(format!("unencodable state: {e}")),
        })
        .take_until(Box::pin(closed));
    // A task of its own hands the states over and owns the slot: the body is polled only when
    // the connection can take more, so a client that reads nothing would hold it forever.
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(1);
    let write_timeout = shared.config.limits.stream_write_timeout;
    // While the stream is open the engine does not rest.
    let watching = shared.engine.watching();
    tokio::spawn(async move {
        let _slot = slot;
        let _watching = watching;
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            // Gone (the body dropped), or reading nothing: either way the slot is free.
            if !matches!(
                tokio::time::timeout(write_timeout, tx.send(event)).await,
                Ok(Ok(()))
            ) {
                break;
            }
        }
    });
    let events = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
