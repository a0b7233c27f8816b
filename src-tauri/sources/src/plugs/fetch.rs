//! Asking a plug over the local network: one HTTP GET (two where the device wants its digest
//! password), at most [`TIMEOUT`], and its answer to the vendor's parser. Plugs answer plain
//! http on the LAN, as their firmware serves them; an https address (a Home Assistant reached
//! over TLS) is asked under the outbound policy ([`wattbar_outbound`]): the system's roots, no
//! redirect.
//!
//! Rules:
//! - The device is found from its own answers when its kind is not given: a Shelly answers
//!   `/shelly` (with `gen` from Gen2 on), a Tasmota `/cm?cmnd=Status`. A URL with a path is
//!   asked as it is (a Home Assistant entity, a Shelly component's RPC).
//! - A password may come in the URL (`http://admin:PASSWORD@host`); it is taken out of the URL
//!   at once, and neither it nor a token is ever part of a message.
//! - A password or token is held bound to the origin it was given for
//!   ([`wattbar_core::secret::Bound`]) and asked for each request by that request's own address:
//!   a meter whose address changed, or any other address, gets nothing.
//! - Shelly's digest authentication is answered with SHA-256 (or what the device names), once
//!   per challenge; a refused password is said so.
//! - Not reaching the device is [`Error::Transient`] (it may come back); a device that answers
//!   but gives no reading is [`Error::Unavailable`] with its reason.

use super::parse::{detect, parse_plug_as};
use super::reading::{PlugReading, Vendor};
use crate::error::Error;
use serde_json::Value;
use std::time::Duration;
use wattbar_core::secret::Bound;
use wattbar_outbound::WALL_METER;

/// The longest a plug may take to answer: sampling never waits for it, and a slower answer is
/// too old to be the draw now.
pub const TIMEOUT: Duration = WALL_METER.timeout;

/// Where the wall meter is and how to ask it.
#[derive(Clone, Default, PartialEq)]
pub struct WallMeter {
    /// `http://host[:port][/path]`, with `user:password@` before the host where the device
    /// has a password.
    pub url: String,
    /// Found from the device's answers where not given.
    pub kind: Option<Vendor>,
    pub password: Option<Bound>,
    /// Home Assistant's long-lived access token.
    pub token: Option<Bound>,
    /// The channels summed (`switch:0`, `em1:1`); all of the device's when empty.
    pub channels: Vec<String>,
    /// An https meter's own certificate, trusted alone ([`wattbar_core::pin`]).
    pub tls_pin: Option<wattbar_core::pin::Pin>,
}

/// Shows where the meter is, never its secrets.
impl std::fmt::Debug for WallMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WallMeter")
            .field("url", &without_credentials(&self.url))
            .field("kind", &self.kind)
            .field("password", &self.password)
            .field("token", &self.token)
            .field("channels", &self.channels)
            .finish()
    }
}

/// A plug found and asked again at each [`PlugClient::read`].
pub struct PlugClient {
    agent: ureq::Agent,
    /// `http://host:port` (or `kasa://host:port`), with no credentials.
    origin: String,
    /// Asked over Kasa's legacy TCP protocol rather than HTTP.
    kasa: bool,
    /// The path asked as given, or none (find the device).
    path: Option<String>,
    kind: Option<Vendor>,
    user: String,
    password: Option<Bound>,
    token: Option<Bound>,
    channels: Vec<String>,
    /// What the device was found to be, and where its reading is.
    found: Option<(Vendor, String)>,
}

impl std::fmt::Debug for PlugClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlugClient")
            .field("origin", &self.origin)
            .field("found", &self.found)
            .finish_non_exhaustive()
    }
}

impl PlugClient {
    pub fn new(meter: &WallMeter) -> Result<PlugClient, Error> {
        let url = meter.url.trim();
        let schemes = [
            ("http://", "http"),
            ("https://", "https"),
            ("kasa://", "kasa"),
        ];
        let Some((rest, scheme)) = schemes
            .iter()
            .find_map(|(prefix, scheme)| Some((url.strip_prefix(prefix)?, *scheme)))
        else {
            return Err(Error::Unavailable(format!(
                "the wall meter's address must start with http:// (plugs answer plain HTTP on \
                 the local network), https:// (a Home Assistant over TLS), or kasa:// for a Kasa \
                 plug: {}",
                without_credentials(url)
            )));
        };
        let kasa = scheme == "kasa";
        let rest = if kasa {
            rest.trim_end_matches('/')
        } else {
            rest
        };
        // The authority ends at the first '/' after its last '@': a password may hold a '/'.
        let after_at = rest.rfind('@').map_or(0, |i| i + 1);
        let (authority, path) = match rest[after_at..].find('/') {
            Some(i) => {
                let (a, p) = rest.split_at(after_at + i);
                (a, Some(p))
            }
            None => (rest, None),
        };
        let (user, password, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                let (user, password) = match userinfo.split_once(':') {
                    Some((u, p)) => (percent_decode(u), Some(percent_decode(p))),
                    None => (percent_decode(userinfo), None),
                };
                (user, password, host)
            }
            None => ("admin".to_string(), None, authority),
        };
        if host.is_empty() {
            return Err(Error::Unavailable(
                "the wall meter's address names no host".to_string(),
            ));
        }
        let config = wattbar_outbound::config(&WALL_METER, scheme == "https")
            .map_err(|e| Error::Unavailable(format!("{scheme}://{host}: {e}")))?
            .http_status_as_error(false)
            .build();
        let agent = wattbar_outbound::agent_with(
            config,
            crate::resolver::KeptResolver::default(),
            meter.tls_pin,
        )
        .map_err(|e| Error::Unavailable(format!("{scheme}://{host}: {e}")))?;
        let origin = format!("{scheme}://{host}");
        let password = password.and_then(|p| Bound::new(&origin, p));
        Ok(PlugClient {
            agent,
            origin,
            kasa,
            path: path.filter(|p| *p != "/").map(String::from),
            kind: meter.kind,
            user,
            password: meter.password.clone().or(password),
            token: meter.token.clone(),
            channels: meter.channels.clone(),
            found: None,
        })
    }

    /// The address, with no credentials: what messages name.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Asks the device now (finding it first, once).
    pub fn read(&mut self) -> Result<PlugReading, Error> {
        if self.kasa {
            let host = self.origin.trim_start_matches("kasa://");
            let text = super::kasa_tcp::ask(super::kasa_tcp::address(host)?, TIMEOUT)?;
            return parse_plug_as(Vendor::Kasa, &text)?.only(&self.channels);
        }
        let (vendor, path) = match &self.found {
            Some(found) => found.clone(),
            None => {
                let found = self.find()?;
                self.found = Some(found.clone());
                found
            }
        };
        let (status, body) = self.get(&path)?;
        match parse_plug_as(vendor, &body) {
            Ok(reading) => reading.only(&self.channels),
            Err(Error::Parse { message, .. }) if status != 200 => Err(Error::Unavailable(format!(
                "{}{path} answered HTTP {status}: {message}",
                self.origin
            ))),
            Err(e) => Err(e),
        }
    }

    /// What the device is and where its reading is.
    fn find(&self) -> Result<(Vendor, String), Error> {
        if let Some(path) = &self.path {
            let vendor = match self.kind {
                Some(kind) => kind,
                None => {
                    let (_, body) = self.get(path)?;
                    serde_json::from_str::<Value>(&body)
                        .ok()
                        .and_then(|v| detect(&v))
                        .ok_or_else(|| {
                            Error::Unavailable(format!(
                                "{}{path} does not answer as a plug Wattbar knows",
                                self.origin
                            ))
                        })?
                }
            };
            return Ok((vendor, path.clone()));
        }
        match self.kind {
            Some(Vendor::ShellyGen1) => return Ok((Vendor::ShellyGen1, "/status".into())),
            Some(Vendor::ShellyGen2) => {
                return Ok((Vendor::ShellyGen2, "/rpc/Shelly.GetStatus".into()))
            }
            Some(Vendor::Tasmota) => return Ok((Vendor::Tasmota, TASMOTA_STATUS.into())),
            Some(Vendor::HomeAssistant) => {
                return Err(Error::Unavailable(
                    "give Home Assistant's entity as the URL: \
                     http://HOST:8123/api/states/sensor.NAME"
                        .to_string(),
                ))
            }
            Some(Vendor::Kasa) => {
                return Err(Error::Unavailable(
                    "Kasa plugs do not answer HTTP: give the address as kasa://HOST".to_string(),
                ))
            }
            Some(Vendor::Tapo) => {
                return Err(Error::Unavailable(
                    "Tapo plugs need the TP-Link cloud account (KLAP): read them through Home \
                     Assistant"
                        .to_string(),
                ))
            }
            None => {}
        }
        let (status, body) = self.get("/shelly")?;
        if status == 200 {
            if let Ok(info) = serde_json::from_str::<Value>(&body) {
                let generation = info.get("gen").and_then(Value::as_u64);
                return Ok(match generation {
                    Some(g) if g >= 2 => (Vendor::ShellyGen2, "/rpc/Shelly.GetStatus".into()),
                    _ => (Vendor::ShellyGen1, "/status".into()),
                });
            }
        }
        let (status, body) = self.get("/cm?cmnd=Status")?;
        let tasmota = serde_json::from_str::<Value>(&body)
            .ok()
            .is_some_and(|v| v.get("Status").is_some());
        if status == 200 && tasmota {
            return Ok((Vendor::Tasmota, TASMOTA_STATUS.into()));
        }
        Err(Error::Unavailable(format!(
            "neither a Shelly (/shelly) nor a Tasmota (/cm?cmnd=Status) answers at {}",
            self.origin
        )))
    }

    /// `GET path`: the status and the body, answering one digest challenge.
    fn get(&self, path: &str) -> Result<(u16, String), Error> {
        let url = format!("{}{path}", self.origin);
        let mut response = self.send(&url, None)?;
        if response.status().as_u16() == 401 {
            let challenge = response
                .headers()
                .get("www-authenticate")
                .and_then(|h| h.to_str().ok())
                .map(String::from);
            let Some(challenge) = challenge.filter(|c| c.trim_start().starts_with("Digest")) else {
                return Err(Error::Unavailable(self.refused(path)));
            };
            let Some(password) = self.password.as_ref().and_then(|p| p.for_address(&url)) else {
                return Err(Error::Unavailable(format!(
                    "{} asks for its password (digest authentication): give it in the wall \
                     meter's settings",
                    self.origin
                )));
            };
            let authorization = digest(&challenge, &self.user, password, path)?;
            response = self.send(&url, Some(&authorization))?;
            if response.status().as_u16() == 401 {
                return Err(Error::Unavailable(format!(
                    "{} refused the password",
                    self.origin
                )));
            }
        }
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(WALL_METER.max_answer_bytes)
            .read_to_string()
            .map_err(|e| Error::Transient(format!("{}{path}: {e}", self.origin)))?;
        Ok((status, body))
    }

    fn send(
        &self,
        url: &str,
        authorization: Option<&str>,
    ) -> Result<ureq::http::Response<ureq::Body>, Error> {
        let mut request = self.agent.get(url);
        if let Some(a) = authorization {
            request = request.header("Authorization", a);
        } else if let Some(token) = self.token.as_ref().and_then(|t| t.for_address(url)) {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        request.call().map_err(|e| {
            Error::Transient(format!(
                "the wall meter at {} did not answer: {}",
                self.origin,
                wattbar_outbound::reason(&e)
            ))
        })
    }

    fn refused(&self, path: &str) -> String {
        let url = format!("{}{path}", self.origin);
        if self
            .token
            .as_ref()
            .and_then(|t| t.for_address(&url))
            .is_some()
        {
            format!("{}{path} refused the token", self.origin)
        } else {
            format!("{}{path} asks for a token or a password", self.origin)
        }
    }
}

const TASMOTA_STATUS: &str = "/cm?cmnd=Status%208";

/// The `Authorization` header that answers a digest `challenge` for `GET uri`.
fn digest(challenge: &str, user: &str, password: &str, uri: &str) -> Result<String, Error> {
    let mut prompt = digest_auth::parse(challenge)
        .map_err(|e| Error::Unavailable(format!("the device's digest challenge: {e}")))?;
    let context = digest_auth::AuthContext::new(user, password, uri);
    prompt
        .respond(&context)
        .map(|answer| answer.to_header_string())
        .map_err(|e| Error::Unavailable(format!("the device's digest challenge: {e}")))
}

/// `url` with any `user:password@` taken out.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(value as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_taken_out_of_it_and_decoded() {
        let client = PlugClient::new(&WallMeter {
            url: "http://admin:p%40ss:word@192.0.2.7:8080/".into(),
            ..WallMeter::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(client.origin(), "http://192.0.2.7:8080");
        let password = client.password.as_ref();
        assert_eq!(
            password.and_then(|p| p.for_address("http://192.0.2.7:8080/status")),
            Some("p@ss:word")
        );
        assert_eq!(
            password.and_then(|p| p.for_address("http://192.0.2.8:8080/status")),
            None
        );
        assert_eq!(client.user, "admin");
        assert!(!format!("{client:?}").contains("p@ss"));
        let meter = WallMeter {
            url: "http://admin:hunter2@plug".into(),
            password: Bound::new("http://plug", "hunter2".into()),
            token: Bound::new("http://plug", "tok-secret".into()),
            kind: None,
            channels: Vec::new(),
            tls_pin: None,
        };
        let shown = format!("{meter:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok-secret"),
            "{shown}"
        );
        assert_eq!(
            without_credentials("http://admin:secret@host/x"),
            "http://host/x"
        );
    }

    #[test]
    fn http_and_https_addresses_are_taken_and_a_refusal_hides_the_password() {
        let https = PlugClient::new(&WallMeter {
            url: "https://ha.local:8123/api/states/sensor.plug_power".into(),
            token: Bound::new("https://ha.local:8123", "tok".into()),
            ..WallMeter::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(https.origin(), "https://ha.local:8123");
        let refused = PlugClient::new(&WallMeter {
            url: "ftp://admin:secret@host".into(),
            ..WallMeter::default()
        });
        let message = refused.map(|_| ()).err().map(|e| e.to_string());
        assert!(
            message
                .as_deref()
                .is_some_and(|m| m.contains("https://") && !m.contains("secret")),
            "{message:?}"
        );
    }
}
