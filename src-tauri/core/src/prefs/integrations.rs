//! The `mqtt` and `otlp` preferences: where the app publishes beyond the machine.
//!
//! - `mqtt`: `{"url", "topic_prefix"?, "client_id"?, "interval_ms"?, "password"?}`, or null for
//!   none. The URL is `mqtt://[user@]host[:port]` or `mqtts://…`; a password in it is refused (it
//!   would be written to the preferences file). The password is a secret as the wall meter's
//!   is: never serialized; the engine keeps it in a file readable by its user alone (the one
//!   `wattbar-cli serve --mqtt` reads too). A change that leaves it out keeps the one set
//!   before; null or "" clears it.
//! - `otlp`: `{"endpoint", "interval_ms"?, "headers"?}`, or null. The endpoint is
//!   `http(s)://host[:port][/path]`. `headers` are sent with each push, written as
//!   `OTEL_EXPORTER_OTLP_HEADERS` is (`Authorization=Basic%20…,X-Scope-OrgID=42`; [`otlp_headers`]
//!   states the limits): a secret as the MQTT password is, never serialized, kept apart bound to
//!   the endpoint's origin, carried over a change only to the same origin.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// States at most this often by default.
pub const DEFAULT_MQTT_INTERVAL_MS: u64 = 10_000;
/// Pushes this often by default.
pub const DEFAULT_OTLP_INTERVAL_MS: u64 = 60_000;
const MIN_INTERVAL_MS: u64 = 1_000;
const MAX_INTERVAL_MS: u64 = 3_600_000;

#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct MqttPref {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    pub interval_ms: u64,
    /// Whether a password is kept (never the password itself).
    #[serde(default, skip_deserializing)]
    pub has_secret: bool,
    #[serde(skip)]
    pub password: Option<String>,
}

impl std::fmt::Debug for MqttPref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttPref")
            .field("url", &self.url)
            .field("topic_prefix", &self.topic_prefix)
            .field("client_id", &self.client_id)
            .field("interval_ms", &self.interval_ms)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .finish()
    }
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct OtlpPref {
    pub endpoint: String,
    pub interval_ms: u64,
    /// Whether headers are kept (never the headers themselves).
    #[serde(default, skip_deserializing)]
    pub has_secret: bool,
    /// `OTEL_EXPORTER_OTLP_HEADERS`' text: sent to the endpoint's origin alone.
    #[serde(skip)]
    pub headers: Option<String>,
}

impl std::fmt::Debug for OtlpPref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpPref")
            .field("endpoint", &self.endpoint)
            .field("interval_ms", &self.interval_ms)
            .field("headers", &self.headers.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The longest headers text read.
pub const MAX_HEADERS_BYTES: usize = 8 * 1024;
/// The most headers.
pub const MAX_HEADERS: usize = 32;

/// `text` as `OTEL_EXPORTER_OTLP_HEADERS` writes headers: `name=value` pairs split by commas,
/// each value percent-encoded (W3C Baggage). Limits, checked before anything is kept: at most
/// [`MAX_HEADERS_BYTES`] of text and [`MAX_HEADERS`] headers; a name is an HTTP token (letters,
/// digits, `-`, `_`, `.`), a value visible ASCII or spaces once decoded. The error never holds a
/// value.
pub fn otlp_headers(text: &str) -> Result<Vec<(String, String)>, Error> {
    const F: &str = "otlp";
    if text.len() > MAX_HEADERS_BYTES {
        return Err(invalid(
            F,
            format!("headers over {MAX_HEADERS_BYTES} bytes"),
        ));
    }
    let pairs: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if pairs.len() > MAX_HEADERS {
        return Err(invalid(F, format!("more than {MAX_HEADERS} headers")));
    }
    pairs
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid(F, format!("header {} is not name=value", i + 1)))?;
            let name = name.trim();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(invalid(
                    F,
                    format!("header {} has no name a header may have", i + 1),
                ));
            }
            let value = percent_decoded(value.trim()).ok_or_else(|| {
                invalid(
                    F,
                    format!("the value of header {name} is not visible ASCII once decoded"),
                )
            })?;
            Ok((name.to_string(), value))
        })
        .collect()
}

/// `text` with each `%XX` decoded; `None` where an escape is broken or the result holds
/// anything but visible ASCII and spaces.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out.iter()
        .all(|b| (0x20..0x7f).contains(b))
        .then(|| String::from_utf8(out).ok())
        .flatten()
}

fn invalid(field: &'static str, message: impl Into<String>) -> Error {
    Error::Invalid {
        field,
        message: message.into(),
    }
}

/// The object a value stands for: a string is its URL; null or "" none.
fn object(
    field: &'static str,
    url_key: &str,
    value: &Value,
) -> Result<Option<Map<String, Value>>, Error> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => {
            let mut m = Map::new();
            m.insert(url_key.into(), Value::String(s.clone()));
            Ok(Some(m))
        }
        Value::Object(m) => Ok(Some(m.clone())),
        other => Err(invalid(
            field,
            format!("{other} is not an object with a {url_key}, or null"),
        )),
    }
}

fn text(field: &'static str, map: &Map<String, Value>, key: &str) -> Result<Option<String>, Error> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(other) => Err(invalid(field, format!("{key}: {other} is not a string"))),
    }
}

fn interval(field: &'static str, map: &Map<String, Value>, default: u64) -> Result<u64, Error> {
    match map.get("interval_ms") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|ms| (MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(ms))
            .ok_or_else(|| {
                invalid(
                    field,
                    format!("interval_ms {v} is not between 1000 and 3600000"),
                )
            }),
    }
}

fn only(field: &'static str, map: &Map<String, Value>, keys: &[&str]) -> Result<(), Error> {
    match map.keys().find(|k| !keys.contains(&k.as_str())) {
        Some(unknown) => Err(invalid(
            field,
            format!("{unknown:?} is not one of {}", keys.join(", ")),
        )),
        None => Ok(()),
    }
}

impl MqttPref {
    /// The preference from a value a person or a file gave, `previous` the one set before
    /// (whose password is kept where this one leaves it out).
    pub fn parse(value: &Value, previous: Option<&MqttPref>) -> Result<Option<MqttPref>, Error> {
        const F: &str = "mqtt";
        let Some(map) = object(F, "url", value)? else {
            return Ok(None);
        };
        only(
            F,
            &map,
            &[
                "url",
                "topic_prefix",
                "client_id",
                "interval_ms",
                "password",
                "has_secret",
            ],
        )?;
        let url =
            text(F, &map, "url")?.ok_or_else(|| invalid(F, "a url is needed: mqtt://host"))?;
        let rest = url
            .strip_prefix("mqtt://")
            .or_else(|| url.strip_prefix("mqtts://"))
            .ok_or_else(|| invalid(F, "the broker's address starts with mqtt:// or mqtts://"))?;
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains(['/', '?', ' ']) {
            return Err(invalid(
                F,
                "the address is mqtt://[user@]host[:port], no path",
            ));
        }
        if authority
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.contains(':'))
        {
            return Err(invalid(
                F,
                "keep the password out of the address: give it as password",
            ));
        }
        let topic_prefix = text(F, &map, "topic_prefix")?;
        if topic_prefix
            .as_deref()
            .is_some_and(|p| p.contains(['#', '+']))
        {
            return Err(invalid(F, "the topic prefix may not hold # or +"));
        }
        let password = match map.get("password") {
            None => crate::secret::carried(
                previous.map(|p| (p.url.as_str(), p.password.as_ref())),
                &url,
            ),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(invalid(F, "password must be a string")),
        };
        Ok(Some(MqttPref {
            url,
            topic_prefix,
            client_id: text(F, &map, "client_id")?,
            interval_ms: interval(F, &map, DEFAULT_MQTT_INTERVAL_MS)?,
            has_secret: password.is_some(),
            password,
        }))
    }
}

impl OtlpPref {
    /// The preference from a value a person or a file gave, `previous` the one set before
    /// (whose headers are kept where this one leaves them out and names the same origin).
    pub fn parse(value: &Value, previous: Option<&OtlpPref>) -> Result<Option<OtlpPref>, Error> {
        const F: &str = "otlp";
        let Some(map) = object(F, "endpoint", value)? else {
            return Ok(None);
        };
        only(
            F,
            &map,
            &["endpoint", "interval_ms", "headers", "has_secret"],
        )?;
        let endpoint = text(F, &map, "endpoint")?
            .ok_or_else(|| invalid(F, "an endpoint is needed: http://collector:4318"))?;
        let rest = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"))
            .ok_or_else(|| {
                invalid(
                    F,
                    "the endpoint is http(s)://host[:port][/path] (a collector near you)",
                )
            })?;
        if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
            return Err(invalid(F, "the endpoint names no host"));
        }
        let headers = match map.get("headers") {
            None => crate::secret::carried(
                previous.map(|p| (p.endpoint.as_str(), p.headers.as_ref())),
                &endpoint,
            ),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim().is_empty() => None,
            Some(Value::String(s)) => {
                otlp_headers(s)?;
                Some(s.trim().to_string())
            }
            Some(_) => return Err(invalid(F, "headers must be a string")),
        };
        Ok(Some(OtlpPref {
            endpoint,
            interval_ms: interval(F, &map, DEFAULT_OTLP_INTERVAL_MS)?,
            has_secret: headers.is_some(),
            headers,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_mqtt_password_is_kept_apart_and_kept_when_left_out() {
        let first = MqttPref::parse(
            &json!({"url": "mqtt://ha@broker", "password": "hunter2"}),
            None,
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("refused"));
        assert_eq!(first.interval_ms, DEFAULT_MQTT_INTERVAL_MS);
        let written = serde_json::to_string(&first).unwrap_or_default();
        assert!(
            !written.contains("hunter2") && written.contains("\"has_secret\":true"),
            "{written}"
        );
        assert!(!format!("{first:?}").contains("hunter2"));
        // A form sends the rest back without the password: it stays.
        let again = MqttPref::parse(
            &json!({"url": "mqtt://ha@broker", "interval_ms": 5000}),
            Some(&first),
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("refused"));
        assert_eq!(again.password.as_deref(), Some("hunter2"));
        assert_eq!(again.interval_ms, 5000);
        let cleared = MqttPref::parse(
            &json!({"url": "mqtt://ha@broker", "password": null}),
            Some(&first),
        );
        assert_eq!(cleared.ok().flatten().and_then(|p| p.password), None);
    }

    #[test]
    fn what_is_no_broker_or_collector_is_refused_with_its_field() {
        for bad in [
            json!("http://broker"),
            json!("mqtt://ha:pw@broker"),
            json!({"url": "mqtt://broker/topic"}),
            json!({"url": "mqtt://broker", "interval_ms": 10}),
            json!({"url": "mqtt://broker", "topic_prefix": "a/#"}),
            json!({"url": "mqtt://broker", "retain": true}),
            json!(3),
        ] {
            let e = MqttPref::parse(&bad, None)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with("mqtt:"), "{bad}: {e:?}");
        }
        for bad in [
            json!("ftp://collector"),
            json!("http://"),
            json!({"endpoint": "http://c", "interval_ms": 0}),
            json!({"endpoint": "http://c", "headers": 7}),
        ] {
            let e = OtlpPref::parse(&bad, None)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with("otlp:"), "{bad}: {e:?}");
        }
        assert_eq!(MqttPref::parse(&json!(null), None).ok().flatten(), None);
        let otlp = OtlpPref::parse(&json!("http://collector:4318"), None)
            .ok()
            .flatten();
        assert_eq!(otlp.map(|o| o.interval_ms), Some(DEFAULT_OTLP_INTERVAL_MS));
    }

    #[test]
    fn an_mqtt_password_never_follows_another_broker() {
        let first = MqttPref::parse(
            &json!({"url": "mqtt://ha@broker", "password": "hunter2"}),
            None,
        )
        .ok()
        .flatten();
        for elsewhere in [
            "mqtt://ha@evil.example",
            "mqtt://ha@broker:1884",
            "mqtts://ha@broker",
        ] {
            let moved = MqttPref::parse(&json!({ "url": elsewhere }), first.as_ref())
                .ok()
                .flatten();
            assert_eq!(
                moved.map(|p| (p.password, p.has_secret)),
                Some((None, false)),
                "{elsewhere}"
            );
        }
    }

    #[test]
    fn otlp_headers_read_as_the_sdks_write_them_and_follow_no_other_origin() {
        let h = otlp_headers("Authorization=Basic%20dXNlcjpwdw==, X-Scope-OrgID=42");
        assert_eq!(
            h.ok(),
            Some(vec![
                ("Authorization".into(), "Basic dXNlcjpwdw==".into()),
                ("X-Scope-OrgID".into(), "42".into()),
            ])
        );
        for bad in ["novalue", "a b=1", "x=%zz", "x=%0d%0aEvil: 1", "=1"] {
            let refused = otlp_headers(bad).map_err(|e| e.to_string());
            assert!(refused.is_err(), "{bad}");
        }
        let many = vec!["a=1"; MAX_HEADERS + 1].join(",");
        assert!(otlp_headers(&many).is_err());
        assert!(otlp_headers(&"x".repeat(MAX_HEADERS_BYTES + 1)).is_err());
        let first = OtlpPref::parse(
            &json!({"endpoint": "https://otlp.example:4318", "headers": "Authorization=Bearer%20s3cret"}),
            None,
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("refused"));
        let written = serde_json::to_string(&first).unwrap_or_default();
        assert!(!written.contains("s3cret") && written.contains("\"has_secret\":true"));
        assert!(!format!("{first:?}").contains("s3cret"));
        // The same origin keeps them; another host or port does not.
        let kept = OtlpPref::parse(
            &json!({"endpoint": "https://otlp.example:4318/v1/metrics", "interval_ms": 5000}),
            Some(&first),
        );
        assert!(kept.ok().flatten().is_some_and(|p| p.headers.is_some()));
        for elsewhere in ["https://evil.example:4318", "http://otlp.example:4318"] {
            let moved = OtlpPref::parse(&json!({"endpoint": elsewhere}), Some(&first));
            let moved = moved.ok().flatten().unwrap_or_else(|| panic!("refused"));
            assert_eq!(
                (moved.headers, moved.has_secret),
                (None, false),
                "{elsewhere}"
            );
        }
    }
}
