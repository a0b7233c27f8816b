//! The one client of Wattbar's local API, for the CLI, the windows and the tests.
//!
//! Rules:
//! - The engine is found through its data folder: the lock file names its API address and the
//!   token file holds the token that writes carry. Nothing is guessed.
//! - Every call has a connect timeout ([`CONNECT_TIMEOUT`]) and an overall limit
//!   ([`CALL_TIMEOUT`], longer than the API's own 10 s for a write the engine is slow to take);
//!   only an event stream runs without an overall limit.
//! - Answers read whole are at most [`MAX_BODY_BYTES`]; one event of a stream at most
//!   [`MAX_EVENT_BYTES`] (a longer one ends the stream with [`Error::BadAnswer`]).
//! - A refusal carries the engine's own `{"error", "field"}` answer; no answer at all is
//!   [`Error::Unreachable`]: callers tell "refused" from "not there".
//! - Calls block; async callers run them on a blocking pool.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wattbar_engine::home::lock::{EngineLock, Holder};

/// How long a connection may take to open: the API is on this machine.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a whole call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(12);
/// Answers read whole are at most this large (a report's SVG is the largest).
const MAX_BODY_BYTES: u64 = 64 << 20;
/// One event of `/v1/stream` is at most this large (a published state is tens of KiB).
const MAX_EVENT_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No engine records into the data folder.
    #[error("Wattbar is not running for {}: start `wattbar` or `wattbar-cli serve`", .0.display())]
    NotRunning(PathBuf),
    /// An engine records there but serves no API (`wattbar-cli watch`).
    #[error(
        "the Wattbar engine{} recording into {} serves no API (wattbar-cli watch?): stop it, or \
         use the tray app or `wattbar-cli serve`",
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        .dir.display()
    )]
    NoApi { pid: Option<u32>, dir: PathBuf },
    /// The engine answered and refused: its message, and the field for a preference.
    #[error("{url}: {status} {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
        field: Option<String>,
        /// When to ask again, where the engine said (`Retry-After`, a busy stream).
        retry_after: Option<Duration>,
    },
    /// No answer: the engine has gone, never was, or did not answer in time.
    #[error("Wattbar's engine at {url} did not answer: {why}")]
    Unreachable { url: String, why: String },
    /// An answer that is not what was asked for.
    #[error("{url}: not the answer expected: {why}")]
    BadAnswer { url: String, why: String },
    /// The data folder's token could not be read or made.
    #[error(transparent)]
    Token(#[from] wattbar_engine::Error),
}

impl Error {
    /// The refused call's HTTP status.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The running engine's API.
#[derive(Clone)]
pub struct Client {
    base: String,
    /// Where its token is; `None`: writes carry `token` or nothing.
    dir: Option<PathBuf>,
    token: Option<String>,
    agent: ureq::Agent,
    timeout: Duration,
    /// The engine's process, where its lock file names it.
    pid: Option<u32>,
}

/// The published states of an event stream, each as the engine wrote it (JSON), in order.
pub struct Stream {
    url: String,
    reader: BufReader<ureq::BodyReader<'static>>,
    /// An event was refused: the stream is over.
    ended: bool,
}

impl Client {
    /// The engine recording into `dir`, if one runs; `Err` for one without an API.
    pub fn running(dir: &Path) -> Result<Option<Client>, Error> {
        match EngineLock::holder(dir) {
            None => Ok(None),
            Some(Holder {
                api: Some(api),
                pid,
            }) => {
                let mut client = Client::at(&api).with_dir(dir);
                client.pid = pid;
                Ok(Some(client))
            }
            Some(Holder { pid, .. }) => Err(Error::NoApi {
                pid,
                dir: dir.to_path_buf(),
            }),
        }
    }

    /// The engine recording into `dir`, waiting up to `wait` for one that is starting (a login
    /// item, a first launch) to name its API.
    pub fn find(dir: &Path, wait: Duration) -> Result<Client, Error> {
        let started = Instant::now();
        loop {
            let found = Client::running(dir);
            let waited = started.elapsed() >= wait;
            match found {
                Ok(Some(client)) => return Ok(client),
                Ok(None) if waited => return Err(Error::NotRunning(dir.to_path_buf())),
                Err(e) if waited => return Err(e),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The API at `api`: `host:port`, or a URL such as `http://127.0.0.1:11436`.
    pub fn at(api: &str) -> Client {
        let base = if api.contains("://") {
            api.trim_end_matches('/').to_string()
        } else {
            format!("http://{api}")
        };
        // The API is on this machine: an HTTP_PROXY in the environment must not reroute it.
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .proxy(None)
            .http_status_as_error(false)
            .build()
            .into();
        Client {
            base,
            dir: None,
            token: None,
            agent,
            timeout: CALL_TIMEOUT,
            pid: None,
        }
    }

    /// Writes carry the token kept in `dir` (made there if there is none yet).
    pub fn with_dir(mut self, dir: &Path) -> Client {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// Writes carry `token`.
    pub fn with_token(mut self, token: &str) -> Client {
        self.token = Some(token.to_string());
        self
    }

    /// Each call ends after `timeout` (tests of an engine that never answers).
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// `http://host:port`, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// ` (pid N)` where the engine's lock file names its process, else nothing: for messages.
    pub fn pid_text(&self) -> String {
        self.pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    }

    fn token(&self) -> Result<Option<String>, Error> {
        match (&self.token, &self.dir) {
            (Some(t), _) => Ok(Some(t.clone())),
            (None, Some(dir)) => Ok(Some(wattbar_engine::home::secrets::load_or_create(dir)?)),
            (None, None) => Ok(None),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path` as JSON.
    pub fn get(&self, path: &str) -> Result<Value, Error> {
        self.get_as(path)
    }

    /// `GET path`, read as `T`.
    pub fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        let text = self.get_text(path)?;
        serde_json::from_str(&text).map_err(|e| bad(&self.url(path), e))
    }

    /// `GET path` as text (a report's SVG, `/metrics`).
    pub fn get_text(&self, path: &str) -> Result<String, Error> {
        let url = self.url(path);
        let reply = self
            .agent
            .get(&url)
            .config()
            .timeout_global(Some(self.timeout))
            .build()
            .call();
        let mut reply = self.checked(&url, reply)?;
        reply
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(|e| bad(&url, e))
    }

    /// `PUT path` with `body`, carrying the token; the answer as JSON.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, Error> {
        self.write("PUT", path, Some(body))
    }

    /// `POST path` with `body` (or none), carrying the token; the answer as JSON.
    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        self.write("POST", path, body)
    }

    /// `DELETE path`, carrying the token; the answer as JSON.
    pub fn delete(&self, path: &str) -> Result<Value, Error> {
        let url = self.url(path);
        let request = self.authorized(self.agent.delete(&url))?;
        self.json_answer(&url, request.call())
    }

    /// `method` (`PUT` or `POST`) with the token; the answer as JSON.
    pub fn write(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        let url = self.url(path);
        let request = self.authorized(match method {
            "PUT" => self.agent.put(&url),
            _ => self.agent.post(&url),
        })?;
        let reply = match body {
            Some(b) => request.send_json(b),
            None => request.send_empty(),
        };
        self.json_answer(&url, reply)
    }

    /// `request` with the client's timeout and, where there is one, the token.
    fn authorized<B>(
        &self,
        request: ureq::RequestBuilder<B>,
    ) -> Result<ureq::RequestBuilder<B>, Error> {
        let request = request.config().timeout_global(Some(self.timeout)).build();
        Ok(match self.token()? {
            Some(token) => request.header("Authorization", format!("Bearer {token}")),
            None => request,
        })
    }

    /// A write's answer, checked, as JSON of at most [`MAX_BODY_BYTES`].
    fn json_answer(
        &self,
        url: &str,
        reply: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Value, Error> {
        let mut reply = self.checked(url, reply)?;
        reply
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_json()
            .map_err(|e| bad(url, e))
    }

    /// Follows `/v1/stream`. The token, where there is one, claims a slot kept for the app's
    /// own windows; an engine whose slots are all taken answers [`Error::Refused`] with 503 and
    /// `retry_after`.
    pub fn stream(&self) -> Result<Stream, Error> {
        let url = self.url("/v1/stream");
        let mut request = self.agent.get(&url);
        if let Some(token) = self.token()? {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let reply = self.checked(&url, request.call())?;
        Ok(Stream {
            url,
            reader: BufReader::new(reply.into_body().into_reader()),
            ended: false,
        })
    }

    /// The answer, or why there is none: a status of 400 or more is the engine's refusal.
    fn checked(
        &self,
        url: &str,
        reply: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, Error> {
        let mut reply = reply.map_err(|e| Error::Unreachable {
            url: url.to_string(),
            why: e.to_string(),
        })?;
        let status = reply.status().as_u16();
        if status < 400 {
            return Ok(reply);
        }
        let retry_after = reply
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = reply
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
            .unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = json["error"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| text.trim().to_string());
        Err(Error::Refused {
            url: url.to_string(),
            status,
            message,
            field: json["field"].as_str().map(str::to_string),
            retry_after,
        })
    }
}

fn bad(url: &str, e: impl std::fmt::Display) -> Error {
    Error::BadAnswer {
        url: url.to_string(),
        why: e.to_string(),
    }
}

impl Iterator for Stream {
    type Item = Result<String, Error>;

    /// The next state's JSON; `None` once the engine closed the stream.
    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        let mut data = String::new();
        let mut line = Vec::new();
        // Within the rest of a line longer than an event may be, that is not data: dropped.
        let mut skipping = false;
        loop {
            line.clear();
            // Room for the rest of the event, its `data:` and its line end: never more is read.
            let room = MAX_EVENT_BYTES.saturating_sub(data.len()) + 8;
            let room = u64::try_from(room).unwrap_or(u64::MAX);
            match (&mut self.reader).take(room).read_until(b'\n', &mut line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.ended = true;
                    return Some(Err(Error::Unreachable {
                        url: self.url.clone(),
                        why: format!("the stream broke: {e}"),
                    }));
                }
            }
            let cut = !line.ends_with(b"\n") && line.len() as u64 == room;
            if skipping {
                skipping = cut;
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if let Some(d) = text.strip_prefix("data:") {
                if cut || data.len() + d.len() > MAX_EVENT_BYTES {
                    self.ended = true;
                    return Some(Err(bad(
                        &self.url,
                        format!("an event over {} MiB", MAX_EVENT_BYTES >> 20),
                    )));
                }
                data.push_str(d.trim_start());
            } else if cut {
                skipping = true;
                continue;
            }
            if text.is_empty() && !data.is_empty() {
                return Some(Ok(data));
            }
        }
    }
}

#[cfg(test)]
mod tests;
