//! Who a proxied request is for: the key it carries (`Authorization: Bearer wb_…`), its
//! client (`X-Wattbar-Client`), and the hold on the key's budget it goes with.
//!
//! Rules:
//! - A bearer token that starts `wb_` is Wattbar's: a known key's is taken off the request (the
//!   upstream gets the credentials it needs, as before); any other `wb_` token is 401, whatever
//!   `keys_required` says. A bearer token that is not Wattbar's goes on untouched.
//! - With `keys_required`, a request without a known key is 401 (`keys_required`).
//! - `X-Wattbar-Client` names the client in the usage ledger (the key's name where absent); a
//!   value that is no name ([`check_name`]) is 400. It is never sent upstream.
//! - A generation request on a budgeted key holds, before it goes on, its model's measured J per
//!   completion token × its token cap plus a tenth of that per prompt token (defaults for a
//!   model never measured, [`Rates`]); prompt tokens are counted as the body's bytes ÷ 4, which
//!   leans high. One that does not fit is 429 `budget_exceeded` with `Retry-After` and the
//!   `RateLimit-Policy`/`RateLimit` fields in joules; with the key's `clamp`, its token cap is
//!   lowered to what fits instead, and 429 only where not one token does. The model's context
//!   is not asked of the server: a request that sets no cap is held for
//!   [`DEFAULT_TOKEN_CAP`](wattbar_core::keys::DEFAULT_TOKEN_CAP) tokens.
//! - A key with a money budget also holds the joules' cost at the price in force now; a request
//!   that would cross it is 429 with the figures in the preferences' currency.

use super::answers::json_error;
use super::body::ProxyBody;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use wattbar_core::inference::request::{token_cap, with_token_cap};
use wattbar_core::inference::Route;
use wattbar_core::keys::{Rates, Status};
use wattbar_engine::keys::stored::{check_name, SECRET_PREFIX};
use wattbar_engine::keys::{Admitted, Held, Keys, Refused, Unit};

/// The request header naming the client.
pub const CLIENT_HEADER: &str = "x-wattbar-client";

/// Bytes of a request body counted as one prompt token.
const BYTES_PER_TOKEN: usize = 4;

/// Who a request is for.
#[derive(Debug, Default)]
pub(super) struct Caller {
    pub(super) key: Option<Admitted>,
    pub(super) client: Option<String>,
}

/// Reads and removes the key and client of `headers`; the answer to give instead where they
/// do not let the request in.
pub(super) fn caller(
    headers: &mut HeaderMap,
    keys: &Keys,
    required: bool,
) -> Result<Caller, Box<Response<ProxyBody>>> {
    let client = match headers.remove(CLIENT_HEADER) {
        None => None,
        Some(v) => {
            let name = v.to_str().map(str::trim).unwrap_or("\u{fffd}");
            check_name(name).map_err(|why| {
                Box::new(json_error(
                    StatusCode::BAD_REQUEST,
                    format!("wattbar proxy: {CLIENT_HEADER}: {why}"),
                ))
            })?;
            Some(name.to_string())
        }
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| t.starts_with(SECRET_PREFIX))
        .map(str::to_string);
    let key = match bearer {
        Some(secret) => {
            headers.remove(header::AUTHORIZATION);
            match keys.admit(&secret) {
                Some(k) => Some(k),
                None => {
                    return Err(Box::new(unauthorized(
                        "invalid_key",
                        "wattbar proxy: this key is not one Wattbar issued, or it was removed \
                         or rotated",
                    )))
                }
            }
        }
        None => None,
    };
    if required && key.is_none() {
        return Err(Box::new(unauthorized(
            "keys_required",
            "wattbar proxy: a key is required: send `Authorization: Bearer wb_…` (wattbar-cli \
             key add NAME makes one)",
        )));
    }
    Ok(Caller { key, client })
}

fn unauthorized(kind: &str, message: &str) -> Response<ProxyBody> {
    let mut response = typed_error(StatusCode::UNAUTHORIZED, kind, message, None);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"wattbar\""),
    );
    response
}

fn typed_error(
    status: StatusCode,
    kind: &str,
    message: &str,
    extra: Option<serde_json::Value>,
) -> Response<ProxyBody> {
    let mut error = serde_json::json!({ "type": kind, "message": message });
    if let (Some(serde_json::Value::Object(more)), Some(e)) = (extra, error.as_object_mut()) {
        e.extend(more);
    }
    let mut response = json_error(status, String::new());
    *response.body_mut() = super::body::full(bytes::Bytes::from(
        serde_json::json!({ "error": error }).to_string(),
    ));
    response
}

/// A hold taken for a request, given back unless its request is attached to a record.
pub(super) struct Ticket {
    keys: Keys,
    key: Option<String>,
    client: Option<String>,
    held: Option<Held>,
}

impl Ticket {
    pub(super) fn new(keys: &Keys, caller: &Caller, held: Held) -> Ticket {
        Ticket {
            keys: keys.clone(),
            key: caller.key.as_ref().map(|k| k.name.clone()),
            client: caller.client.clone(),
            held: Some(held),
        }
    }

    /// Hands the key, client and holds to record `record_id`: the engine charges them.
    pub(super) fn attach(mut self, record_id: u64) {
        self.keys.attach(
            record_id,
            self.key.take(),
            self.client.take(),
            self.held.take().unwrap_or_default(),
        );
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let (Some(key), Some(held)) = (self.key.as_deref(), self.held.take()) {
            self.keys.release(key, held);
        }
    }
}

/// The holds taken, and the body to send where clamping changed it.
pub(super) struct Taken {
    pub(super) held: Held,
    pub(super) body: Option<Vec<u8>>,
    /// The token cap lowered to fit, for the `X-Wattbar-Clamped` header.
    pub(super) clamped: Option<u64>,
}

/// What a request is held against: the key, the model's rates, and the price now.
pub(super) struct Terms<'a> {
    pub(super) key: &'a Admitted,
    pub(super) rates: Rates,
    pub(super) price_per_kwh: f64,
    pub(super) now: f64,
}

/// Holds what a request of `body` (whole; `None`: too large to read, its size `size`) may spend
/// on its key; why not, where it does not fit.
pub(super) fn hold(
    keys: &Keys,
    t: &Terms<'_>,
    route: Route,
    body: Option<&[u8]>,
    size: usize,
) -> Result<Taken, Box<Refused>> {
    let prompt_tokens = (size / BYTES_PER_TOKEN) as u64;
    let cap = body.and_then(|b| token_cap(b, route));
    let joules = t.rates.hold_joules(prompt_tokens, cap, None);
    let name = &t.key.name;
    match keys.hold(name, joules, t.price_per_kwh, t.now) {
        Ok(held) => Ok(Taken {
            held,
            body: None,
            clamped: None,
        }),
        Err(refused) if t.key.clamp => {
            let fits = t
                .rates
                .clamp(refused.remaining_joules, prompt_tokens)
                .and_then(|n| Some((n, with_token_cap(body?, route, n)?)));
            let Some((n, edited)) = fits else {
                return Err(refused);
            };
            let joules = t.rates.hold_joules(prompt_tokens, Some(n), None);
            let held = keys.hold(name, joules, t.price_per_kwh, t.now)?;
            Ok(Taken {
                held,
                body: Some(edited),
                clamped: Some(n),
            })
        }
        Err(refused) => Err(refused),
    }
}

/// The 429 of a request that does not fit its key's budget.
pub(super) fn budget_exceeded(
    refused: &Refused,
    currency: &str,
    status: Option<&Status>,
    now: f64,
) -> Response<ProxyBody> {
    let e = &refused.exceeded;
    let retry_after = (e.resets_at - now).ceil().max(1.0);
    let resets_at = chrono::DateTime::from_timestamp(e.resets_at.floor() as i64, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let left = (e.budget_joules - e.spent_joules - e.held_joules).max(0.0);
    let until = resets_at.as_deref().unwrap_or("its window resets");
    let (message, figures) = match refused.unit {
        Unit::Joules => (
            format!(
                "wattbar proxy: this request may need {:.0} J; its key has {left:.0} J of {:.0} \
                 J left until {until}",
                e.asked_joules, e.budget_joules,
            ),
            serde_json::json!({
                "budget_joules": e.budget_joules,
                "spent_joules": e.spent_joules,
                "held_joules": e.held_joules,
                "asked_joules": e.asked_joules,
                "resets_at": resets_at,
            }),
        ),
        // A money budget's figures are in the currency, named beside them.
        Unit::Money => (
            format!(
                "wattbar proxy: this request may cost {:.6} {currency}; its key has {left:.6} of \
                 {} {currency} left until {until}",
                e.asked_joules, e.budget_joules,
            ),
            serde_json::json!({
                "budget_money": e.budget_joules,
                "spent_money": e.spent_joules,
                "held_money": e.held_joules,
                "asked_money": e.asked_joules,
                "currency": currency,
                "resets_at": resets_at,
            }),
        ),
    };
    let mut response = typed_error(
        StatusCode::TOO_MANY_REQUESTS,
        "budget_exceeded",
        &message,
        Some(figures),
    );
    let h = response.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after as u64));
    if let Some(status) = status {
        ratelimit_headers(h, status, now);
    }
    response
}

/// Sets `RateLimit-Policy` and `RateLimit` (joules) of `status` on `headers`.
pub(super) fn ratelimit_headers(headers: &mut HeaderMap, status: &Status, now: f64) {
    for (name, value) in status.headers(now) {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}
