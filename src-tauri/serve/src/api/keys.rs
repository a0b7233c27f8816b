//! The proxy's keys and the usage ledger: `GET /v1/keys` (each key, its budget and where it
//! stands; never a secret), `POST /v1/keys` (makes one and answers its secret, the one time it
//! is shown), `DELETE /v1/keys/{name}`, `POST /v1/keys/{name}/rotate`, and
//! `GET /v1/usage?key=&client=&model=&from=&to=&group=` (requests, tokens and joules per group
//! and scope, from the records the ledger committed).
//!
//! Writes need the API token, as every write does ([`super::guard`]).

use super::shared::{error, json_object, unavailable, Shared};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use wattbar_engine::keys::{NewKey, Unit};
use wattbar_engine::ledger_reader::LedgerReader;
use wattbar_ledger::store::keys::{Group, UsageQuery};

/// `POST /v1/keys`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyBody {
    name: String,
    /// Energy per window: `50kJ/day`, `200Wh/week`, `2kWh/month`.
    budget: Option<String>,
    /// Money per window in the preferences' currency: `0.50/day`.
    money: Option<String>,
    scope: Option<String>,
    #[serde(default)]
    clamp: bool,
    #[serde(default)]
    energy_line: bool,
}

fn now(shared: &Shared) -> f64 {
    shared.engine.reporter().unix_now()
}

pub(super) async fn get_keys(State(shared): State<Arc<Shared>>) -> Response {
    Json(serde_json::json!({ "keys": shared.engine.keys().list(now(&shared)) })).into_response()
}

/// What the ledger committed for a key in a window, in `unit`; the most any budget allows
/// where it cannot be read (a spend that cannot be known is taken as spent).
fn committed(ledger: Option<&LedgerReader>, name: &str, unit: Unit, from: f64, to: f64) -> f64 {
    let Some(ledger) = ledger else {
        return 0.0;
    };
    let name = name.to_string();
    let read =
        ledger.read_blocking(move |s| Ok(wattbar_engine::keys::spent_in(s, &name, unit, from, to)));
    match read {
        Ok(spent) => spent.unwrap_or(0.0),
        Err(e) => {
            tracing::error!("a key's spend could not be read, so none is left: {e}");
            match unit {
                Unit::Joules => wattbar_core::keys::allowance::MAX_JOULES,
                Unit::Money => wattbar_core::keys::allowance::MAX_MONEY,
            }
        }
    }
}

pub(super) async fn post_key(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body: KeyBody = match json_object(body) {
        Ok(b) => b,
        Err((status, message)) => return error(status, message),
    };
    let scope = match body.scope.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s) => match wattbar_core::Scope::named(s) {
            Some(scope) => Some(scope),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("scope {s:?} is not wall, system or components"),
                )
            }
        },
    };
    let new = NewKey {
        name: body.name.trim().to_string(),
        budget: body.budget.map(|b| b.trim().to_string()),
        money: body.money.map(|m| m.trim().to_string()),
        scope,
        clamp: body.clamp,
        energy_line: body.energy_line,
    };
    let at = now(&shared);
    let name = new.name.clone();
    let made = tokio::task::spawn_blocking(move || {
        let ledger = shared.ledger.clone();
        shared.engine.keys().add(new, at, &|n, unit, from, to| {
            committed(ledger.as_ref(), n, unit, from, to)
        })
    })
    .await;
    match made {
        Ok(Ok(secret)) => (
            StatusCode::CREATED,
            Json(serde_json::json!({
                "name": name,
                "secret": secret,
                "message": "the secret is shown this once: keep it now",
            })),
        )
            .into_response(),
        Ok(Err(e)) => refused(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn refused(e: &wattbar_engine::Error) -> Response {
    match e {
        wattbar_engine::Error::Refused(_) | wattbar_engine::Error::Invalid(_) => {
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        _ => unavailable(e),
    }
}

pub(super) async fn delete_key(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    let keys = shared.engine.keys().clone();
    let asked = name.clone();
    match tokio::task::spawn_blocking(move || keys.remove(&asked)).await {
        Ok(Ok(())) => Json(serde_json::json!({ "removed": name })).into_response(),
        Ok(Err(e)) => not_found_or(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn not_found_or(e: &wattbar_engine::Error) -> Response {
    match e {
        wattbar_engine::Error::Refused(m) if m.starts_with("no key") => {
            error(StatusCode::NOT_FOUND, m.clone())
        }
        e => refused(e),
    }
}

pub(super) async fn post_rotate(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    let keys = shared.engine.keys().clone();
    let at = now(&shared);
    let asked = name.clone();
    match tokio::task::spawn_blocking(move || keys.rotate(&asked, at)).await {
        Ok(Ok(secret)) => Json(serde_json::json!({
            "name": name,
            "secret": secret,
            "message": "the old secret is refused from now on; the new one is shown this once",
        }))
        .into_response(),
        Ok(Err(e)) => not_found_or(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageParams {
    key: Option<String>,
    client: Option<String>,
    model: Option<String>,
    from: Option<f64>,
    to: Option<f64>,
    group: Option<String>,
}

pub(super) async fn get_usage(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<UsageParams>, QueryRejection>,
) -> Response {
    let Query(p) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let group = match p.group.as_deref() {
        None => Group::Day,
        Some(g) => match Group::parse(g) {
            Some(g) => g,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("group {g:?} is not day, week, month, key, client, model or all"),
                )
            }
        },
    };
    let to = p.to.unwrap_or_else(|| now(&shared) + 1.0);
    let from = p.from.unwrap_or(0.0);
    if !from.is_finite() || !to.is_finite() || from >= to {
        return error(
            StatusCode::BAD_REQUEST,
            "from must be before to, both in seconds since 1970",
        );
    }
    let q = UsageQuery {
        key: p.key,
        client: p.client,
        model: p.model,
        from,
        to,
    };
    let usage = match shared.ledger.as_ref() {
        Some(ledger) => ledger.read(move |s| Ok(s.usage(&q, group)?)).await,
        None => Ok(None),
    };
    match usage {
        Ok(usage) => Json(serde_json::json!({
            "group": group,
            "from": from,
            "to": to,
            "usage": usage.unwrap_or_default(),
        }))
        .into_response(),
        Err(e) => unavailable(&e),
    }
}
