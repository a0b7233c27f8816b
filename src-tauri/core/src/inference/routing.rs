//! Low-power routing: which model serves a request while low-power mode routes, and the request
//! body rewritten for it.
//!
//! Rules:
//! - The caller routes only with `low_power_action = route`, the mode on, and a request that did
//!   not ask to be left alone (`X-Wattbar-Route: off`); [`rewrite`] takes the settings.
//! - The served model: `low_power_routes[requested]`, else `low_power_routes["*"]`, else
//!   `low_power_model`. A request already for the model it would go to keeps it.
//! - The cap (`low_power_max_tokens`): a generation limit above it, or none at all, becomes the
//!   cap. Ollama: `options.num_predict` (negative means unlimited there). OpenAI: `max_tokens`
//!   and `max_completion_tokens`, whichever the request gives; `max_tokens` when it gives
//!   neither, the one every compatible server reads.
//! - Only those values change, in place ([`members`](super::members)): every other byte goes as
//!   the client wrote it. A body that is not a JSON object naming its model as a string is sent
//!   as it came, and so is one that needs no change.

use super::members::{Edits, Object};
use super::Route;
use crate::policy::PolicyConfig;
use serde_json::value::RawValue;
use serde_json::Value;

/// A generation limit lowered to the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    /// The request's field: `num_predict`, `max_tokens` or `max_completion_tokens`.
    pub field: &'static str,
    /// What the request asked; `None`: no limit.
    pub from: Option<u64>,
    pub to: u64,
}

/// A request changed for low-power mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    pub requested: String,
    pub served: String,
    pub capped: Vec<Capped>,
}

impl Rewritten {
    /// True when another model serves the request.
    pub fn rerouted(&self) -> bool {
        self.requested != self.served
    }

    /// The `X-Wattbar-Routed` header: `llama3.1:70b -> qwen3:1b`, then each cap, such as
    /// `; max_tokens 4096 -> 256` or `; num_predict unlimited -> 256`.
    pub fn header(&self) -> String {
        let mut out = format!("{} -> {}", self.requested, self.served);
        for c in &self.capped {
            let from = c.from.map_or("unlimited".to_string(), |n| n.to_string());
            out.push_str(&format!("; {} {from} -> {}", c.field, c.to));
        }
        out
    }
}

/// The model that serves a request for `requested` while routing. With
/// [`AUTO_MODEL`](crate::policy::AUTO_MODEL) the caller puts the chosen model in its place, and
/// where none is chosen a request no route names keeps its model.
pub fn served_model<'a>(config: &'a PolicyConfig, requested: &'a str) -> &'a str {
    config
        .routes
        .get(requested)
        .or_else(|| config.routes.get("*"))
        .map_or_else(
            || {
                if config.auto_model() {
                    requested
                } else {
                    config.model.as_str()
                }
            },
            String::as_str,
        )
}

/// The members of a request that routing reads.
pub const READS: [&str; 4] = ["model", "options", "max_tokens", "max_completion_tokens"];

/// The changes for the low-power model and cap, added to `edits`; `None` when the request stays
/// as it is. `request` keeps [`READS`].
pub fn rewrite(
    request: &Object,
    route: Route,
    config: &PolicyConfig,
    edits: &mut Edits,
) -> Option<Rewritten> {
    let requested = request.string("model")?;
    let served = served_model(config, &requested).to_string();
    if served != requested {
        edits.set(request, "model", Value::from(served.as_str()).to_string());
    }
    let capped = match config.max_tokens {
        Some(cap) => cap_tokens(request, route, cap, edits),
        None => Vec::new(),
    };
    if served == requested && capped.is_empty() {
        return None;
    }
    Some(Rewritten {
        requested,
        served,
        capped,
    })
}

/// A limit as a request gives it: `None` for none (absent, null or negative); `Err` for one
/// that is not a number, which is left for the server to refuse.
pub(crate) fn limit(value: Option<&RawValue>) -> Result<Option<u64>, ()> {
    let Some(raw) = value else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(raw.get()).map_err(|_| ())? {
        Value::Null => Ok(None),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Ok(Some(u)),
            (None, Some(i)) if i < 0 => Ok(None),
            _ => Err(()),
        },
        _ => Err(()),
    }
}

/// Lowers `object[field]` to `cap`; what was changed.
fn cap_field(object: &Object, field: &'static str, cap: u64, edits: &mut Edits) -> Option<Capped> {
    let from = limit(object.get(field)).ok()?;
    if from.is_some_and(|n| n <= cap) {
        return None;
    }
    edits.set(object, field, cap.to_string());
    Some(Capped {
        field,
        from,
        to: cap,
    })
}

pub(crate) fn cap_tokens(
    request: &Object,
    route: Route,
    cap: u64,
    edits: &mut Edits,
) -> Vec<Capped> {
    match route {
        Route::OllamaGenerate | Route::OllamaChat => {
            let options = request.get("options").map(|o| o.get().trim());
            match options {
                None | Some("null") => {
                    let capped = Capped {
                        field: "num_predict",
                        from: None,
                        to: cap,
                    };
                    edits.set(request, "options", format!("{{\"num_predict\":{cap}}}"));
                    vec![capped]
                }
                Some(_) => match request.object("options", &["num_predict"]) {
                    Some(o) => cap_field(&o, "num_predict", cap, edits)
                        .into_iter()
                        .collect(),
                    None => Vec::new(),
                },
            }
        }
        Route::OpenAiChat | Route::OpenAiCompletions => {
            let given: Vec<&'static str> = ["max_tokens", "max_completion_tokens"]
                .into_iter()
                .filter(|f| request.get(f).is_some_and(|v| v.get().trim() != "null"))
                .collect();
            let fields = if given.is_empty() {
                vec!["max_tokens"]
            } else {
                given
            };
            fields
                .into_iter()
                .filter_map(|f| cap_field(request, f, cap, edits))
                .collect()
        }
        Route::External => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::LowPowerAction;
    use serde_json::json;

    fn config(routes: &[(&str, &str)], max_tokens: Option<u64>) -> PolicyConfig {
        PolicyConfig {
            action: LowPowerAction::Route,
            model: "qwen3:1b".into(),
            routes: routes
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            max_tokens,
            ..PolicyConfig::default()
        }
    }

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// The routing of `body`, and the body sent with it.
    struct Sent {
        routed: Rewritten,
        body: Vec<u8>,
    }

    impl std::ops::Deref for Sent {
        type Target = Rewritten;
        fn deref(&self) -> &Rewritten {
            &self.routed
        }
    }

    fn rewrite(body: &[u8], route: Route, config: &PolicyConfig) -> Option<Sent> {
        let text = std::str::from_utf8(body).ok()?;
        let request = Object::parse(text, &READS)?;
        let mut edits = Edits::default();
        let routed = super::rewrite(&request, route, config, &mut edits)?;
        Some(Sent {
            routed,
            body: edits.apply(body)?,
        })
    }

    fn sent(r: &Sent) -> Value {
        serde_json::from_slice(&r.body).unwrap_or(Value::Null)
    }

    #[test]
    fn a_named_route_wins_then_the_star_then_the_low_power_model() {
        let c = config(&[("llama3.1:70b", "llama3.2:3b"), ("*", "smollm2")], None);
        assert_eq!(served_model(&c, "llama3.1:70b"), "llama3.2:3b");
        assert_eq!(served_model(&c, "mistral"), "smollm2");
        let plain = config(&[("llama3.1:70b", "llama3.2:3b")], None);
        assert_eq!(served_model(&plain, "mistral"), "qwen3:1b");
    }

    #[test]
    fn auto_routes_only_where_a_route_names_the_model_until_one_is_chosen() {
        let mut c = config(&[("llama3.1:70b", "llama3.2:3b")], None);
        c.model = crate::policy::AUTO_MODEL.into();
        // Nothing chosen: a request no route names keeps its model, never goes to "auto".
        assert_eq!(served_model(&c, "gemma3:27b"), "gemma3:27b");
        assert_eq!(served_model(&c, "llama3.1:70b"), "llama3.2:3b");
        c.routes.insert("*".into(), "qwen3:1b".into());
        assert_eq!(served_model(&c, "gemma3:27b"), "qwen3:1b");
    }

    #[test]
    fn a_routed_request_changes_its_model_and_nothing_else() {
        let c = config(&[], None);
        let original = json!({"model": "llama3.1:70b", "prompt": "Why?", "stream": false,
                              "options": {"temperature": 0.7, "seed": 42}});
        let r = rewrite(&body(original.clone()), Route::OllamaGenerate, &c);
        let r = r.unwrap_or_else(|| panic!("not routed"));
        let mut expected = original;
        expected["model"] = json!("qwen3:1b");
        assert_eq!(sent(&r), expected);
        assert_eq!(r.header(), "llama3.1:70b -> qwen3:1b");
        assert!(r.rerouted());
    }

    #[test]
    fn a_request_for_the_low_power_model_is_left_alone() {
        let c = config(&[], None);
        let b = body(json!({"model": "qwen3:1b", "messages": []}));
        assert!(rewrite(&b, Route::OpenAiChat, &c).is_none());
    }

    #[test]
    fn bodies_without_a_model_string_pass_unchanged() {
        let c = config(&[], Some(64));
        for b in [
            &b"not json"[..],
            b"[1,2]",
            br#"{"model": 3}"#,
            br#"{"prompt": "x"}"#,
        ] {
            assert!(rewrite(b, Route::OllamaGenerate, &c).is_none(), "{b:?}");
        }
    }

    #[test]
    fn ollama_num_predict_above_the_cap_or_unlimited_is_lowered_and_below_kept() {
        let c = config(&[], Some(256));
        let num_predict = |options: Value| {
            let b = body(json!({"model": "qwen3:1b", "prompt": "x", "options": options}));
            rewrite(&b, Route::OllamaChat, &c).map(|r| {
                let header = r.header();
                (sent(&r)["options"]["num_predict"].clone(), header)
            })
        };
        assert_eq!(
            num_predict(json!({"num_predict": 4096, "top_k": 20})),
            Some((
                json!(256),
                "qwen3:1b -> qwen3:1b; num_predict 4096 -> 256".into()
            ))
        );
        // -1 is Ollama's "no limit"; an absent field is its default, no limit either.
        assert_eq!(
            num_predict(json!({"num_predict": -1})),
            Some((
                json!(256),
                "qwen3:1b -> qwen3:1b; num_predict unlimited -> 256".into()
            ))
        );
        assert_eq!(num_predict(json!({})).map(|x| x.0), Some(json!(256)));
        assert_eq!(num_predict(Value::Null).map(|x| x.0), Some(json!(256)));
        assert_eq!(num_predict(json!({"num_predict": 100})), None);
        assert_eq!(num_predict(json!({"num_predict": 256})), None);
    }

    #[test]
    fn openai_caps_the_fields_the_request_gives_else_max_tokens() {
        let c = config(&[], Some(128));
        let b = body(json!({"model": "big", "messages": [], "max_completion_tokens": 1000}));
        let r = rewrite(&b, Route::OpenAiChat, &c).unwrap_or_else(|| panic!("unchanged"));
        let v = sent(&r);
        assert_eq!(v["max_completion_tokens"], json!(128));
        assert_eq!(v.get("max_tokens"), None);
        assert_eq!(
            r.header(),
            "big -> qwen3:1b; max_completion_tokens 1000 -> 128"
        );
        let b = body(json!({"model": "big", "prompt": "x"}));
        let r = rewrite(&b, Route::OpenAiCompletions, &c).unwrap_or_else(|| panic!("unchanged"));
        assert_eq!(sent(&r)["max_tokens"], json!(128));
        // A limit that is not a number is the server's to refuse.
        let b = body(json!({"model": "qwen3:1b", "max_tokens": "many"}));
        assert!(rewrite(&b, Route::OpenAiChat, &c).is_none());
    }
}
