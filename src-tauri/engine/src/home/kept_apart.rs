//! The secrets the preferences keep apart, beside the preferences file: the wall meter's
//! password and token, the MQTT broker's password, the model servers' tokens, the price and
//! carbon feeds' tokens and the OTLP collector's headers. The
//! preferences (which readers of the API see) never hold them; each file is readable by its
//! user alone (0600), written whole or not at all, removed when there is nothing to keep, and
//! never logged. A file that cannot be read costs its secrets alone, said without their value.
//! Each secret is kept with the address it was given for (its origin, [`wattbar_core::secret`]),
//! and filled in only while the preference names that address: a preferences file edited by
//! hand to point elsewhere sends nothing there. A secret written into the preferences file by
//! hand is taken, and moved apart when the engine starts.

use crate::error::Error;
use crate::home::paths::write_whole;
use std::collections::BTreeMap;
use std::path::Path;
use wattbar_core::secret::Bound;
use wattbar_core::Preferences;

/// Fills `prefs`, just read from the preferences file at `path`, with the secrets kept apart,
/// each only where it was kept for the address the preference now names. A secret written into
/// the preferences file by hand is kept (never dropped); the engine moves it apart when it
/// starts ([`save`]).
pub(super) fn fill(path: &Path, prefs: &mut Preferences) {
    if let Some(meter) = prefs.wall_meter.as_mut() {
        let secrets: Secrets =
            read_or_say(&secrets_path(path), "the wall meter's password and token");
        let here = secrets.kept_for(&meter.url);
        meter.password = meter.password.take().or(here.password);
        meter.token = meter.token.take().or(here.token);
        meter.has_secret = meter.password.is_some() || meter.token.is_some();
    }
    if let Some(mqtt) = prefs.mqtt.as_mut() {
        let kept = mqtt_password_for(&mqtt_password_path(path), &mqtt.url);
        mqtt.password = mqtt.password.take().or(kept);
        mqtt.has_secret = mqtt.password.is_some();
    }
    if prefs.price_feed.is_some() || prefs.carbon_feed.is_some() {
        let tokens: BTreeMap<String, FeedToken> =
            read_or_say(&feed_tokens_path(path), "the feeds' tokens");
        for (key, feed) in [
            ("price_feed", prefs.price_feed.as_mut()),
            ("carbon_feed", prefs.carbon_feed.as_mut()),
        ] {
            if let Some(feed) = feed {
                let kept = tokens.get(key).and_then(|t| t.kept_for(feed));
                feed.token = feed.token.take().or(kept);
                feed.has_secret = feed.token.is_some();
            }
        }
    }
    if let Some(otlp) = prefs.otlp.as_mut() {
        let kept: Option<Bound> = read_or_say(&otlp_headers_path(path), "the OTLP headers");
        let here = kept.and_then(|b| {
            let headers = b.for_address(&otlp.endpoint).map(str::to_string);
            if headers.is_none() {
                tracing::warn!(
                    "the OTLP headers were kept for {}, not the endpoint named now: they are \
                     not sent, and the preferences ask for them",
                    b.origin()
                );
            }
            headers
        });
        otlp.headers = otlp.headers.take().or(here);
        otlp.has_secret = otlp.headers.is_some();
    }
    if !prefs.server_metrics.is_empty() {
        let tokens: BTreeMap<String, String> =
            read_or_say(&server_tokens_path(path), "the model servers' tokens");
        for server in &mut prefs.server_metrics {
            server.token = server
                .token
                .take()
                .or_else(|| tokens.get(&server.url).cloned());
            server.has_secret = server.token.is_some();
        }
    }
}

/// The secrets of the JSON file at `path`; where it cannot be read, none, said without their
/// value (`what` names them).
fn read_or_say<T: serde::de::DeserializeOwned + Default>(path: &Path, what: &str) -> T {
    read_secret_json(path).unwrap_or_else(|e| {
        let why = match e {
            Error::Io { source, .. } => source.kind().to_string(),
            _ => "not the JSON Wattbar writes".to_string(),
        };
        tracing::warn!("{what} could not be read ({why}); asking without them");
        T::default()
    })
}

/// Keeps the secrets of preference `key`, as `prefs` has them, beside the file at `path`.
pub(super) fn save(path: &Path, prefs: &Preferences, key: &str) -> Result<(), Error> {
    match key {
        "wall_meter" => write_secrets(&secrets_path(path), prefs),
        "mqtt" => write_mqtt_password(&mqtt_password_path(path), prefs),
        "server_metrics" => write_server_tokens(&server_tokens_path(path), prefs),
        "price_feed" | "carbon_feed" => write_feed_tokens(&feed_tokens_path(path), prefs),
        "otlp" => {
            let bound = prefs
                .otlp
                .as_ref()
                .and_then(|o| Bound::new(&o.endpoint, o.headers.clone()?));
            write_secret_json(&otlp_headers_path(path), bound.as_ref())
        }
        _ => Ok(()),
    }
}

/// Where the OTLP collector's headers are kept, with the origin they may go to: beside the
/// preferences file.
pub fn otlp_headers_path(preferences: &Path) -> std::path::PathBuf {
    preferences.with_file_name("otlp-headers.secret.json")
}

/// Where the model servers' tokens are kept, by URL: beside the preferences file.
pub fn server_tokens_path(preferences: &Path) -> std::path::PathBuf {
    preferences.with_file_name("server-metrics.secret.json")
}

/// Keeps the model servers' tokens (0600, written whole or not at all), or removes the file
/// when there are none.
fn write_server_tokens(path: &Path, prefs: &Preferences) -> Result<(), Error> {
    let tokens: BTreeMap<&str, &str> = prefs
        .server_metrics
        .iter()
        .filter_map(|s| Some((s.url.as_str(), s.token.as_deref()?)))
        .collect();
    write_secret_json(path, (!tokens.is_empty()).then_some(&tokens))
}

/// Where the price and carbon feeds' tokens are kept, by preference: beside the preferences
/// file.
pub fn feed_tokens_path(preferences: &Path) -> std::path::PathBuf {
    preferences.with_file_name("feeds.secret.json")
}

/// A feed's token as kept: with the address it was kept for (the preference's `url`, `None` for
/// the vendor's own). A bare string is a file from before addresses were kept with tokens.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum FeedToken {
    Bound { token: String, url: Option<String> },
    Unbound(String),
}

impl FeedToken {
    /// The token, where `feed` still names the address it was kept for.
    fn kept_for(&self, feed: &wattbar_core::prefs::FeedPref) -> Option<String> {
        match self {
            FeedToken::Unbound(token) => Some(token.clone()),
            FeedToken::Bound { token, url } => {
                let same = match (url, &feed.url) {
                    (None, None) => true,
                    (Some(a), Some(b)) => wattbar_core::secret::same_origin(a, b),
                    _ => false,
                };
                if !same {
                    tracing::warn!(
                        "a feed's token was kept for another address: it is not sent, and the \
                         preferences ask for one"
                    );
                }
                same.then(|| token.clone())
            }
        }
    }
}

/// Keeps the feeds' tokens with their addresses (0600, written whole or not at all), or removes
/// the file when there are none.
fn write_feed_tokens(path: &Path, prefs: &Preferences) -> Result<(), Error> {
    let tokens: BTreeMap<&str, FeedToken> = [
        ("price_feed", prefs.price_feed.as_ref()),
        ("carbon_feed", prefs.carbon_feed.as_ref()),
    ]
    .into_iter()
    .filter_map(|(k, f)| {
        let f = f?;
        Some((
            k,
            FeedToken::Bound {
                token: f.token.clone()?,
                url: f.url.clone(),
            },
        ))
    })
    .collect();
    write_secret_json(path, (!tokens.is_empty()).then_some(&tokens))
}

/// A secrets file of JSON: its contents, or the default where there is none.
fn read_secret_json<T: serde::de::DeserializeOwned + Default>(path: &Path) -> Result<T, Error> {
    match crate::home::paths::read_at_most(path, crate::home::paths::MAX_KEPT_FILE_BYTES) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `secrets` as JSON (0600, whole or not at all), or removes the file for `None`.
fn write_secret_json<T: serde::Serialize>(path: &Path, secrets: Option<&T>) -> Result<(), Error> {
    let io = |source: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let Some(secrets) = secrets else {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        };
    };
    let text = serde_json::to_string(secrets).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    write_whole(path, &text).map_err(io)
}

/// Where the MQTT broker's password is kept: beside the preferences file, the file
/// `wattbar-cli serve --mqtt` reads by default.
pub fn mqtt_password_path(preferences: &Path) -> std::path::PathBuf {
    preferences.with_file_name(crate::home::secrets::MQTT_PASSWORD_FILE)
}

/// The broker's password kept in `file` (`mqtt-password`), for the broker at `url`: `None`
/// where none is kept, or where it was kept for another broker (said, without its value). A
/// file with no origin beside it was written by hand, for whatever broker is named.
pub fn mqtt_password_for(file: &Path, url: &str) -> Option<String> {
    let kept = match crate::home::secrets::read_secret_file(file) {
        Ok(p) => p,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return None
        }
        Err(e) => {
            tracing::warn!("the MQTT broker's password could not be read: {e}");
            return None;
        }
    };
    let kept_for = std::fs::read_to_string(mqtt_origin_path(file)).ok();
    let here = wattbar_core::secret::Origin::of(url);
    match kept_for.as_deref().map(str::trim) {
        Some(o) if here.as_ref().map(|h| h.as_str()) != Some(o) => {
            tracing::warn!(
                "the MQTT broker's password was kept for {o}, not the broker named now: it is \
                 not sent, and the preferences ask for it"
            );
            None
        }
        _ => Some(kept),
    }
}

/// Where the origin of the broker the password was kept for is written: beside the password
/// file, which stays the one line `serve --mqtt-password-file` reads.
fn mqtt_origin_path(password_file: &Path) -> std::path::PathBuf {
    password_file.with_file_name("mqtt-password.origin")
}

/// Keeps the broker's password (0600, written whole or not at all) and the origin it is for, or
/// removes both when there is none.
fn write_mqtt_password(path: &Path, prefs: &Preferences) -> Result<(), Error> {
    let origin_path = mqtt_origin_path(path);
    let remove = |p: &Path| match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
            path: p.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    };
    let mqtt = prefs.mqtt.as_ref();
    match mqtt.and_then(|m| Some((m.password.as_ref()?, m.url.as_str()))) {
        Some((password, url)) => {
            write_whole(path, &format!("{password}\n")).map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
            match wattbar_core::secret::Origin::of(url) {
                Some(o) => {
                    write_whole(&origin_path, &format!("{o}\n")).map_err(|source| Error::Io {
                        path: origin_path.clone(),
                        source,
                    })
                }
                None => remove(&origin_path),
            }
        }
        None => {
            remove(path)?;
            remove(&origin_path)
        }
    }
}

/// The wall meter's password and token, kept apart from the preferences (which readers of the
/// API see): readable by this user alone, never logged.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Secrets {
    password: Option<String>,
    token: Option<String>,
    /// The origin of the address they were kept for; `None` in a file from before origins
    /// were kept.
    #[serde(default)]
    origin: Option<wattbar_core::secret::Origin>,
}

impl Secrets {
    /// These secrets, where they were kept for `url`'s origin; none otherwise.
    fn kept_for(self, url: &str) -> Secrets {
        match &self.origin {
            Some(o) if Some(o) != wattbar_core::secret::Origin::of(url).as_ref() => {
                tracing::warn!(
                    "the wall meter's secrets were kept for {o}, not its address now: they are \
                     not sent, and the preferences ask for them"
                );
                Secrets::default()
            }
            _ => self,
        }
    }
}

/// Where the wall meter's secrets are kept: beside the preferences file.
pub fn secrets_path(preferences: &Path) -> std::path::PathBuf {
    preferences.with_file_name("wall-meter.secret.json")
}

/// Keeps the wall meter's secrets (0600, written whole or not at all), or removes the file
/// when there are none.
fn write_secrets(path: &Path, prefs: &Preferences) -> Result<(), Error> {
    let secrets = prefs
        .wall_meter
        .as_ref()
        .map_or(Secrets::default(), |m| Secrets {
            password: m.password.clone(),
            token: m.token.clone(),
            origin: wattbar_core::secret::Origin::of(&m.url),
        });
    let any = secrets.password.is_some() || secrets.token.is_some();
    write_secret_json(path, any.then_some(&secrets))
}
