//! `GET /v1/processes?limit=&sort=watts|energy`: energy per program, as of the engine's last
//! process read ([`crate::programs`]), with the idle and unattributed parts that close the sum.

use super::shared::{error, Shared};
use crate::programs::ProgramFigure;
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

#[derive(Debug, Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Sort {
    #[default]
    Watts,
    Energy,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProcessesQuery {
    limit: Option<usize>,
    #[serde(default)]
    sort: Sort,
}

#[derive(serde::Serialize)]
struct Processes<'a> {
    at: Option<f64>,
    window_seconds: f64,
    sort: &'static str,
    programs: Vec<&'a ProgramFigure>,
    /// Programs left out by `limit`, and their energy.
    others: usize,
    others_joules: f64,
    idle_watts: f64,
    unattributed_watts: f64,
    idle_joules: f64,
    unattributed_joules: f64,
    method: &'a str,
    unavailable: Option<&'a str>,
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
    let current = shared.engine.current();
    let view = &current.programs;
    let mut programs: Vec<&ProgramFigure> = view.programs.iter().collect();
    if let Sort::Energy = q.sort {
        programs.sort_by(|a, b| b.joules.total_cmp(&a.joules));
    }
    let rest = programs.split_off(limit.min(programs.len()));
    Json(Processes {
        at: view.at,
        window_seconds: view.window_seconds,
        sort: match q.sort {
            Sort::Watts => "watts",
            Sort::Energy => "energy",
        },
        programs,
        others: rest.len(),
        others_joules: rest.iter().map(|p| p.joules).sum(),
        idle_watts: view.idle_watts,
        unattributed_watts: view.unattributed_watts,
        idle_joules: view.idle_joules,
        unattributed_joules: view.unattributed_joules,
        method: &view.method,
        unavailable: view.unavailable.as_deref(),
    })
    .into_response()
}
