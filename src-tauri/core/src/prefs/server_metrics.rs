//! The `server_metrics` preference: model servers followed by their own `/metrics`.
//!
//! - A list of `{"url", "kind"?, "token"?}` (a plain string is its URL); `[]` or null for none,
//!   at most [`MAX_SERVERS`]. The same URL twice is refused.
//! - `url`: `http(s)://host[:port][/path]` (`/metrics` is added where there is no path); a
//!   password in it is refused: it would be written to the preferences file.
//! - `kind`: `llama.cpp`, `vllm`, `sglang` or `tgi` (any case). The family is read off the
//!   exposition itself; a kind given is a check, and a server that answers as another family
//!   is not counted, with both names said.
//! - `token`: sent as `Authorization: Bearer` (vLLM's and SGLang's `--api-key`). A secret as the
//!   wall meter's are: never serialized; the engine keeps the tokens in a file readable by its
//!   user alone. A change that leaves a server's token out keeps the one set before for the same
//!   URL; null or "" clears it.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Servers followed at most.
pub const MAX_SERVERS: usize = 16;
/// The kinds a person may name, as the exposition's families are named.
pub const KINDS: [&str; 4] = ["llama.cpp", "vllm", "sglang", "tgi"];

const F: &str = "server_metrics";

#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsPref {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Whether a token is kept (never the token itself).
    #[serde(default, skip_deserializing)]
    pub has_secret: bool,
    #[serde(skip)]
    pub token: Option<String>,
}

/// Shows where the server is, never its token.
impl std::fmt::Debug for ServerMetricsPref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetricsPref")
            .field("url", &self.url)
            .field("kind", &self.kind)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid {
        field: F,
        message: message.into(),
    }
}

impl ServerMetricsPref {
    /// The list from a value a person or a file gave; `previous`: the list set before, whose
    /// tokens are kept where this one leaves them out.
    pub fn parse(
        value: &Value,
        previous: &[ServerMetricsPref],
    ) -> Result<Vec<ServerMetricsPref>, Error> {
        let items = match value {
            Value::Null => return Ok(Vec::new()),
            Value::Array(items) => items,
            other => {
                return Err(invalid(format!(
                    "{other} is not a list of {{\"url\", \"kind\"?, \"token\"?}}"
                )))
            }
        };
        if items.len() > MAX_SERVERS {
            return Err(invalid(format!(
                "{} servers; at most {MAX_SERVERS} are followed",
                items.len()
            )));
        }
        let mut out: Vec<ServerMetricsPref> = Vec::new();
        for item in items {
            let server = ServerMetricsPref::one(item, previous)?;
            if out.iter().any(|s| s.url == server.url) {
                return Err(invalid(format!("{} is listed twice", server.url)));
            }
            out.push(server);
        }
        Ok(out)
    }

    fn one(item: &Value, previous: &[ServerMetricsPref]) -> Result<ServerMetricsPref, Error> {
        let map = match item {
            Value::String(url) => {
                let mut m = serde_json::Map::new();
                m.insert("url".into(), Value::String(url.clone()));
                m
            }
            Value::Object(m) => m.clone(),
            other => return Err(invalid(format!("{other} is not a server's object or URL"))),
        };
        if let Some(unknown) = map
            .keys()
            .find(|k| !["url", "kind", "token", "has_secret"].contains(&k.as_str()))
        {
            return Err(invalid(format!(
                "{unknown:?} is not one of url, kind, token"
            )));
        }
        let url = match map.get("url") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().trim_end_matches('/'),
            _ => return Err(invalid("each server needs a url: http://127.0.0.1:8000")),
        };
        check_url(url)?;
        let kind = match map.get("kind") {
            None | Some(Value::Null) => None,
            Some(Value::String(k)) if k.trim().is_empty() => None,
            Some(Value::String(k)) => {
                let k = k.trim().to_ascii_lowercase();
                let k = if k == "llamacpp" {
                    "llama.cpp".into()
                } else {
                    k
                };
                if !KINDS.contains(&k.as_str()) {
                    return Err(invalid(format!(
                        "kind {k:?} is not one of {}",
                        KINDS.join(", ")
                    )));
                }
                Some(k)
            }
            Some(other) => return Err(invalid(format!("kind: {other} is not a string"))),
        };
        let token = match map.get("token") {
            None => previous
                .iter()
                .find(|p| p.url == url)
                .and_then(|p| p.token.clone()),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim().is_empty() => None,
            Some(Value::String(s)) if s.trim().chars().any(char::is_control) => {
                return Err(invalid("the token holds a control character"))
            }
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(_) => return Err(invalid("token must be a string")),
        };
        Ok(ServerMetricsPref {
            url: url.to_string(),
            kind,
            has_secret: token.is_some(),
            token,
        })
    }
}

/// `http(s)://host[:port][/path]`, no space, no password.
fn check_url(url: &str) -> Result<(), Error> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| invalid(format!("{url:?} is not an http:// or https:// address")))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(format!("{url:?} names no host")));
    }
    if authority
        .rsplit_once('@')
        .is_some_and(|(user, _)| user.contains(':'))
    {
        return Err(invalid(
            "keep the password out of the address: give the server's key as token",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn servers_are_read_with_their_kind_and_token_and_the_token_is_never_written() {
        let list = ServerMetricsPref::parse(
            &json!([
                "http://127.0.0.1:8080/",
                {"url": "http://gpu-box:8000", "kind": "vLLM", "token": "sk-vllm-secret"}
            ]),
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(list[0].url, "http://127.0.0.1:8080");
        assert_eq!(
            (list[1].kind.as_deref(), list[1].has_secret),
            (Some("vllm"), true)
        );
        let written = serde_json::to_string(&list).unwrap_or_default();
        assert!(!written.contains("sk-vllm-secret"), "{written}");
        assert!(!format!("{list:?}").contains("sk-vllm-secret"));
        // Set again without it: the token set before for that URL is kept; null clears it.
        let again = ServerMetricsPref::parse(&json!([{"url": "http://gpu-box:8000"}]), &list)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again[0].token.as_deref(), Some("sk-vllm-secret"));
        let cleared = ServerMetricsPref::parse(
            &json!([{"url": "http://gpu-box:8000", "token": null}]),
            &list,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cleared[0].token, None);
        assert_eq!(
            ServerMetricsPref::parse(&json!(null), &list).ok(),
            Some(Vec::new())
        );
    }

    #[test]
    fn bad_servers_are_refused_with_the_reason() {
        let said = |v: Value| {
            ServerMetricsPref::parse(&v, &[])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(said(json!(["ftp://x"])).contains("http://"));
        assert!(said(json!(["http://u:pw@127.0.0.1:8000"])).contains("password"));
        assert!(!said(json!(["http://u:pw@127.0.0.1:8000"])).contains("pw@"));
        assert!(said(json!([{"url": "http://a:1", "kind": "ollama"}])).contains("not one of"));
        assert!(said(json!(["http://a:1", "http://a:1/"])).contains("twice"));
        assert!(said(json!([{"url": "http://a:1", "port": 2}])).contains("\"port\""));
        let many: Vec<String> = (0..=MAX_SERVERS)
            .map(|i| format!("http://a:{}", i + 1))
            .collect();
        assert!(said(json!(many)).contains("at most"));
        assert!(said(json!({"url": "http://a:1"})).contains("list"));
    }
}
