//! Where a secret may go: a password or token is bound to the origin (scheme, host, port) of the
//! address it was given for, and follows no other.
//!
//! Rules:
//! - An origin is the scheme, the host (lower case) and the port, the scheme's own where none is
//!   written (`http` 80, `https` 443, `mqtt` 1883, `mqtts` 8883, `kasa` 9999). A path, a query
//!   and a user name are not part of it. An address with no host has no origin, and no secret.
//! - A preference changed without its secret keeps the one set before only where the new
//!   address has the same origin ([`carried`]): a changed host, port or scheme drops it, and the
//!   preference then says a secret is needed (`has_secret: false`). This is the one carry-over
//!   rule of every preference that holds a secret (wall meter, MQTT, feeds, model servers).
//! - A secret kept apart from the preferences is kept with its origin ([`Bound`]), and is given
//!   back only for an address of that origin ([`Bound::for_address`]).

use serde::{Deserialize, Serialize};

/// Scheme, host and port: what a secret is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin(String);

impl Origin {
    /// The origin of `address`; `None` where it names no host.
    pub fn of(address: &str) -> Option<Origin> {
        let url = url::Url::parse(address.trim()).ok()?;
        let scheme = url.scheme().to_ascii_lowercase();
        let host = url.host_str()?.to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        let port = url.port().or(match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            "mqtt" => Some(1883),
            "mqtts" => Some(8883),
            "kasa" => Some(9999),
            _ => None,
        })?;
        Some(Origin(format!("{scheme}://{host}:{port}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether two addresses share one origin (neither without one).
pub fn same_origin(a: &str, b: &str) -> bool {
    matches!((Origin::of(a), Origin::of(b)), (Some(x), Some(y)) if x == y)
}

/// The secret set before for `before` (its address), kept for a preference now at `now` only
/// where both have one origin.
pub fn carried(before: Option<(&str, Option<&String>)>, now: &str) -> Option<String> {
    let (address, secret) = before?;
    secret.filter(|_| same_origin(address, now)).cloned()
}

/// A secret with the origin it may go to. Its value is given only for an address of that
/// origin, and it never prints.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bound {
    origin: Origin,
    secret: String,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("origin", &self.origin)
            .field("secret", &"…")
            .finish()
    }
}

impl Bound {
    /// `secret` bound to `address`'s origin; `None` where it has none.
    pub fn new(address: &str, secret: String) -> Option<Bound> {
        Some(Bound {
            origin: Origin::of(address)?,
            secret,
        })
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The secret, for a request to `address`; `None` for any other origin.
    pub fn for_address(&self, address: &str) -> Option<&str> {
        (Origin::of(address).as_ref() == Some(&self.origin)).then_some(self.secret.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_scheme_host_and_port_with_the_schemes_own_port() {
        let o = |a: &str| Origin::of(a).map(|o| o.0);
        assert_eq!(
            o("http://HA.local:8123/api/states/x?y=1").as_deref(),
            Some("http://ha.local:8123")
        );
        assert_eq!(
            o("https://ha.local/").as_deref(),
            Some("https://ha.local:443")
        );
        assert_eq!(
            o("mqtt://user@broker").as_deref(),
            Some("mqtt://broker:1883")
        );
        assert_eq!(o("mqtts://broker").as_deref(), Some("mqtts://broker:8883"));
        assert_eq!(o("http://[::1]:9/").as_deref(), Some("http://[::1]:9"));
        assert_eq!(o("not an address"), None);
        assert!(same_origin("http://ha:8123/a", "http://ha:8123/b?c"));
        assert!(same_origin("http://ha/", "http://ha:80"));
    }

    #[test]
    fn a_secret_follows_no_change_of_host_port_or_scheme() {
        let token = "hunter2".to_string();
        let before = Some(("http://ha.local:8123", Some(&token)));
        assert_eq!(
            carried(before, "http://ha.local:8123/api").as_deref(),
            Some("hunter2")
        );
        for elsewhere in [
            "http://evil.example:8123",
            "http://ha.local:8124",
            "https://ha.local:8123",
            "garbage",
        ] {
            assert_eq!(carried(before, elsewhere), None, "{elsewhere}");
        }
        let bound = Bound::new("https://api.tibber.com/v1-beta/gql", token.clone())
            .unwrap_or_else(|| panic!("an origin"));
        assert_eq!(
            bound.for_address("https://api.tibber.com/other"),
            Some("hunter2")
        );
        assert_eq!(bound.for_address("http://api.tibber.com/v1-beta/gql"), None);
        assert!(!format!("{bound:?}").contains("hunter2"));
    }
}
