//! Asking a model server for its `/metrics`: one GET under the outbound policy
//! ([`wattbar_outbound::SERVER_METRICS`]: its timeout, the answer capped, no redirect), and the
//! text to [`parse_server_metrics`](super::parse_server_metrics).
//!
//! Rules:
//! - Each scrape opens a fresh connection: pooled keep-alive scrapes of vLLM were seen to slow
//!   from milliseconds to seconds, fresh ones stayed at 7–10 ms (`shared/notes`).
//! - A token (vLLM's and SGLang's `--api-key`) is bound to the origin it was kept for
//!   ([`Bound`]) and goes as `Authorization: Bearer` only to that origin, never into a message;
//!   an address holding a password is refused.
//! - A server that cannot be reached is [`Error::Transient`]; one that answers an error, or an
//!   exposition of no known family, [`Error::Unavailable`] with the reason.

use super::{parse_server_metrics, ServerMetrics};
use crate::error::Error;
use wattbar_core::secret::Bound;
use wattbar_outbound::SERVER_METRICS;

/// One model server's `/metrics`, asked again at each [`MetricsClient::scrape`].
pub struct MetricsClient {
    agent: ureq::Agent,
    url: String,
    shown: String,
    token: Option<Bound>,
    loopback_port: Option<u16>,
}

impl std::fmt::Debug for MetricsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsClient")
            .field("url", &self.shown)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// The address asked: `url` as given, or the server's `/metrics` where it names no path (before
/// its query, where it has one).
fn metrics_url(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    let (address, query) = url.split_at(cut);
    let address = address.trim_end_matches('/');
    let has_path = address
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        format!("{address}{query}")
    } else {
        format!("{address}/metrics{query}")
    }
}

impl MetricsClient {
    /// `url`: the server (`http://127.0.0.1:8000`, to which `/metrics` is added) or its metrics
    /// URL; `token` is sent only where it was kept for this server's origin.
    pub fn new(url: &str, token: Option<Bound>) -> Result<MetricsClient, Error> {
        let address = wattbar_outbound::address(url, "the model server", Some("a token file"))
            .map_err(|e| Error::Unavailable(e.to_string()))?;
        let config = wattbar_outbound::config(&SERVER_METRICS, address.https)
            .map_err(|e| Error::Unavailable(format!("{}: {e}", address.url)))?
            .http_status_as_error(false)
            .max_idle_connections_per_host(0)
            .build();
        let url = metrics_url(&address.url);
        Ok(MetricsClient {
            agent: crate::resolver::agent(config),
            shown: wattbar_outbound::shown(&url),
            url,
            token,
            loopback_port: address.loopback_port(),
        })
    }

    /// The server's port where it runs on this machine.
    pub fn loopback_port(&self) -> Option<u16> {
        self.loopback_port
    }

    /// Where the metrics are read, as messages, labels and records show it: without its query,
    /// which may hold a key.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The server's counters now.
    pub fn scrape(&self) -> Result<ServerMetrics, Error> {
        let mut request = self.agent.get(&self.url);
        if let Some(token) = self.token.as_ref().and_then(|t| t.for_address(&self.url)) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut answer = request.call().map_err(|e| {
            Error::Transient(format!("{}: {}", self.url, wattbar_outbound::reason(&e)))
        })?;
        let status = answer.status();
        if !status.is_success() {
            return Err(Error::Unavailable(format!(
                "{} answered {status}{}",
                self.url,
                if status.as_u16() == 404 {
                    " (llama-server serves it with --metrics, SGLang with --enable-metrics)"
                } else {
                    ""
                }
            )));
        }
        let body = wattbar_outbound::read(answer.body_mut(), &SERVER_METRICS).map_err(|e| {
            Error::Transient(format!("{}: {}", self.url, wattbar_outbound::reason(&e)))
        })?;
        let text = String::from_utf8_lossy(&body);
        parse_server_metrics(&text).map_err(|e| Error::Unavailable(format!("{}: {e}", self.url)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_is_added_before_the_query_and_a_path_given_is_kept() {
        assert_eq!(
            metrics_url("http://127.0.0.1:8000/"),
            "http://127.0.0.1:8000/metrics"
        );
        assert_eq!(
            metrics_url("http://127.0.0.1:8000?api_key=k"),
            "http://127.0.0.1:8000/metrics?api_key=k"
        );
        assert_eq!(
            metrics_url("https://gpu.lan:8443/vllm/metrics?api_key=k"),
            "https://gpu.lan:8443/vllm/metrics?api_key=k"
        );
    }
}
