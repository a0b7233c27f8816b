//! Name resolution for the sources that ask a device over HTTP every second or so (a plug,
//! Ollama): ureq's default resolver starts a thread for every lookup once a timeout is set,
//! even for an address that needs no lookup, and that thread was most of what asking a plug
//! once a second cost. Here an address is used as it is, and a name is looked up (with the
//! default resolver and its timeout) at most once a [`NAME_KEPT`], then reused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

/// How long a name's addresses are reused before it is looked up again.
pub const NAME_KEPT: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct KeptResolver {
    lookup: DefaultResolver,
    /// The last name looked up (`host:port`), when, and its addresses.
    kept: Mutex<Option<(String, Instant, ResolvedSocketAddrs)>>,
}

impl Resolver for KeptResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let Some(authority) = uri.authority() else {
            return self.lookup.resolve(uri, config, timeout);
        };
        let port = authority.port_u16().unwrap_or(80);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            let mut addrs = self.empty();
            addrs.push(SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        let key = format!("{host}:{port}");
        if let Ok(kept) = self.kept.lock() {
            if let Some((name, at, addrs)) = kept.as_ref() {
                if *name == key && at.elapsed() < NAME_KEPT {
                    return Ok(addrs.clone());
                }
            }
        }
        let addrs = self.lookup.resolve(uri, config, timeout)?;
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some((key, Instant::now(), addrs.clone()));
        }
        Ok(addrs)
    }
}

/// An agent with `config` that resolves through a [`KeptResolver`].
pub fn agent(config: Config) -> ureq::Agent {
    ureq::Agent::with_parts(config, DefaultConnector::new(), KeptResolver::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_used_as_it_is_and_a_name_is_kept() {
        let r = KeptResolver::default();
        let config = ureq::Agent::config_builder().build();
        let at = |uri: &str| {
            let uri: Uri = uri.parse().unwrap_or_else(|e| panic!("{e}"));
            r.resolve(&uri, &config, NextTimeout::default())
                .map(|a| a.iter().copied().collect::<Vec<_>>())
        };
        let v4 = at("http://192.0.2.7:8080/status").unwrap_or_default();
        assert_eq!(
            v4,
            ["192.0.2.7:8080"
                .parse::<SocketAddr>()
                .unwrap_or_else(|e| panic!("{e}"))]
        );
        let v6 = at("http://[::1]/rpc").unwrap_or_default();
        assert_eq!(
            v6,
            ["[::1]:80"
                .parse::<SocketAddr>()
                .unwrap_or_else(|e| panic!("{e}"))]
        );
        // A name: looked up once, then the same addresses from the keep.
        let first = at("http://localhost:9/").unwrap_or_default();
        assert!(!first.is_empty());
        assert!(r.kept.lock().map(|k| k.is_some()).unwrap_or(false));
        assert_eq!(at("http://localhost:9/").unwrap_or_default(), first);
    }
}
