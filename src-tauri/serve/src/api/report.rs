//! `GET /v1/report.svg?from=&to=`: the ledger's report as an SVG to save (the dashboard's
//! "Report"), the same one `wattbar-cli report` draws. `from` and `to` are Unix seconds; `to`
//! defaults to now and `from` to seven days before it.

use super::shared::{error, unavailable, Shared, MAX_HISTORY_SECONDS};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;
use wattbar_engine::unix_now;

const DEFAULT_SPAN_SECONDS: f64 = 7.0 * 86_400.0;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReportQuery {
    from: Option<f64>,
    to: Option<f64>,
}

pub(super) async fn get_report(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<ReportQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let to = q.to.unwrap_or_else(unix_now);
    let from = q.from.unwrap_or(to - DEFAULT_SPAN_SECONDS);
    if !from.is_finite() || !to.is_finite() || from >= to {
        return error(
            StatusCode::BAD_REQUEST,
            "from must be before to, both in seconds since 1970",
        );
    }
    if to - from > MAX_HISTORY_SECONDS {
        return error(
            StatusCode::BAD_REQUEST,
            "ask for at most 400 days at a time",
        );
    }
    let drawn = match shared.engine.report(from, to).await {
        // Drawing is seconds of CPU for a long period: off the async workers.
        Ok(report) => tokio::task::spawn_blocking(move || {
            wattbar_report::svg(&report, report.default_size())
                .map_err(|e| wattbar_engine::Error::Refused(e.to_string()))
        })
        .await
        .unwrap_or_else(|e| Err(wattbar_engine::Error::Refused(e.to_string()))),
        Err(e) => Err(e),
    };
    match drawn {
        Ok(svg) => {
            let name = chrono::Local::now()
                .format("attachment; filename=\"wattbar-report-%Y-%m-%d.svg\"")
                .to_string();
            let mut r = svg.into_response();
            let headers = r.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            );
            if let Ok(v) = HeaderValue::from_str(&name) {
                headers.insert(header::CONTENT_DISPOSITION, v);
            }
            r
        }
        Err(e @ wattbar_engine::Error::Refused(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e) => unavailable(&e),
    }
}
