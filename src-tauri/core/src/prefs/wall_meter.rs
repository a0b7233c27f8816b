//! The `wall_meter` preference: the smart plug the machine is plugged into.
//!
//! `{"url", "kind"?, "channels"?, "password"?, "token"?}`, or null for none. Rules:
//! - The URL is `http://host[:port][/path]`: plugs answer plain HTTP on the local network
//!   (`kasa://host` for a Kasa plug's own TCP protocol; `https://` for a Home Assistant with
//!   TLS, so that its token never goes in clear). A
//!   password in it (`http://admin:PASSWORD@host`) is taken out at once: the stored URL never
//!   holds one.
//! - `kind` is one of [`KINDS`]; without it the device is found from its own answers.
//! - The password and a Home Assistant token are secrets: they are never serialized (not in the
//!   preferences file, not in `/v1/preferences`); the engine keeps them in a file of their own
//!   that only its user can read. A change that leaves `password` or `token` out keeps the one
//!   set before (a form does not send back what it cannot show) only for an address of the
//!   same origin ([`crate::secret::carried`]); null or "" clears it.

use crate::error::Error;
use serde::{Deserialize, Serialize};

/// The kinds a user may name.
pub const KINDS: [&str; 5] = [
    "shelly-gen1",
    "shelly-gen2",
    "tasmota",
    "kasa",
    "home-assistant",
];

/// Channels a device may be asked to sum, at most.
const MAX_CHANNELS: usize = 16;

#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WallMeterPref {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// An https meter's own certificate, trusted by its SHA-256 alone ([`crate::pin`]): a Home
    /// Assistant with a self-signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_pin_sha256: Option<String>,
    /// Whether a password or token is kept (never the secret itself).
    #[serde(default, skip_deserializing)]
    pub has_secret: bool,
    #[serde(skip)]
    pub password: Option<String>,
    #[serde(skip)]
    pub token: Option<String>,
}

/// Shows where the meter is, never its secrets.
impl std::fmt::Debug for WallMeterPref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WallMeterPref")
            .field("url", &self.url)
            .field("kind", &self.kind)
            .field("channels", &self.channels)
            .field("tls_pin_sha256", &self.tls_pin_sha256)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish()
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid {
        field: "wall_meter",
        message: message.into(),
    }
}

impl WallMeterPref {
    /// The preference from a value a person or a file gave, `previous` the one set before
    /// (whose secrets are kept where this one leaves them out).
    pub fn parse(
        value: &serde_json::Value,
        previous: Option<&WallMeterPref>,
    ) -> Result<Option<WallMeterPref>, Error> {
        let map = match value {
            serde_json::Value::Null => return Ok(None),
            serde_json::Value::String(s) if s.trim().is_empty() => return Ok(None),
            serde_json::Value::String(s) => {
                let mut m = serde_json::Map::new();
                m.insert("url".into(), serde_json::Value::String(s.clone()));
                m
            }
            serde_json::Value::Object(m) => m.clone(),
            other => {
                return Err(invalid(format!(
                    "{other} is not an object with a url, or null"
                )))
            }
        };
        if let Some(unknown) = map.keys().find(|k| {
            ![
                "url",
                "kind",
                "channels",
                "tls_pin_sha256",
                "password",
                "token",
                "has_secret",
            ]
            .contains(&k.as_str())
        }) {
            return Err(invalid(format!(
                "{unknown:?} is not one of url, kind, channels, tls_pin_sha256, password, token"
            )));
        }
        let text = |key: &str| -> Result<Option<String>, Error> {
            // A secret is kept as typed, spaces and all, and never repeated in a message.
            let secret = key == "password" || key == "token";
            match map.get(key) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) if secret && s.is_empty() => Ok(None),
                Some(serde_json::Value::String(s)) if secret => Ok(Some(s.clone())),
                Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.trim().to_string())),
                Some(_) if secret => Err(invalid(format!("{key} must be a string"))),
                Some(other) => Err(invalid(format!("{key}: {other} is not a string"))),
            }
        };
        let url = text("url")?.ok_or_else(|| invalid("a url is needed: http://host"))?;
        let (url, in_url) = take_password(&url)?;
        let kind = text("kind")?;
        if let Some(k) = &kind {
            if !KINDS.contains(&k.as_str()) {
                return Err(invalid(format!(
                    "kind {k:?} is not one of {}",
                    KINDS.join(", ")
                )));
            }
        }
        let channels = match map.get("channels") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .map(|c| {
                    c.as_str()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty() && s.len() <= 32)
                        .ok_or_else(|| {
                            invalid(format!("channel {c} is not a name such as switch:0"))
                        })
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(invalid(format!("channels: {other} is not a list"))),
        };
        if channels.len() > MAX_CHANNELS {
            return Err(invalid(format!("at most {MAX_CHANNELS} channels")));
        }
        let tls_pin_sha256 = match text("tls_pin_sha256")? {
            Some(_) if !url.starts_with("https://") => {
                return Err(invalid(
                    "tls_pin_sha256 pins an https address's certificate; this address is not https",
                ));
            }
            Some(pin) => Some(crate::pin::Pin::parse(&pin).map_err(invalid)?.to_string()),
            None => None,
        };
        // Left out: the secret set before stays; null or "": cleared.
        let secret = |key: &str, before: Option<&String>| -> Result<Option<String>, Error> {
            match map.get(key) {
                None => Ok(before.cloned()),
                Some(_) => text(key),
            }
        };
        // Kept from before only for the same origin: a changed host, port or scheme drops it.
        let kept = |get: fn(&WallMeterPref) -> Option<&String>| {
            crate::secret::carried(previous.map(|p| (p.url.as_str(), get(p))), &url)
        };
        let password = match in_url {
            Some(p) => Some(p),
            None => secret("password", kept(|p| p.password.as_ref()).as_ref())?,
        };
        let token = secret("token", kept(|p| p.token.as_ref()).as_ref())?;
        Ok(Some(WallMeterPref {
            url,
            kind,
            channels,
            tls_pin_sha256,
            has_secret: password.is_some() || token.is_some(),
            password,
            token,
        }))
    }
}

/// The URL without its password, and the password; refuses what is no plug's address.
fn take_password(url: &str) -> Result<(String, Option<String>), Error> {
    let schemes = ["http", "https", "kasa"];
    let Some((scheme, rest)) = schemes
        .iter()
        .find_map(|s| url.strip_prefix(&format!("{s}://")).map(|rest| (*s, rest)))
    else {
        return Err(invalid(
            "the address must start with http:// (plugs answer plain HTTP on the local \
             network), https:// (a Home Assistant with TLS), or kasa:// for a Kasa plug",
        ));
    };
    // The authority ends at the first '/' after its last '@': a password may hold a '/'.
    let after_at = rest.rfind('@').map_or(0, |i| i + 1);
    let (authority, path) = match rest[after_at..].find('/') {
        Some(i) => rest.split_at(after_at + i),
        None => (rest, ""),
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(invalid("the address names no host"));
    }
    let (user, password) = match userinfo.map(|u| u.split_once(':')) {
        Some(Some((user, password))) => (Some(user), Some(password.to_string())),
        Some(None) => (userinfo, None),
        None => (None, None),
    };
    let user = user.map_or(String::new(), |u| format!("{u}@"));
    Ok((format!("{scheme}://{user}{host}{path}"), password))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<Option<WallMeterPref>, Error> {
        WallMeterPref::parse(&v, None)
    }

    #[test]
    fn a_password_in_the_url_is_taken_out_and_never_written() {
        let p = parse(json!({"url": "http://admin:hunter2@192.0.2.7/", "kind": "shelly-gen2"}))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("refused"));
        assert_eq!(p.url, "http://admin@192.0.2.7/");
        assert_eq!(p.password.as_deref(), Some("hunter2"));
        let written = serde_json::to_string(&p).unwrap_or_default();
        assert!(!written.contains("hunter2"), "{written}");
        assert!(written.contains("\"has_secret\":true"), "{written}");
        assert!(!format!("{p:?}").contains("hunter2"));
        // A '/' in the password: still taken out, the host still the host.
        let slash = parse(json!({"url": "http://admin:pa/ss@192.0.2.7/rpc"}))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("refused"));
        assert_eq!(slash.url, "http://admin@192.0.2.7/rpc");
        assert_eq!(slash.password.as_deref(), Some("pa/ss"));
        // A secret of the wrong type is refused without repeating it.
        let why = parse(json!({"url": "http://plug", "password": 123456}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            why.contains("must be a string") && !why.contains("123456"),
            "{why}"
        );
    }

    #[test]
    fn a_change_without_the_secret_keeps_it_and_null_clears_it() {
        let first = parse(json!({"url": "http://ha:8123/api/states/sensor.desk", "token": "tok"}))
            .ok()
            .flatten();
        let moved = WallMeterPref::parse(
            &json!({"url": "http://ha:8123/api/states/sensor.rack"}),
            first.as_ref(),
        )
        .ok()
        .flatten();
        assert_eq!(moved.as_ref().and_then(|p| p.token.as_deref()), Some("tok"));
        let cleared = WallMeterPref::parse(
            &json!({"url": "http://ha:8123/api/states/sensor.rack", "token": null}),
            moved.as_ref(),
        )
        .ok()
        .flatten();
        assert_eq!(
            cleared.map(|p| (p.token, p.has_secret)),
            Some((None, false))
        );
    }

    #[test]
    fn a_kept_secret_never_follows_a_changed_host_port_or_scheme() {
        let first = parse(
            json!({"url": "http://ha:8123/api/states/sensor.desk", "token": "tok",
                                 "password": "pw"}),
        )
        .ok()
        .flatten();
        for elsewhere in [
            "http://evil.example:8123/api/states/sensor.desk",
            "http://ha:8124/api/states/sensor.desk",
            "https://ha:8123/api/states/sensor.desk",
        ] {
            let moved = WallMeterPref::parse(&json!({ "url": elsewhere }), first.as_ref())
                .ok()
                .flatten();
            assert_eq!(
                moved.map(|p| (p.token, p.password, p.has_secret)),
                Some((None, None, false)),
                "{elsewhere}: the secret is asked for again"
            );
        }
    }

    #[test]
    fn what_is_no_plug_is_refused_by_name() {
        let why = |v| parse(v).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(why(json!({"url": "ftp://plug"})).contains("http://"));
        assert_eq!(
            parse(json!({"url": "https://ha.local:8123/api/states/sensor.desk", "token": "t"}))
                .ok()
                .flatten()
                .map(|p| p.url),
            Some("https://ha.local:8123/api/states/sensor.desk".to_string()),
            "a Home Assistant with TLS"
        );
        assert!(why(json!({"url": "http://"})).contains("no host"));
        assert_eq!(
            parse(json!({"url": "kasa://192.0.2.9"}))
                .ok()
                .flatten()
                .map(|p| p.url),
            Some("kasa://192.0.2.9".to_string())
        );
        assert!(why(json!({"url": "http://plug", "kind": "tapo"})).contains("not one of"));
        assert!(why(json!({"url": "http://plug", "channel": [0]})).contains("\"channel\""));
        assert!(why(json!({"url": "http://plug", "channels": [0]})).contains("switch:0"));
        assert!(why(json!({"kind": "tasmota"})).contains("url"));
        assert_eq!(parse(json!(null)).ok(), Some(None));
        assert_eq!(
            parse(json!("http://plug")).ok().flatten().map(|p| p.url),
            Some("http://plug".to_string())
        );
    }

    #[test]
    fn an_https_meter_pins_its_certificate_as_openssl_prints_the_fingerprint() {
        let why = |v| parse(v).err().map(|e| e.to_string()).unwrap_or_default();
        let fingerprint = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let pinned = parse(
            json!({"url": "https://ha.local:8123/api/states/sensor.desk",
                                  "tls_pin_sha256": fingerprint}),
        )
        .ok()
        .flatten()
        .and_then(|p| p.tls_pin_sha256);
        assert_eq!(
            pinned.as_deref(),
            Some(
                "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:A4:95:\
                 99:1B:78:52:B8:55"
            )
        );
        assert!(
            why(json!({"url": "http://plug", "tls_pin_sha256": fingerprint})).contains("not https")
        );
        assert!(
            why(json!({"url": "https://ha.local", "tls_pin_sha256": "AB:CD"}))
                .contains("64 hex digits")
        );
    }
}
