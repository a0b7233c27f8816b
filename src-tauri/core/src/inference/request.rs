//! A generation request's body as the proxy sends it on: read once for its model, routed for
//! low-power mode, and a stream asked for its usage, all as one set of edits to the bytes the
//! client sent ([`members`](super::members)).

use super::members::{Edits, Object};
use super::routing::{self, Rewritten};
use super::{usage, Route};
use crate::policy::PolicyConfig;

/// What the proxy learned from a request body, and the body to send when it changed.
#[derive(Debug, Default, PartialEq)]
pub struct Prepared {
    /// The body to send instead of the client's; `None`: send it unchanged.
    pub body: Option<Vec<u8>>,
    /// The model that serves the request, when the body names one.
    pub model: Option<String>,
    /// The proxy asked the stream for its usage: the client did not.
    pub asked_usage: bool,
    /// What low-power routing changed.
    pub routed: Option<Rewritten>,
}

/// Reads `body` once; routes it by `routing` when given, and asks an OpenAI-style stream for
/// its usage. A body that is no JSON object goes unchanged, its model unknown.
pub fn prepare(body: &[u8], route: Route, routing: Option<&PolicyConfig>) -> Prepared {
    let Ok(text) = std::str::from_utf8(body) else {
        return Prepared::default();
    };
    let reads: Vec<&str> = routing::READS.into_iter().chain(usage::READS).collect();
    let Some(request) = Object::parse(text, &reads) else {
        return Prepared::default();
    };
    let mut edits = Edits::default();
    let routed = routing.and_then(|c| routing::rewrite(&request, route, c, &mut edits));
    let asked_usage = matches!(route, Route::OpenAiChat | Route::OpenAiCompletions)
        && usage::ask_for_usage(&request, &mut edits);
    let model = match &routed {
        Some(w) => Some(w.served.clone()),
        None => request.string("model"),
    };
    let body = if edits.is_empty() {
        None
    } else {
        edits.apply(body)
    };
    Prepared {
        body,
        model,
        asked_usage,
        routed,
    }
}

/// The most tokens `body` lets the model generate: Ollama's `options.num_predict`, OpenAI's
/// `max_tokens` or `max_completion_tokens` (the smaller where both are given); `None` where it
/// sets no limit, or is no JSON object.
pub fn token_cap(body: &[u8], route: Route) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let request = Object::parse(text, &routing::READS)?;
    match route {
        Route::OllamaGenerate | Route::OllamaChat => request
            .object("options", &["num_predict"])
            .and_then(|o| routing::limit(o.get("num_predict")).ok().flatten()),
        Route::OpenAiChat | Route::OpenAiCompletions => ["max_tokens", "max_completion_tokens"]
            .into_iter()
            .filter_map(|f| routing::limit(request.get(f)).ok().flatten())
            .min(),
        Route::External => None,
    }
}

/// `body` with its generation limit lowered to `cap` (where it asks more, or sets none), the
/// rest of its bytes as they came; `None` where nothing changes or it is no JSON object.
pub fn with_token_cap(body: &[u8], route: Route, cap: u64) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let request = Object::parse(text, &routing::READS)?;
    let mut edits = Edits::default();
    routing::cap_tokens(&request, route, cap, &mut edits);
    if edits.is_empty() {
        return None;
    }
    edits.apply(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LowPowerAction;

    fn route_to_small(max_tokens: Option<u64>) -> PolicyConfig {
        PolicyConfig {
            action: LowPowerAction::Route,
            model: "small".into(),
            max_tokens,
            ..PolicyConfig::default()
        }
    }

    /// Key order, spacing, `1.0`, a number past f64 and an integer past u64: re-encoding would
    /// change each (or refuse the body), so a routed body must be the client's with only the
    /// model's value changed.
    #[test]
    fn a_routed_body_is_the_clients_bytes_with_only_the_model_changed() {
        let sent = "{\"temperature\": 1.0, \"model\":\"big\",\n \"seed\": 12345678901234567890123,\
                    \"logit_bias\": {\"z\": 1e400, \"a\": -0.50}, \"stream\": false}";
        let p = prepare(
            sent.as_bytes(),
            Route::OllamaGenerate,
            Some(&route_to_small(None)),
        );
        let body = String::from_utf8(p.body.unwrap_or_default()).unwrap_or_default();
        assert_eq!(body, sent.replace("\"big\"", "\"small\""));
        assert_eq!(p.model.as_deref(), Some("small"));
        assert_eq!(
            p.routed.map(|r| r.header()).as_deref(),
            Some("big -> small")
        );
    }

    #[test]
    fn routing_capping_and_usage_are_one_set_of_edits_to_one_read() {
        let sent = r#"{"model":"big","stream":true,"max_tokens":4096,"n":1.0}"#;
        let p = prepare(
            sent.as_bytes(),
            Route::OpenAiChat,
            Some(&route_to_small(Some(256))),
        );
        assert_eq!(
            String::from_utf8(p.body.unwrap_or_default()).unwrap_or_default(),
            r#"{"stream_options":{"include_usage":true},"model":"small","stream":true,"max_tokens":256,"n":1.0}"#
        );
        assert!(p.asked_usage);
    }

    #[test]
    fn a_token_cap_is_read_from_either_dialect_and_lowered_in_place() {
        let openai = br#"{"model":"m","max_tokens":300,"max_completion_tokens":200}"#;
        assert_eq!(token_cap(openai, Route::OpenAiChat), Some(200));
        let ollama = br#"{"model":"m","options":{"num_predict":64,"seed":1}}"#;
        assert_eq!(token_cap(ollama, Route::OllamaChat), Some(64));
        assert_eq!(token_cap(br#"{"model":"m"}"#, Route::OpenAiChat), None);
        assert_eq!(token_cap(b"not json", Route::OpenAiChat), None);
        let lowered = with_token_cap(
            br#"{"model":"m", "max_tokens": 300}"#,
            Route::OpenAiChat,
            40,
        );
        assert_eq!(
            lowered.as_deref(),
            Some(&br#"{"model":"m", "max_tokens": 40}"#[..])
        );
        let none_asked = with_token_cap(br#"{"model":"m"}"#, Route::OllamaGenerate, 40);
        assert_eq!(
            none_asked.as_deref(),
            Some(&br#"{"options":{"num_predict":40},"model":"m"}"#[..])
        );
        assert_eq!(with_token_cap(openai, Route::OpenAiChat, 500), None);
    }

    #[test]
    fn a_body_left_alone_is_sent_as_it_came_with_its_model_read() {
        let sent = br#"{"model":"big","stream":false}"#;
        let p = prepare(sent, Route::OpenAiChat, None);
        assert_eq!(p.body, None);
        assert_eq!(p.model.as_deref(), Some("big"));
        assert_eq!(
            prepare(b"\xff{", Route::OpenAiChat, None),
            Prepared::default()
        );
    }
}
