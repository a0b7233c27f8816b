//! Debian's real `prometheus`, started on port 0 of loopback for a test and asked over its HTTP
//! API.

use super::Answer;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A number from Prometheus's JSON (sample values are strings) or Wattbar's.
pub fn num(v: &serde_json::Value) -> f64 {
    match v {
        serde_json::Value::String(s) => s
            .parse()
            .unwrap_or_else(|e| panic!("not a number: {v}: {e}")),
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

/// The real Prometheus server, killed when dropped.
pub struct Prometheus {
    child: Child,
    pub url: String,
    log: PathBuf,
}

impl Prometheus {
    pub fn start(dir: &Path, config: &str) -> Prometheus {
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap_or_else(|e| panic!("{e}"));
        let log = dir.join("prometheus.log");
        let out = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `prometheus` ({e}): the test needs the real server; \
                     scripts/setup installs it (Debian package `prometheus`)"
                )
            });
        let mut p = Prometheus {
            child,
            url: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", p.log_text());
            }
            // Its web server names where port 0 landed: `msg="Listening on" address=127.0.0.1:N`.
            if p.url.is_empty() {
                if let Some(address) =
                    crate::common::address_after(&p.log_text(), "msg=\"Listening on\" address=")
                {
                    p.url = format!("http://{address}");
                }
            }
            let ready = !p.url.is_empty()
                && crate::common::http()
                    .get(&format!("{}/-/ready", p.url))
                    .call()
                    .is_ok_and(|r| r.status().is_success());
            if ready {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready in 30 s:\n{}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /api/v1/query`: the result's series (or samples, for a range selector).
    pub fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let answer = crate::common::http()
            .get(&format!("{}/api/v1/query", self.url))
            .query("query", expr)
            .call()
            .unwrap_or_else(|e| panic!("{expr}: {e}"));
        let code = answer.code();
        let body = answer.json();
        assert_eq!(code, 200, "{expr}: {body}");
        assert_eq!(body["status"], "success", "{expr}: {body}");
        body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The samples of `selector` over the last `range`, oldest first, as (Unix seconds, value).
    pub fn samples(&self, selector: &str, range: &str) -> Vec<(f64, f64)> {
        let result = self.query(&format!("{selector}[{range}]"));
        assert!(result.len() <= 1, "{selector}: {result:?}");
        result
            .first()
            .and_then(|s| s["values"].as_array())
            .map(|v| v.iter().map(|p| (num(&p[0]), num(&p[1]))).collect())
            .unwrap_or_default()
    }

    /// Waits until `expr` has at least `n` series; answers them.
    pub fn wait_for(&self, expr: &str, n: usize, within: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + within;
        loop {
            let result = self.query(expr);
            if result.len() >= n {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{expr}: {} series after {within:?}, not {n}:\n{}",
                result.len(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
