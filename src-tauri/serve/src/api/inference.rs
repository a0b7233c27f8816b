//! The inference routes: `GET /v1/inference?limit=&since=` (records, newest first),
//! `GET /v1/inference/{id}` (one record, the id the proxy's `X-Wattbar-Request-Id` names),
//! `POST /v1/inference` (a record for work a client measured itself), `GET /v1/models` (figures
//! per model and source: the proxy's records, the servers' own counters, and each model's newest
//! graded profile) and `GET /v1/energy?from=&to=` (the energy of any window).

use super::shared::{error, json_object, unavailable, Shared, MAX_HISTORY_SECONDS};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::eval::best::{newest_per_model, KeptProfile};
use wattbar_core::inference::resident::ResidentCost;
use wattbar_core::inference::server_totals::{ServerModel, ServerTotal, Sourced, SOURCE_PROXY};
use wattbar_core::inference::{ModelStats, Record};
use wattbar_engine::command::External;
use wattbar_engine::handle::Found;
use wattbar_engine::unix_now;

/// Most records one request returns.
pub const MAX_RECORDS: usize = 1000;
/// How long `GET /v1/inference/{id}` waits for a request that has not been settled yet (its
/// record is made at the first sample after its end).
pub const SETTLE_WAIT: Duration = Duration::from_secs(5);

pub(super) async fn get_inference_record(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not a record id (a whole number)"),
        );
    };
    match shared.engine.inference_record(id, SETTLE_WAIT).await {
        Ok(Found::Record(r)) => Json(*r).into_response(),
        Ok(Found::Pending) => {
            let mut response = error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("request {id} has not ended yet"),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Ok(Found::None) => error(StatusCode::NOT_FOUND, format!("no inference record {id}")),
        Err(e) => unavailable(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    limit: Option<usize>,
    /// Unix seconds; records that ended before are left out.
    since: Option<f64>,
}

#[derive(serde::Serialize)]
struct Records {
    records: Vec<Record>,
}

pub(super) async fn get_inference(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_RECORDS {
        return error(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {MAX_RECORDS}"),
        );
    }
    let since = q.since.unwrap_or(f64::NEG_INFINITY);
    if since.is_nan() {
        return error(StatusCode::BAD_REQUEST, "since must be a number of seconds");
    }
    match shared.engine.inference(since, limit).await {
        Ok(records) => Json(Records { records }).into_response(),
        Err(e) => unavailable(&e),
    }
}

/// `POST /v1/inference`: what energy-budget monitors for routers call `record_inference`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InferenceBody {
    model: String,
    completion_tokens: u64,
    prompt_tokens: Option<u64>,
    /// Unix seconds.
    start: Option<f64>,
    end: Option<f64>,
    tokens_per_second: Option<f64>,
}

impl InferenceBody {
    /// The window: `[start, end]`, or the last `completion_tokens ÷ tokens_per_second` seconds
    /// before `end` (now by default).
    fn external(self, now: f64) -> Result<External, String> {
        if self.model.trim().is_empty() {
            return Err("model must name the model".into());
        }
        wattbar_core::inference::check_model_name(self.model.trim())?;
        if let Some(t) = self.tokens_per_second {
            if !t.is_finite() || t <= 0.0 {
                return Err("tokens_per_second must be a positive number".into());
            }
        }
        let end = self.end.unwrap_or(now);
        let start = match (self.start, self.tokens_per_second) {
            (Some(s), _) => s,
            (None, Some(tps)) if self.completion_tokens > 0 => {
                end - self.completion_tokens as f64 / tps
            }
            _ => return Err(
                "give start and end (Unix seconds), or tokens_per_second with completion_tokens"
                    .into(),
            ),
        };
        if !start.is_finite() || !end.is_finite() || start >= end {
            return Err("start must come before end, both in seconds since 1970".into());
        }
        Ok(External {
            model: self.model.trim().to_string(),
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            start,
            end,
            tokens_per_second: self.tokens_per_second,
        })
    }
}

pub(super) async fn post_inference(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body: InferenceBody = match json_object(body) {
        Ok(b) => b,
        Err((status, message)) => return error(status, message),
    };
    let external = match body.external(unix_now()) {
        Ok(e) => e,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    match shared.engine.record_inference(external).await {
        Ok(record) => (StatusCode::CREATED, Json(record)).into_response(),
        Err(wattbar_engine::Error::Refused(message)) => error(StatusCode::BAD_REQUEST, message),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[derive(serde::Serialize)]
struct Models {
    /// Per model, from the proxy's records (`source: proxy`).
    models: Vec<Sourced<ModelStats>>,
    /// Per server and model, from the servers' own counters (`source: server-metrics`), as
    /// committed.
    server_models: Vec<Sourced<ServerModel>>,
    /// What each model the server holds (or held today) costs by staying loaded.
    resident: Vec<ResidentCost>,
    /// Each model's newest graded profile per evaluation, newest first: accuracy and joules per
    /// correct answer beside the figures above.
    profiles: Vec<KeptProfile>,
    /// Each model's energy class A–G per scope, from its newest profile there.
    energy_classes: Vec<wattbar_core::eval::class::ModelClass>,
    /// gCO₂ per 1,000 tokens per model at the intensity in force now; `None` without one.
    carbon: Option<super::carbon::Carbon>,
}

pub(super) async fn get_models(State(shared): State<Arc<Shared>>) -> Json<impl serde::Serialize> {
    let current = shared.engine.current();
    let models: Vec<Sourced<ModelStats>> = current
        .inference
        .view
        .models
        .iter()
        .map(|m| Sourced {
            source: SOURCE_PROXY.into(),
            figures: m.clone(),
        })
        .collect();
    let server_models: Vec<Sourced<ServerModel>> = current
        .kept
        .committed
        .server_totals
        .iter()
        .map(ServerTotal::listed)
        .collect();
    Json(Models {
        carbon: super::carbon::carbon(&current, &models, &server_models),
        models,
        server_models,
        resident: current.inference.resident.to_vec(),
        profiles: newest_per_model(&current.inference.profiles),
        energy_classes: wattbar_core::eval::class::classes(&current.inference.profiles),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnergyQuery {
    from: f64,
    to: Option<f64>,
}

pub(super) async fn get_energy(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<EnergyQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let to = q.to.unwrap_or_else(unix_now);
    if !q.from.is_finite() || !to.is_finite() || q.from >= to {
        return error(
            StatusCode::BAD_REQUEST,
            "from must be before to, both in seconds since 1970",
        );
    }
    if to - q.from > MAX_HISTORY_SECONDS {
        return error(
            StatusCode::BAD_REQUEST,
            "ask for at most 400 days at a time",
        );
    }
    let energy = match shared.engine.energy(q.from, to).await {
        Ok(energy) => energy,
        Err(e) => return unavailable(&e),
    };
    match shared.engine.server_totals(q.from, to).await {
        Ok(totals) => Json(EnergyBody {
            energy,
            server_models: totals.iter().map(ServerTotal::listed).collect(),
        })
        .into_response(),
        Err(e) => unavailable(&e),
    }
}

/// The energy of a range, and each model's tokens and energy over the server windows wholly
/// inside it.
#[derive(serde::Serialize)]
struct EnergyBody {
    #[serde(flatten)]
    energy: wattbar_core::inference::WindowEnergy,
    server_models: Vec<Sourced<ServerModel>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> InferenceBody {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_record_without_a_window_takes_its_tokens_over_its_rate_before_now() {
        let e = body(r#"{"model":"llama3","completion_tokens":100,"tokens_per_second":25}"#)
            .external(1000.0)
            .unwrap_or_else(|e| panic!("{e}"));
        // 100 tokens at 25 tokens/s: the last 4 s.
        assert_eq!((e.start, e.end), (996.0, 1000.0));
    }

    #[test]
    fn a_record_needs_a_window_or_a_rate() {
        assert!(body(r#"{"model":"m","completion_tokens":10}"#)
            .external(1000.0)
            .is_err());
        assert!(
            body(r#"{"model":"m","completion_tokens":10,"start":5,"end":5}"#)
                .external(1000.0)
                .is_err()
        );
        assert!(
            body(r#"{"model":" ","completion_tokens":10,"start":1,"end":2}"#)
                .external(1000.0)
                .is_err()
        );
        assert!(serde_json::from_str::<InferenceBody>(r#"{"model":"m"}"#).is_err());
    }
}
