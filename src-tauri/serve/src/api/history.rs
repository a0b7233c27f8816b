//! `GET /v1/history?from=&to=&step=&domains=` (or `?range=1h|24h|30d`): the ledger's history,
//! checked before the store is asked.

use super::shared::{error, unavailable, Shared, MAX_HISTORY_SECONDS};
use crate::view::HistoryPayload;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use wattbar_engine::unix_now;
use wattbar_ledger::store::{Step, Store};

#[derive(Debug, Deserialize)]
pub(super) struct HistoryQuery {
    range: Option<String>,
    from: Option<f64>,
    to: Option<f64>,
    step: Option<String>,
    /// Domains, comma-separated: `system` is the headline, `*` every domain stored.
    domain: Option<String>,
}

/// Most domains one history request names.
const MAX_DOMAINS: usize = 16;

/// The domains a history request names; `None` without a filter.
fn domain_filter(text: Option<&str>) -> Result<Option<Vec<String>>, String> {
    let Some(text) = text else { return Ok(None) };
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect();
    if names.is_empty() || names.len() > MAX_DOMAINS {
        return Err(format!(
            "domain: name 1 to {MAX_DOMAINS} domains, comma-separated"
        ));
    }
    if let Some(bad) = names.iter().find(|n| {
        *n != "*"
            && !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }) {
        return Err(format!(
            "domain {bad:?} is not a domain name such as cpu or gpu"
        ));
    }
    Ok(Some(names))
}

pub(super) async fn get_history(
    State(shared): State<Arc<Shared>>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let now = unix_now();
    let (label, from, to, step) = match history_window(&q, now) {
        Ok(w) => w,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let domains = match domain_filter(q.domain.as_deref()) {
        Ok(d) => d,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let Some(ledger) = shared.ledger.clone() else {
        return Json(HistoryPayload::new(label, step, Vec::new(), None)).into_response();
    };
    let asked = label.clone();
    let answer = ledger
        .read(move |store| history_payload(store, asked, from, to, step, domains))
        .await;
    match answer {
        Ok(Some(Ok(payload))) => Json(payload).into_response(),
        Ok(Some(Err(message))) => error(StatusCode::BAD_REQUEST, message),
        Ok(None) => Json(HistoryPayload::new(label, step, Vec::new(), None)).into_response(),
        Err(e) => unavailable(&e),
    }
}

/// The headline's history and each domain's asked for (`*`: all, `system`: the headline); the
/// inner `Err` names a domain that is none.
fn history_payload(
    store: &Store,
    label: String,
    from: f64,
    to: f64,
    step: Step,
    domains: Option<Vec<String>>,
) -> Result<Result<HistoryPayload, String>, wattbar_engine::Error> {
    let Some(names) = domains else {
        let points = store.history(from, to, step)?;
        let mut payload = HistoryPayload::new(label, step, points, store.last_scope()?);
        payload.scope_changes = store.scope_changes(from, to)?;
        return Ok(Ok(payload));
    };
    let all = names.iter().any(|n| n == "*");
    let with_headline = all || names.iter().any(|n| n == "system");
    // A domain with nothing stored yet answers empty; a name that is no domain is refused.
    if let Some(unknown) = names
        .iter()
        .find(|n| *n != "*" && wattbar_core::Domain::named(n).is_none())
    {
        let known: Vec<&str> = wattbar_core::Domain::ALL
            .iter()
            .map(|d| d.as_str())
            .collect();
        return Ok(Err(format!(
            "{unknown:?} is not a domain: use {} or *",
            known.join(", ")
        )));
    }
    let headline = if with_headline {
        store.history(from, to, step)?
    } else {
        Vec::new()
    };
    let wanted: Vec<String> = if all { Vec::new() } else { names };
    let mut payload = HistoryPayload::new(label, step, headline, store.last_scope()?);
    if with_headline {
        payload.scope_changes = store.scope_changes(from, to)?;
    } else {
        payload.kwh = None;
    }
    payload.domains = store.domain_history(from, to, step, &wanted)?;
    Ok(Ok(payload))
}

/// The window a history request asks for: a named range, or `from`/`to` (Unix seconds; `to`
/// defaults to now, `from` to a day before `to`) with `step` `minute` or `hour` (by default,
/// minutes up to two days, hours beyond).
fn history_window(q: &HistoryQuery, now: f64) -> Result<(String, f64, f64, Step), String> {
    if let Some(range) = &q.range {
        let (seconds, step) = crate::view::range(range)?;
        return Ok((range.clone(), now - seconds, now + 1.0, step));
    }
    let to = q.to.unwrap_or(now + 1.0);
    let from = q.from.unwrap_or(to - 86_400.0);
    if !from.is_finite() || !to.is_finite() || from >= to {
        return Err("from must be before to, both in seconds since 1970".into());
    }
    if to - from > MAX_HISTORY_SECONDS {
        return Err("ask for at most 400 days at a time".into());
    }
    let step = match q.step.as_deref() {
        None if to - from <= 2.0 * 86_400.0 => Step::Minute,
        None => Step::Hour,
        Some("minute" | "1m" | "60") => Step::Minute,
        Some("hour" | "1h" | "3600") => Step::Hour,
        Some(other) => return Err(format!("step {other:?}: use minute or hour")),
    };
    Ok(("custom".into(), from, to, step))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_domain_filter_is_a_short_list_of_names() {
        assert_eq!(domain_filter(None), Ok(None));
        assert_eq!(
            domain_filter(Some("cpu, gpu,")),
            Ok(Some(vec!["cpu".to_string(), "gpu".to_string()]))
        );
        assert_eq!(domain_filter(Some("*")), Ok(Some(vec!["*".to_string()])));
        assert!(domain_filter(Some("")).is_err());
        assert!(domain_filter(Some("cpu;drop table")).is_err());
        assert!(domain_filter(Some(&vec!["cpu"; 17].join(","))).is_err());
    }

    #[test]
    fn history_windows_are_checked() {
        let q = |from, to, step: Option<&str>| HistoryQuery {
            range: None,
            from,
            to,
            step: step.map(str::to_string),
            domain: None,
        };
        assert!(history_window(&q(Some(10.0), Some(5.0), None), 100.0).is_err());
        assert!(history_window(&q(Some(0.0), Some(500.0 * 86_400.0), None), 0.0).is_err());
        assert!(history_window(&q(None, None, Some("week")), 1e9).is_err());
        let (_, from, to, step) =
            history_window(&q(None, Some(1e9), None), 0.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((from, to, step), (1e9 - 86_400.0, 1e9, Step::Minute));
        let (_, _, _, step) = history_window(&q(Some(0.0), Some(30.0 * 86_400.0), None), 0.0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(step, Step::Hour);
    }
}
