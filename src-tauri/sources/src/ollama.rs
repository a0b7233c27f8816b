//! Model-size heuristic, the last resort: the models Ollama has loaded, by size in VRAM.
//!
//! Source id `ollama-heuristic`, quality `heuristic`, domain `gpu`, no device.
//!
//! Rule: `GET {base}/api/ps` (default base `http://127.0.0.1:11434`, 300 ms timeout) lists the
//! loaded models; watts = Σ `size_vram` (bytes) / 10⁹ × W/GB (default 2.0 W per GB).
//!
//! Why `gpu`: `size_vram` is the part of each model held in GPU memory (all of it on Apple
//! Silicon's unified memory), so the figure stands for the GPU working on that model. The chain
//! adds it to the CPU figure like any GPU reading, and only when nothing better reported a GPU.
//!
//! Absent is not zero:
//! - no model loaded: no reading (`Transient("no model loaded")`);
//! - models loaded only in system memory (Σ `size_vram` = 0, CPU inference): no reading either,
//!   the CPU sources already cover that work;
//! - Ollama not running, too slow, or answering an HTTP error: `Transient` with the reason, never
//!   0 W. Transient rather than unavailable, because Ollama may start later.
//!
//! A GB here is 10⁹ bytes, as Ollama prints sizes.
//!
//! Limit: an answer is read up to [`MAX_PS_BYTES`] (a dozen loaded models take a few KiB); a
//! longer one is refused, not read.

use crate::error::Error;
use crate::sample::Sample;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::Duration;
use wattbar_core::{Domain, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "ollama-heuristic";
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";
pub const DEFAULT_WATTS_PER_GB: f64 = 2.0;
/// The most of an `/api/ps` answer read.
pub const MAX_PS_BYTES: u64 = 1 << 20;
/// Short: the sampler must not wait on a busy or absent server.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(300);
pub const BYTES_PER_GB: f64 = 1e9;
pub const NO_MODEL_LOADED: &str = "no model loaded";

/// One model that Ollama holds in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModel {
    pub name: String,
    /// The whole model in memory (VRAM and system memory), bytes.
    pub size_bytes: Option<u64>,
    /// The part in GPU memory, bytes.
    pub size_vram_bytes: u64,
}

#[derive(Deserialize)]
struct PsResponse {
    models: Option<Vec<PsModel>>,
}

#[derive(Deserialize)]
struct PsModel {
    name: Option<String>,
    model: Option<String>,
    size: Option<u64>,
    size_vram: Option<u64>,
}

fn parse_err(message: String) -> Error {
    Error::Parse {
        what: "ollama /api/ps",
        line: None,
        message,
    }
}

/// Parses the body of `GET /api/ps`. `"models": null` (seen from some versions when idle) is
/// the same as an empty list. A model without `size_vram` is an error: a response this source
/// does not understand gives no number.
pub fn parse_ps(text: &str) -> Result<Vec<LoadedModel>, Error> {
    let ps: PsResponse = serde_json::from_str(text).map_err(|e| parse_err(e.to_string()))?;
    ps.models
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let name = m.name.or(m.model).unwrap_or_else(|| format!("model {i}"));
            let size_vram_bytes = m
                .size_vram
                .ok_or_else(|| parse_err(format!("{name} has no size_vram")))?;
            Ok(LoadedModel {
                name,
                size_bytes: m.size,
                size_vram_bytes,
            })
        })
        .collect()
}

/// The heuristic: Σ `size_vram` in GB × `watts_per_gb`. `None` when nothing is in VRAM.
pub fn heuristic_watts(models: &[LoadedModel], watts_per_gb: f64) -> Option<Watts> {
    let vram: u64 = models.iter().map(|m| m.size_vram_bytes).sum();
    (vram > 0).then(|| Watts(vram as f64 / BYTES_PER_GB * watts_per_gb))
}

/// The heuristic as a [`Source`], asking Ollama over HTTP.
pub struct OllamaHeuristic {
    base_url: String,
    watts_per_gb: f64,
    agent: ureq::Agent,
    /// While Ollama is not running, ask again only after this monotonic time, and meanwhile
    /// repeat the reason: an idle machine without Ollama should not pay a connection a second.
    /// The last wait, which the next miss doubles.
    quiet: Option<Quiet>,
}

#[derive(Debug, Clone)]
struct Quiet {
    until: std::time::Duration,
    why: Error,
    waited: std::time::Duration,
}

/// How long to wait before asking an Ollama that did not answer again after its first miss;
/// each further miss doubles the wait, up to [`MAX_RETRY_AFTER`].
pub const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest wait before asking again: an Ollama started later is found within it.
pub const MAX_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

impl Default for OllamaHeuristic {
    fn default() -> Self {
        OllamaHeuristic::new(DEFAULT_BASE_URL, DEFAULT_WATTS_PER_GB)
    }
}

impl OllamaHeuristic {
    /// `base_url` like `http://127.0.0.1:11434` (a trailing `/` is fine). A `watts_per_gb` that
    /// is not a positive number falls back to [`DEFAULT_WATTS_PER_GB`].
    pub fn new(base_url: impl Into<String>, watts_per_gb: f64) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_string();
        let watts_per_gb = if watts_per_gb.is_finite() && watts_per_gb > 0.0 {
            watts_per_gb
        } else {
            DEFAULT_WATTS_PER_GB
        };
        OllamaHeuristic {
            base_url,
            watts_per_gb,
            // Ollama is local: an HTTP_PROXY in the environment must not reroute the request.
            agent: crate::resolver::agent(
                ureq::Agent::config_builder()
                    .timeout_global(Some(DEFAULT_TIMEOUT))
                    .proxy(None)
                    .http_status_as_error(false)
                    .build(),
            ),
            quiet: None,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn watts_per_gb(&self) -> f64 {
        self.watts_per_gb
    }

    /// The raw body of `GET {base}/api/ps`.
    pub fn fetch_ps(&self) -> Result<String, Error> {
        self.fetch().map_err(|(e, _)| e)
    }

    /// Like [`fetch_ps`](Self::fetch_ps); the flag says nothing answered at all.
    fn fetch(&self) -> Result<String, (Error, bool)> {
        let url = format!("{}/api/ps", self.base_url);
        match self.agent.get(&url).call() {
            Ok(response) if response.status().as_u16() >= 400 => Err((
                Error::Transient(format!(
                    "Ollama at {} answered HTTP {} to /api/ps",
                    self.base_url,
                    response.status().as_u16()
                )),
                false,
            )),
            Ok(mut response) => response
                .body_mut()
                .with_config()
                .limit(MAX_PS_BYTES)
                .read_to_string()
                .map_err(|e| {
                    let why = match e {
                        ureq::Error::BodyExceedsLimit(_) => {
                            format!("the answer is over {} KiB", MAX_PS_BYTES >> 10)
                        }
                        e => e.to_string(),
                    };
                    (
                        Error::Transient(format!(
                            "Ollama at {}: reading /api/ps: {why}",
                            self.base_url
                        )),
                        false,
                    )
                }),
            Err(t) => Err((
                Error::Transient(format!(
                    "Ollama is not answering at {} ({t}); is it running?",
                    self.base_url
                )),
                true,
            )),
        }
    }

    /// One read: a `gpu` reading from the loaded models, and the models in
    /// `state["ollama_models"]` (`name`, `size_bytes`, `size_vram_bytes`).
    pub fn sample(&mut self, at: Stamp) -> Result<Sample, Error> {
        if let Some(q) = &self.quiet {
            if at.monotonic < q.until {
                return Err(q.why.clone());
            }
        }
        let body = match self.fetch() {
            Ok(body) => {
                self.quiet = None;
                body
            }
            Err((e, unreachable)) => {
                if unreachable {
                    let wait = self
                        .quiet
                        .as_ref()
                        .map_or(RETRY_AFTER, |q| (q.waited * 2).min(MAX_RETRY_AFTER));
                    self.quiet = Some(Quiet {
                        until: at.monotonic + wait,
                        why: e.clone(),
                        waited: wait,
                    });
                } else {
                    self.quiet = None;
                }
                return Err(e);
            }
        };
        let models = parse_ps(&body)?;
        if models.is_empty() {
            return Err(Error::Transient(NO_MODEL_LOADED.into()));
        }
        let Some(watts) = heuristic_watts(&models, self.watts_per_gb) else {
            let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
            return Err(Error::Transient(format!(
                "the loaded models ({}) are in system memory, not VRAM; the CPU sources cover them",
                names.join(", ")
            )));
        };
        let mut state = Map::new();
        state.insert(
            "ollama_models".into(),
            Value::Array(
                models
                    .iter()
                    .map(|m| {
                        json!({
                            "name": m.name,
                            "size_bytes": m.size_bytes,
                            "size_vram_bytes": m.size_vram_bytes,
                        })
                    })
                    .collect(),
            ),
        );
        Ok(Sample {
            readings: vec![Reading::power(
                Domain::Gpu,
                watts,
                SOURCE_ID,
                Quality::Heuristic,
                at,
            )],
            state,
        })
    }
}

impl Source for OllamaHeuristic {
    fn id(&self) -> &str {
        SOURCE_ID
    }

    fn quality(&self) -> Quality {
        Quality::Heuristic
    }

    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        Ok(self.sample(at)?.readings)
    }

    fn domains(&self) -> Option<&'static [Domain]> {
        Some(&[Domain::Gpu])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example response of `GET /api/ps` in Ollama's API documentation
    /// (ollama/ollama `docs/api.md`, "List Running Models").
    const DOCUMENTED_PS: &str = r#"{
  "models": [
    {
      "name": "mistral:latest",
      "model": "mistral:latest",
      "size": 5137025024,
      "digest": "2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",
      "details": {
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": [
          "llama"
        ],
        "parameter_size": "7.2B",
        "quantization_level": "Q4_0"
      },
      "expires_at": "2024-06-04T14:38:31.83753-07:00",
      "size_vram": 5137025024
    }
  ]
}"#;

    #[test]
    fn the_documented_response_gives_one_model_of_5_137_025_024_bytes_in_vram() {
        let models = parse_ps(DOCUMENTED_PS).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            models,
            vec![LoadedModel {
                name: "mistral:latest".into(),
                size_bytes: Some(5_137_025_024),
                size_vram_bytes: 5_137_025_024,
            }]
        );
        // 5.137025024 GB × 2 W/GB.
        let w = heuristic_watts(&models, 2.0).unwrap_or(Watts(-1.0));
        assert!((w.0 - 10.274_050_048).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn sizes_in_vram_add_up_across_models() {
        let models = parse_ps(
            r#"{"models":[{"name":"a","size":8000000000,"size_vram":4000000000},
                          {"model":"b","size_vram":1500000000}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(models[1].name, "b");
        assert_eq!(models[1].size_bytes, None);
        assert_eq!(heuristic_watts(&models, 3.0), Some(Watts(16.5)));
    }

    #[test]
    fn no_model_or_nothing_in_vram_is_no_watts_not_zero() {
        assert_eq!(parse_ps(r#"{"models":[]}"#), Ok(vec![]));
        assert_eq!(parse_ps(r#"{"models":null}"#), Ok(vec![]));
        assert_eq!(heuristic_watts(&[], 2.0), None);
        let cpu_only = parse_ps(r#"{"models":[{"name":"a","size":4000000000,"size_vram":0}]}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(heuristic_watts(&cpu_only, 2.0), None);
    }

    #[test]
    fn a_body_that_is_not_the_ps_shape_is_a_parse_error() {
        assert!(parse_ps("<html>").is_err());
        assert!(parse_ps(r#"{"models":[{"name":"a","size":1}]}"#).is_err());
        assert!(parse_ps(r#"{"models":[{"name":"a","size_vram":-5}]}"#).is_err());
    }

    #[test]
    fn a_nonsense_rate_falls_back_to_two_watts_per_gb() {
        assert_eq!(OllamaHeuristic::new("http://x/", -1.0).watts_per_gb(), 2.0);
        assert_eq!(
            OllamaHeuristic::new("http://x/", f64::NAN).watts_per_gb(),
            2.0
        );
        let s = OllamaHeuristic::new("http://x:1/", 1.5);
        assert_eq!((s.base_url(), s.watts_per_gb()), ("http://x:1", 1.5));
    }

    #[test]
    fn an_answer_over_1_mib_is_refused_not_read() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            // A list of models 2 MiB long: valid JSON, each name the same.
            let body = format!(
                "{{\"models\":[{}{{\"name\":\"m\",\"size_vram\":1}}]}}",
                "{\"name\":\"m\",\"size_vram\":1},".repeat((2 << 20) / 29)
            );
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
        });
        let ollama = OllamaHeuristic::new(format!("http://{addr}"), DEFAULT_WATTS_PER_GB);
        let got = ollama.fetch_ps();
        assert!(
            matches!(&got, Err(Error::Transient(m)) if m.contains("over 1024 KiB")),
            "{got:?}"
        );
        let _ = server.join();
    }
}
