//! Where the proxy forwards to: a checked `http://host:port` upstream, by default the one
//! `OLLAMA_HOST` names as Ollama reads it.

use hyper::header::HeaderValue;
use hyper::Uri;
use std::net::SocketAddr;

/// Where Ollama listens by default.
pub const DEFAULT_UPSTREAM: &str = "http://127.0.0.1:11434";

/// The upstream from `OLLAMA_HOST`'s value (`host`, `host:port`, `http://host:port`; Ollama's
/// own defaults: port 11434, and 0.0.0.0 means this machine), else [`DEFAULT_UPSTREAM`].
pub fn default_upstream(ollama_host: Option<&str>) -> String {
    let Some(raw) = ollama_host.map(str::trim).filter(|s| !s.is_empty()) else {
        return DEFAULT_UPSTREAM.to_string();
    };
    let rest = raw
        .strip_prefix("http://")
        .or_else(|| raw.strip_prefix("https://"))
        .unwrap_or(raw)
        .trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() && !h.ends_with(':') => (h, p),
        _ => (rest, "11434"),
    };
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        h => h,
    };
    format!("http://{host}:{port}")
}

/// A checked upstream: `http://host:port` (plain HTTP: model servers on this machine or LAN).
#[derive(Debug, Clone)]
pub struct Upstream {
    base: Uri,
    pub(super) authority: HeaderValue,
    shown: String,
}

impl Upstream {
    pub fn parse(text: &str) -> Result<Upstream, String> {
        let base: Uri = text
            .trim()
            .parse()
            .map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        if base.scheme_str() != Some("http") {
            return Err(format!(
                "{text:?}: the upstream must be an http:// URL (model servers speak plain HTTP)"
            ));
        }
        let authority = base
            .authority()
            .ok_or_else(|| format!("{text:?} has no host"))?;
        let shown = format!("http://{authority}");
        Ok(Upstream {
            authority: HeaderValue::from_str(authority.as_str())
                .map_err(|e| format!("{text:?}: {e}"))?,
            base,
            shown,
        })
    }

    /// The port it listens on, when it is on this machine (a loopback host).
    pub fn local_port(&self) -> Option<u16> {
        let host = self
            .base
            .host()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let local = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        local.then(|| self.base.port_u16().unwrap_or(80))
    }

    /// Refuses an upstream that is the proxy listening on `listen`: each request would come
    /// back to the proxy, and the proxy forward it again, until connections or memory ran out.
    pub async fn refuse_itself(&self, listen: SocketAddr) -> Result<(), String> {
        let port = self.base.port_u16().unwrap_or(80);
        if port != listen.port() {
            return Ok(());
        }
        let host = self.base.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let Ok(resolved) = tokio::net::lookup_host((host, port)).await else {
            return Ok(());
        };
        let mut resolved = resolved;
        let itself = resolved.any(|a| {
            a.ip() == listen.ip()
                || (listen.ip().is_unspecified()
                    && (a.ip().is_loopback() || a.ip().is_unspecified()))
        });
        if itself {
            return Err(format!(
                "the model server's address {self} is the proxy's own ({listen}): it would \
                 forward every request to itself. OLLAMA_HOST names the proxy here; give the \
                 model server's address with --llm-upstream (the preference llm_upstream)"
            ));
        }
        Ok(())
    }

    pub(super) fn uri(&self, path_and_query: &str) -> Result<Uri, hyper::http::Error> {
        let prefix = self.base.path().trim_end_matches('/');
        Uri::builder()
            .scheme("http")
            .authority(self.authority.as_bytes())
            .path_and_query(format!("{prefix}{path_and_query}"))
            .build()
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_upstream_has_a_local_port() {
        let port = |u: &str| Upstream::parse(u).map(|u| u.local_port()).ok().flatten();
        assert_eq!(port("http://127.0.0.1:11434"), Some(11434));
        assert_eq!(port("http://localhost:8080/v1"), Some(8080));
        assert_eq!(port("http://[::1]:9000"), Some(9000));
        assert_eq!(port("http://127.0.0.1"), Some(80));
        assert_eq!(port("http://gpu-box.lan:11434"), None);
        assert_eq!(port("http://10.0.0.5:11434"), None);
    }

    #[test]
    fn the_upstream_follows_ollama_host_as_ollama_reads_it() {
        assert_eq!(default_upstream(None), "http://127.0.0.1:11434");
        assert_eq!(default_upstream(Some("")), "http://127.0.0.1:11434");
        assert_eq!(default_upstream(Some("0.0.0.0")), "http://127.0.0.1:11434");
        assert_eq!(
            default_upstream(Some("0.0.0.0:8080")),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            default_upstream(Some("http://gpu-box.lan:11434/")),
            "http://gpu-box.lan:11434"
        );
        assert_eq!(default_upstream(Some("10.0.0.5")), "http://10.0.0.5:11434");
    }

    #[tokio::test]
    async fn an_upstream_that_is_the_proxy_itself_is_refused() {
        let refused = |u: &str, listen: &str| {
            let u = Upstream::parse(u).unwrap_or_else(|e| panic!("{e}"));
            let listen: SocketAddr = listen.parse().unwrap_or_else(|e| panic!("{e}"));
            async move { u.refuse_itself(listen).await.is_err() }
        };
        assert!(refused("http://127.0.0.1:11435", "127.0.0.1:11435").await);
        assert!(refused("http://localhost:11435", "127.0.0.1:11435").await);
        assert!(refused("http://127.0.0.1:11435", "0.0.0.0:11435").await);
        assert!(refused("http://[::1]:11435", "[::]:11435").await);
        assert!(!refused("http://127.0.0.1:11434", "127.0.0.1:11435").await);
        assert!(!refused("http://127.0.0.2:11435", "127.0.0.1:11435").await);
    }

    #[test]
    fn an_upstream_must_be_plain_http_with_a_host() {
        assert!(Upstream::parse("http://127.0.0.1:11434").is_ok());
        assert!(Upstream::parse("https://api.example.com").is_err());
        assert!(Upstream::parse("127.0.0.1:11434").is_err());
        let u = Upstream::parse("http://127.0.0.1:8080/base/").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            u.uri("/v1/chat/completions?x=1")
                .map(|u| u.to_string())
                .unwrap_or_default(),
            "http://127.0.0.1:8080/base/v1/chat/completions?x=1"
        );
    }
}
