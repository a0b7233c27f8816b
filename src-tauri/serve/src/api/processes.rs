//! `GET /v1/processes?limit=&sort=watts|energy&since=`: energy per program, as of the engine's
//! last process read ([`wattbar_engine::programs`]), with the idle and unattributed parts that close the
//! sum. Energies count from the engine's start; with `since` (Unix seconds, within the ledger's
//! 30 days), from the start of the UTC hour it falls in, as the ledger kept them (written every
//! few seconds), before a restart included.

use super::shared::{error, unavailable, Shared};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use wattbar_engine::programs::Sort;
use wattbar_engine::unix_now;
use wattbar_ledger::store::programs::{hour_of, PROGRAMS_KEEP_SECONDS};

/// Programs one answer lists at most.
pub const MAX_LIMIT: usize = 1000;
const DEFAULT_LIMIT: usize = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProcessesQuery {
    limit: Option<usize>,
    #[serde(default)]
    sort: Sort,
    since: Option<f64>,
}

pub(super) async fn get_processes(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<ProcessesQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return error(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {MAX_LIMIT}"),
        );
    }
    let view = shared.engine.current();
    let Some(since) = q.since else {
        return Json(view.programs.top(limit, q.sort)).into_response();
    };
    let now = unix_now();
    let oldest = now - PROGRAMS_KEEP_SECONDS;
    if !since.is_finite() || since > now || since < oldest {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "since must be a time in seconds since 1970 within the last 30 days the ledger \
                 keeps (from {oldest:.0} to {now:.0})"
            ),
        );
    }
    let from = hour_of(since);
    let stored =
        match &shared.ledger {
            None => return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "this engine keeps no ledger: energy per program since a time is not known here"
                    .to_string(),
            ),
            Some(ledger) => {
                ledger
                    .read(move |store| {
                        store
                            .program_since(from)
                            .map_err(wattbar_engine::Error::from)
                    })
                    .await
            }
        };
    match stored {
        Ok(stored) => {
            let stored = stored.unwrap_or_default();
            Json(view.programs.top_since(limit, q.sort, from as f64, &stored)).into_response()
        }
        Err(e) => unavailable(&e),
    }
}
