//! The routes that ask the engine for a change: `GET|PUT /v1/low-power` and
//! `POST /v1/session/reset`.

use super::shared::{accepted, error, json_object, Shared, APPLY_TIMEOUT};
use crate::view::LowPowerView;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use wattbar_engine::Command;

pub(super) async fn get_low_power(State(shared): State<Arc<Shared>>) -> Json<LowPowerView> {
    Json(LowPowerView::from(shared.engine.current().as_ref()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LowPowerBody {
    enabled: bool,
}

pub(super) async fn put_low_power(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let want: LowPowerBody = match json_object(body) {
        Ok(b) => b,
        Err((status, message)) => return error(status, message),
    };
    let mut rx = shared.engine.subscribe();
    if shared
        .engine
        .send(Command::SetLowPower(want.enabled))
        .is_err()
    {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped");
    }
    let applied = tokio::time::timeout(APPLY_TIMEOUT, async {
        rx.wait_for(|p| {
            p.low_power.state.enabled == want.enabled
                && p.low_power.state.reason == Some(wattbar_core::Reason::Manual)
        })
        .await
        .map(|p| Arc::clone(&p))
    })
    .await;
    match applied {
        Ok(Ok(p)) => Json(LowPowerView::from(p.as_ref())).into_response(),
        Ok(Err(_)) => error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped"),
        Err(_) => accepted("the change"),
    }
}

#[derive(Serialize)]
struct ResetBody {
    /// When the new session started, seconds since the Unix epoch.
    started: f64,
}

pub(super) async fn post_reset(State(shared): State<Arc<Shared>>) -> Response {
    let mut rx = shared.engine.subscribe();
    let before = shared.engine.current().energy.session.started_unix;
    if shared.engine.send(Command::ResetSession).is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped");
    }
    let reset = tokio::time::timeout(APPLY_TIMEOUT, async {
        rx.wait_for(|p| p.energy.session.started_unix != before)
            .await
            .map(|p| Arc::clone(&p))
    })
    .await;
    match reset {
        Ok(Ok(p)) => Json(ResetBody {
            started: p.energy.session.started_unix,
        })
        .into_response(),
        Ok(Err(_)) => error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped"),
        Err(_) => accepted("the reset"),
    }
}
