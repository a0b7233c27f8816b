//! The fleet view's one HTTP client: plain HTTP/1.1 with kept-alive connections, a timeout over
//! each whole call, and answers read up to a limit; and the one rule for the text hosts send.
//!
//! Rules:
//! - Every text a host or Prometheus sends (names, labels, reasons, an error's body) is shown
//!   only through [`printable`]: no control character (a terminal's escape sequences among
//!   them), at most [`MAX_SAID_CHARS`].
//! - An address is checked by the outbound policy ([`wattbar_outbound::address`]: no password
//!   in it) and named in messages as [`wattbar_outbound::shown`] writes it.

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// An answer larger than this is refused: a summary is under a kilobyte, a Prometheus answer
/// for a large fleet some hundreds.
const MAX_ANSWER_BYTES: usize = 8 << 20;

#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Empty<Bytes>>,
    timeout: Duration,
}

impl Http {
    pub fn new(timeout: Duration) -> Http {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Http { client, timeout }
    }

    /// `GET uri`: the body of a 2xx answer; else the status and what the server said.
    pub async fn get(&self, uri: &hyper::Uri) -> Result<Bytes> {
        let call = async {
            let request = hyper::Request::get(uri.clone())
                .header(hyper::header::ACCEPT, "application/json")
                .body(Empty::new())?;
            let answer = self
                .client
                .request(request)
                .await
                .map_err(|e| anyhow!(wattbar_serve::net::innermost_reason(&e)))?;
            let status = answer.status();
            let body = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| anyhow!("reading the answer: {e}"))?
                .to_bytes();
            if !status.is_success() {
                bail!(
                    "{status}: {}",
                    printable(String::from_utf8_lossy(&body).trim())
                );
            }
            Ok(body)
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(answer) => answer,
            Err(_) => bail!("no answer within {} s", self.timeout.as_secs_f64()),
        }
    }
}

/// The longest text taken from a host, in characters.
pub const MAX_SAID_CHARS: usize = 200;

/// `text` fit for a terminal: control characters (escape sequences among them) left out, and
/// cut at [`MAX_SAID_CHARS`].
pub fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_SAID_CHARS)
        .collect()
}
