//! `GET /v1/processes?limit=&sort=watts|energy`: energy per program, as of the engine's last
//! process read ([`crate::programs`]), with the idle and unattributed parts that close the sum.

use super::shared::{error, Shared};
use crate::programs::Sort;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

/// Programs one answer lists at most.
pub const MAX_LIMIT: usize = 1000;
const DEFAULT_LIMIT: usize = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProcessesQuery {
    limit: Option<usize>,
    #[serde(default)]
    sort: Sort,
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
    Json(shared.engine.current().programs.top(limit, q.sort)).into_response()
}
