//! The one policy for what Wattbar asks of other machines over HTTP: the update manifest, a Home
//! Assistant or a plug as the wall meter, an OTLP collector, MQTT's broker, a model server's
//! `/metrics`.
//!
//! Rules:
//! - TLS as a browser does it: the server's certificate must chain to a root the system trusts
//!   (`SSL_CERT_FILE` and `SSL_CERT_DIR` where set), for the name asked. On Linux, rustls with
//!   *ring*, linked in, and the system's roots read once ([`rustls_config`]); on macOS the
//!   system's own TLS.
//! - An https address stays https: a redirect to plain http is refused, and an `Authorization`
//!   header is never carried to another host.
//! - Each use has a whole-request timeout and a cap on what it reads ([`Use`]).
//! - No secret in an address: one with credentials (`user:password@`) is refused, since an
//!   address is shown by `ps`, in logs and in messages. Secrets come from files of their own.
//!   Messages name an address as [`shown`] writes it.

use std::time::Duration;

#[cfg(not(target_os = "macos"))]
mod checked_tls;

pub use wattbar_core::pin::Pin;

/// What one use of the network may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Use {
    /// What is asked, for messages: "the update manifest".
    pub what: &'static str,
    /// The whole request, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// The most of an answer that is read; more is refused.
    pub max_answer_bytes: u64,
    /// Redirects followed (an https address only ever to https).
    pub redirects: u32,
}

/// A signed manifest is a few hundred bytes; a release host may redirect to where it is kept.
pub const MANIFEST: Use = Use {
    what: "the update manifest",
    timeout: Duration::from_secs(10),
    max_answer_bytes: 64 * 1024,
    redirects: 5,
};

/// A wall meter: sampling never waits for it, and a slower answer is too old to be the draw now.
/// A device or a Home Assistant answers where it was asked.
pub const WALL_METER: Use = Use {
    what: "the wall meter",
    timeout: Duration::from_secs(2),
    max_answer_bytes: 1 << 20,
    redirects: 0,
};

/// An OTLP collector's answer to a push: a status and perhaps a partial-success message.
pub const OTLP: Use = Use {
    what: "the OTLP collector",
    timeout: Duration::from_secs(10),
    max_answer_bytes: 64 * 1024,
    redirects: 0,
};

/// A model server's `/metrics`, read once per window: a slow answer is said and the window
/// counted from the next one. vLLM's expositions, with their histograms, run to a few hundred KiB.
pub const SERVER_METRICS: Use = Use {
    what: "the model server's metrics",
    timeout: Duration::from_secs(2),
    max_answer_bytes: 4 << 20,
    redirects: 0,
};

/// A price or carbon feed, asked at most hourly: ENTSO-E's two days of 15-minute slots run to a
/// few hundred KiB; a vendor's API may redirect to where it is served.
pub const FEED: Use = Use {
    what: "the price or carbon feed",
    timeout: Duration::from_secs(20),
    max_answer_bytes: 8 << 20,
    redirects: 3,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address cannot be used as given: say why, and how to give it.
    #[error("{0}")]
    Address(String),
    /// The system's trusted roots could not be read: https cannot be checked.
    #[error("no trusted root certificates ({0}): https addresses will be refused")]
    NoRoots(String),
}

/// An address checked against the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// As given, trimmed.
    pub url: String,
    pub https: bool,
    /// `scheme://host[:port]`, for messages.
    pub origin: String,
}

impl Address {
    /// The port of an address on this machine (a loopback host), the scheme's default where it
    /// names none; `None` for any other host.
    pub fn loopback_port(&self) -> Option<u16> {
        let host_port = self.origin.split_once("://")?.1;
        let (host, port) = match host_port.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host, Some(port.parse::<u16>().ok()?)),
            _ => (host_port, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let local = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        local.then(|| port.unwrap_or(if self.https { 443 } else { 80 }))
    }
}

/// Checks `url` for `what`: http or https, a host, and no password in it (`secret_via` says
/// where one goes instead). A user name alone is no secret, and is kept.
pub fn address(url: &str, what: &str, secret_via: Option<&str>) -> Result<Address, Error> {
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        Error::Address(format!(
            "{what}'s address must start with http:// or https://: {}",
            shown(url)
        ))
    })?;
    let https = match scheme.to_ascii_lowercase().as_str() {
        "https" => true,
        "http" => false,
        _ => {
            return Err(Error::Address(format!(
                "{what}'s address must start with http:// or https://, not {scheme}://"
            )))
        }
    };
    let authority = authority(rest);
    let (userinfo, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    if userinfo.contains(':') {
        let instead = secret_via.map_or_else(
            || "an address without it".to_string(),
            |via| format!("{} and the password with {via}", shown(url)),
        );
        return Err(Error::Address(format!(
            "{what}'s address holds a password, which ps and logs would show: give {instead}"
        )));
    }
    if host.is_empty() {
        return Err(Error::Address(format!("{what}'s address names no host")));
    }
    Ok(Address {
        url: url.to_string(),
        https,
        origin: format!("{}://{host}", scheme.to_ascii_lowercase()),
    })
}

/// The authority of an address after its scheme: up to the first `/`, `?` or `#` after its
/// last `@` (a password may hold a `/`).
fn authority(rest: &str) -> &str {
    let after_at = rest.rfind('@').map_or(0, |i| i + 1);
    let end = rest[after_at..]
        .find(['/', '?', '#'])
        .map_or(rest.len(), |i| after_at + i);
    &rest[..end]
}

/// `url` fit to show: no credentials, no query (a token may ride there).
pub fn shown(url: &str) -> String {
    let is_scheme = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    };
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) if is_scheme(scheme) => (format!("{scheme}://"), rest),
        _ => (String::new(), url),
    };
    let authority = authority(rest);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let path = rest[authority.len()..]
        .split(['?', '#'])
        .next()
        .unwrap_or_default();
    format!("{scheme}{host}{path}")
}

/// An agent's configuration for `u` to an address that is `https` or not: the timeout, the
/// redirects (https only, for an https address), the system's TLS. Callers may set more. An
/// http address needs no roots: without them, only its redirects to https fail.
pub fn config(
    u: &Use,
    https: bool,
) -> Result<ureq::config::ConfigBuilder<ureq::typestate::AgentScope>, Error> {
    let builder = ureq::Agent::config_builder()
        .timeout_global(Some(u.timeout))
        .max_redirects(u.redirects)
        .https_only(https)
        .proxy(None);
    match tls() {
        Ok(tls) => Ok(builder.tls_config(tls)),
        Err(e) if https => Err(e),
        Err(e) => {
            tracing::debug!("{}: {e}", u.what);
            Ok(builder)
        }
    }
}

/// An agent for `u` to `address`.
pub fn agent(u: &Use, address: &Address) -> Result<ureq::Agent, Error> {
    Ok(config(u, address.https)?.build().into())
}

/// The answer's body, at most `u.max_answer_bytes` of it.
pub fn read(body: &mut ureq::Body, u: &Use) -> Result<Vec<u8>, ureq::Error> {
    body.with_config().limit(u.max_answer_bytes).read_to_vec()
}

/// Why a request failed, for a person: a TLS refusal says it is one.
pub fn reason(e: &ureq::Error) -> String {
    match e {
        ureq::Error::RequireHttpsOnly(_) => {
            "it redirected to plain http, which is refused for an https address".to_string()
        }
        ureq::Error::Timeout(_) => "no answer in time".to_string(),
        other => shown(&other.to_string()),
    }
}

#[cfg(not(target_os = "macos"))]
fn tls() -> Result<ureq::tls::TlsConfig, Error> {
    let roots = roots()?;
    Ok(ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .root_certs(ureq::tls::RootCerts::Specific(roots))
        .build())
}

#[cfg(target_os = "macos")]
fn tls() -> Result<ureq::tls::TlsConfig, Error> {
    Ok(ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::NativeTls)
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .build())
}

/// The system's trusted roots (`SSL_CERT_FILE`, `SSL_CERT_DIR` where set), read once.
#[cfg(not(target_os = "macos"))]
fn roots() -> Result<std::sync::Arc<Vec<ureq::tls::Certificate<'static>>>, Error> {
    use std::sync::{Arc, OnceLock};
    static ROOTS: OnceLock<Result<Arc<Vec<ureq::tls::Certificate<'static>>>, String>> =
        OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let certs: Vec<ureq::tls::Certificate<'static>> = found
                .certs
                .iter()
                .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
                .collect();
            if certs.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_string(), |e| e.to_string());
                return Err(why);
            }
            Ok(Arc::new(certs))
        })
        .clone()
        .map_err(Error::NoRoots)
}

/// The system's roots as rustls keeps them.
#[cfg(not(target_os = "macos"))]
fn root_store() -> Result<rustls::RootCertStore, Error> {
    let mut store = rustls::RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(
        roots()?
            .iter()
            .map(|c| rustls::pki_types::CertificateDer::from(c.der().to_vec())),
    );
    if added == 0 {
        return Err(Error::NoRoots("none could be parsed".into()));
    }
    Ok(store)
}

/// An agent with `config` and `resolver` for an address that may pin its certificate
/// ([`Pin`]): https trusts the pinned certificate alone where there is one, else the system's
/// roots, and a refusal names the fingerprint it saw.
#[cfg(not(target_os = "macos"))]
pub fn agent_with(
    config: ureq::config::Config,
    resolver: impl ureq::unversioned::resolver::Resolver,
    pin: Option<Pin>,
) -> Result<ureq::Agent, Error> {
    use ureq::unversioned::transport::{Connector, TcpConnector};
    let tls = checked_tls::CheckedTls::new(pin)?;
    Ok(ureq::Agent::with_parts(
        config,
        TcpConnector::default().chain(tls),
        resolver,
    ))
}

/// [`agent_with`] on macOS, whose system TLS takes no pin: a pinned address is refused, saying
/// what to do instead.
#[cfg(target_os = "macos")]
pub fn agent_with(
    config: ureq::config::Config,
    resolver: impl ureq::unversioned::resolver::Resolver,
    pin: Option<Pin>,
) -> Result<ureq::Agent, Error> {
    if pin.is_some() {
        return Err(Error::Address(
            "a pinned certificate (tls_pin_sha256) is not supported on macOS: trust the \
             server's certificate in the Keychain (Keychain Access, Always Trust) instead"
                .into(),
        ));
    }
    Ok(ureq::Agent::with_parts(
        config,
        ureq::unversioned::transport::DefaultConnector::new(),
        resolver,
    ))
}

/// A rustls client configuration with the system's roots, for the clients that are not ureq's
/// (MQTT's, OTLP's).
#[cfg(not(target_os = "macos"))]
pub fn rustls_config() -> Result<std::sync::Arc<rustls::ClientConfig>, Error> {
    let store = root_store()?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::NoRoots(e.to_string()))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(std::sync::Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_port_of_an_address_is_its_own_or_its_schemes_and_none_off_this_machine() {
        let port = |url: &str| address(url, "a server", None).ok()?.loopback_port();
        assert_eq!(port("http://127.0.0.1:8080/metrics"), Some(8080));
        assert_eq!(port("http://localhost:30000"), Some(30000));
        assert_eq!(port("http://[::1]:8000/"), Some(8000));
        assert_eq!(port("http://[::1]"), Some(80));
        assert_eq!(port("https://127.0.0.2"), Some(443));
        assert_eq!(port("http://user@127.0.0.1:9000"), Some(9000));
        assert_eq!(port("http://192.168.1.5:8080"), None);
        assert_eq!(port("http://gpu-box:8000"), None);
        assert_eq!(port("http://127.0.0.1:99999"), None);
    }

    #[test]
    fn an_address_with_credentials_is_refused_and_never_repeated() {
        let e = address(
            "https://admin:hunter2@ha.local:8123/api/states/sensor.plug",
            "the wall meter",
            Some("--wall-meter-password-file"),
        );
        let said = e.map(|_| String::new()).unwrap_or_else(|e| e.to_string());
        assert!(said.contains("--wall-meter-password-file"), "{said}");
        assert!(
            !said.contains("hunter2") && !said.contains("admin"),
            "{said}"
        );
        assert!(
            said.contains("https://ha.local:8123/api/states/sensor.plug"),
            "{said}"
        );
    }

    #[test]
    fn an_address_is_http_or_https_with_a_host() {
        let a = address("https://ha.local:8123/api/states/x?y=1", "x", None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(a.https);
        assert_eq!(a.origin, "https://ha.local:8123");
        assert!(!address("HTTP://plug/", "x", None)
            .map(|a| a.https)
            .unwrap_or(true));
        // A user name alone (a Shelly's `admin`) is no secret.
        let user = address("http://admin@plug/", "x", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(user.origin, "http://plug");
        for bad in [
            "ftp://plug",
            "plug:80",
            "http:///path",
            "https://",
            "http://u:@plug",
        ] {
            assert!(address(bad, "x", None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_shown_address_has_no_credentials_and_no_query() {
        assert_eq!(
            shown("http://u:p%40ss/w@host:1/a/b?token=s3cret#f"),
            "http://host:1/a/b"
        );
        assert_eq!(shown("https://host"), "https://host");
        assert_eq!(shown("no scheme?token=x"), "no scheme");
        assert_eq!(shown("user:pw@host:1883"), "host:1883");
        // What comes before "://" is a scheme only when it could be one.
        assert!(!shown(":pw@://").contains("pw"));
    }
}
