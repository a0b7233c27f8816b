//! The preferences routes: `GET /v1/preferences` (every preference, with the schema's key names)
//! and `PUT /v1/preferences/{key}` (one field, its JSON value as the body).
//!
//! The engine owns the preferences: a change is validated by the one schema, saved (where the
//! engine has a preferences file) and published before the answer, which carries every
//! preference. A refused value changes nothing and answers 400 with the field and the message to
//! show beside it: `{"error": "...", "field": "price_per_kwh"}`; a key the schema does not have
//! answers 404.

use super::shared::{error, Shared, APPLY_TIMEOUT};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::sync::Arc;
use wattbar_core::Preferences;

pub(super) async fn get_preferences(State(shared): State<Arc<Shared>>) -> Json<Preferences> {
    Json(wattbar_core::Preferences::clone(
        &shared.engine.current().prefs,
    ))
}

/// A refused field, for the form to show beside it.
#[derive(Serialize)]
struct FieldError {
    error: String,
    field: String,
}

pub(super) async fn put_preference(
    State(shared): State<Arc<Shared>>,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !Preferences::is_key(&key) {
        return error(
            StatusCode::NOT_FOUND,
            format!("no preference is called {key:?}"),
        );
    }
    let value: serde_json::Value = match super::shared::json_body(body) {
        Ok(v) => v,
        Err((status, message)) => return error(status, message),
    };
    let applied =
        tokio::time::timeout(APPLY_TIMEOUT, shared.engine.set_preference(&key, value)).await;
    match applied {
        Ok(Ok(prefs)) => Json(prefs).into_response(),
        Ok(Err(wattbar_engine::Error::Invalid(e))) => {
            // The message without the field's name, which the form shows by the field itself.
            let message = match e {
                wattbar_core::Error::Invalid { message, .. } => message,
                other => other.to_string(),
            };
            (
                StatusCode::BAD_REQUEST,
                Json(FieldError {
                    error: message,
                    field: key,
                }),
            )
                .into_response()
        }
        Ok(Err(wattbar_engine::Error::Stopped)) => {
            error(StatusCode::SERVICE_UNAVAILABLE, "the engine has stopped")
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        // Sent, not yet checked: it is applied, or refused in the log, once the engine is free.
        Err(_) => super::shared::accepted("the change"),
    }
}
