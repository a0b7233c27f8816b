//! Graded profiles: `POST /v1/profiles` keeps one (`wattbar-cli profile` beside a running
//! engine), `GET /v1/profiles?min_accuracy=&max_itl_ms=&eval=` lists them with the cheapest
//! model good enough ([`wattbar_core::eval::best`]; the targets default to the preferences').
//!
//! Rule: a profile is its `summary.json` as `profile` wrote it, with the evaluation named; its
//! figures are read from the summary here, so that what is kept is what the file says.

use super::shared::{error, json_object, Shared};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use wattbar_core::eval::best::{best, KeptProfile, Targets};
use wattbar_ledger::store::profiles::StoredProfile;

/// `POST /v1/profiles`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProfileBody {
    /// The evaluation's name.
    eval: String,
    /// What the run is called (its folder); the model when absent.
    label: Option<String>,
    /// When it ended, seconds since the Unix epoch; now when absent.
    at: Option<f64>,
    /// `summary.json`, whole.
    summary: serde_json::Value,
}

impl ProfileBody {
    /// The profile to keep, as of wall-clock `now`.
    pub(super) fn stored(self, now: f64) -> Result<StoredProfile, String> {
        let at = self.at.unwrap_or(now);
        if !at.is_finite() || at > now + 1.0 {
            return Err(format!("at ({at}) is not a time up to now"));
        }
        StoredProfile::from_summary(self.eval, self.label, at, &self.summary)
    }
}

pub(super) async fn post_profile(
    State(shared): State<Arc<Shared>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body: ProfileBody = match json_object(body) {
        Ok(b) => b,
        Err((status, message)) => return error(status, message),
    };
    let stored = match body.stored(wattbar_engine::unix_now()) {
        Ok(s) => s,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let kept = stored.profile.clone();
    match shared.engine.record_profile(stored).await {
        Ok(()) => (StatusCode::CREATED, Json(kept)).into_response(),
        Err(wattbar_engine::Error::Refused(message)) => error(StatusCode::BAD_REQUEST, message),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BestQuery {
    min_accuracy: Option<f64>,
    max_itl_ms: Option<f64>,
    eval: Option<String>,
}

#[derive(serde::Serialize)]
struct Profiles {
    /// Every profile kept, oldest first.
    profiles: Arc<[KeptProfile]>,
    /// The cheapest model good enough for the targets, and the evidence.
    best: wattbar_core::eval::best::Choice,
}

pub(super) async fn get_profiles(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<BestQuery>, QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "min_accuracy is a fraction, max_itl_ms milliseconds, eval a name",
        );
    };
    let current = shared.engine.current();
    // A person reads this list, as `models --best`: it weighs the share measured. Only
    // low-power mode's `auto` choice, which acts by itself, takes the accuracy's lower bound.
    let mut targets: Targets = Targets {
        by_lower_bound: false,
        ..current.prefs.low_power.targets()
    };
    if let Some(a) = q.min_accuracy {
        if !(0.0..=1.0).contains(&a) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("min_accuracy {a} is not between 0 and 1"),
            );
        }
        targets.min_accuracy = a;
    }
    if let Some(ms) = q.max_itl_ms {
        if !(ms.is_finite() && ms > 0.0) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("max_itl_ms {ms} is not a positive number"),
            );
        }
        targets.max_itl_seconds = Some(ms / 1000.0);
    }
    targets.eval = q.eval;
    let profiles = Arc::clone(&current.inference.profiles);
    let best = best(&profiles, &targets);
    Json(Profiles { profiles, best }).into_response()
}
