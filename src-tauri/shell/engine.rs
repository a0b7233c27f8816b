//! The engine these windows show: the tray's (or `wattbar-cli serve`'s), reached through its
//! local API. The data folder's lock file names its address; writes carry the folder's token.
//!
//! Calls block (ureq), so commands run them on Tauri's blocking pool, never on the main thread.

use serde_json::Value;
use std::time::{Duration, Instant};
use wattbar_engine::lock::{EngineLock, Holder};

/// How long a window waits for a tray that is still starting (a login item, a first launch)
/// to name its API.
const FIND_TIMEOUT: Duration = Duration::from_secs(10);
/// A read or a write answers within the API's own limit (10 s) or not at all.
const CALL_TIMEOUT: Duration = Duration::from_secs(12);

/// What went wrong with a call.
#[derive(Debug)]
pub enum ApiError {
    /// The engine answered and refused: its message, and the field for a preference.
    Refused {
        message: String,
        field: Option<String>,
    },
    /// No answer: the engine has gone, or never was.
    Unreachable(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Refused { message, .. } => f.write_str(message),
            ApiError::Unreachable(why) => write!(f, "Wattbar's engine did not answer: {why}"),
        }
    }
}

/// The API's `{"error", "field"?}` answer to a refused call.
fn refused(code: u16, reply: ureq::Response) -> ApiError {
    let body: Value = reply.into_json().unwrap_or(Value::Null);
    ApiError::Refused {
        message: body["error"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {code}")),
        field: body["field"].as_str().map(str::to_string),
    }
}

/// The running engine's API.
#[derive(Clone)]
pub struct Engine {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Engine {
    /// The engine recording into this user's data folder, waiting up to [`FIND_TIMEOUT`] for
    /// one that is starting.
    pub fn find() -> Result<Engine, String> {
        let dir = wattbar_engine::paths::data_dir().map_err(|e| e.to_string())?;
        let started = Instant::now();
        let api = loop {
            match EngineLock::holder(&dir) {
                Some(Holder { api: Some(api), .. }) => break api,
                Some(holder) if started.elapsed() >= FIND_TIMEOUT => {
                    return Err(format!(
                        "the Wattbar engine{} in {} serves no API (wattbar-cli watch?): \
                         start the tray app or wattbar-cli serve instead",
                        holder
                            .pid
                            .map(|p| format!(" (pid {p})"))
                            .unwrap_or_default(),
                        dir.display()
                    ))
                }
                None if started.elapsed() >= FIND_TIMEOUT => {
                    return Err(format!(
                        "Wattbar is not running for {}: start `wattbar`",
                        dir.display()
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let token = wattbar_engine::token::load_or_create(&dir).map_err(|e| e.to_string())?;
        Ok(Engine {
            base: format!("http://{api}"),
            token,
            agent: ureq::AgentBuilder::new()
                .timeout_connect(Duration::from_secs(2))
                .build(),
        })
    }

    fn answer(&self, request: ureq::Request, body: Option<&Value>) -> Result<Value, ApiError> {
        let reply = match body {
            Some(b) => request.send_json(b),
            None => request.call(),
        };
        match reply {
            Ok(r) => r
                .into_json()
                .map_err(|e| ApiError::Unreachable(format!("an answer that is not JSON: {e}"))),
            Err(ureq::Error::Status(code, r)) => Err(refused(code, r)),
            Err(e) => Err(ApiError::Unreachable(e.to_string())),
        }
    }

    pub fn get(&self, path: &str) -> Result<Value, ApiError> {
        let request = self
            .agent
            .get(&format!("{}{path}", self.base))
            .timeout(CALL_TIMEOUT);
        self.answer(request, None)
    }

    /// `PUT` or `POST` with the token.
    pub fn write(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        let request = self
            .agent
            .request(method, &format!("{}{path}", self.base))
            .timeout(CALL_TIMEOUT)
            .set("Authorization", &format!("Bearer {}", self.token));
        self.answer(request, body)
    }

    /// A body as text (the report's SVG).
    pub fn get_text(&self, path: &str) -> Result<String, ApiError> {
        let request = self
            .agent
            .get(&format!("{}{path}", self.base))
            .timeout(CALL_TIMEOUT);
        match request.call() {
            Ok(r) => r
                .into_string()
                .map_err(|e| ApiError::Unreachable(e.to_string())),
            Err(ureq::Error::Status(code, r)) => Err(refused(code, r)),
            Err(e) => Err(ApiError::Unreachable(e.to_string())),
        }
    }

    /// Follows `/v1/stream`: calls `on_state` with each published state, as the engine wrote
    /// it, until the engine goes away (returns why). The token claims a slot kept for the app's
    /// windows; an engine whose slots are all taken is asked again when it says to.
    pub fn follow(&self, mut on_state: impl FnMut(Value)) -> String {
        use std::io::BufRead;
        let reply = loop {
            let asked = self
                .agent
                .get(&format!("{}/v1/stream", self.base))
                .set("Authorization", &format!("Bearer {}", self.token))
                .call();
            match asked {
                Ok(r) => break r,
                Err(ureq::Error::Status(503, r)) => {
                    let wait = r
                        .header("retry-after")
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .unwrap_or(5);
                    tracing::warn!(
                        "the engine's event streams are all taken: asking again in {wait} s"
                    );
                    std::thread::sleep(Duration::from_secs(wait.clamp(1, 60)));
                }
                Err(e) => return e.to_string(),
            }
        };
        let mut data = String::new();
        for line in std::io::BufReader::new(reply.into_reader()).lines() {
            let line = match line {
                Ok(l) => l,
                Err(e) => return e.to_string(),
            };
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                match serde_json::from_str(&data) {
                    Ok(state) => on_state(state),
                    Err(e) => tracing::warn!("a state the dashboard cannot read: {e}"),
                }
                data.clear();
            }
        }
        "the engine closed the stream".into()
    }
}
