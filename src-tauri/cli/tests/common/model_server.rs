//! The real model server of `scripts/llm-server` (installed by `scripts/setup`): llama.cpp's own
//! `llama-server --metrics` serving SmolLM2-135M-Instruct on this machine's CPU; and the official
//! Python client from the same virtual environment.

use super::{address_after, repo_root};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A model server, stopped (SIGKILL) when dropped.
pub struct ModelServer {
    pub child: Child,
    pub url: String,
}

impl ModelServer {
    /// `llama-server --metrics` with the model as `smollm2`.
    pub fn llama() -> ModelServer {
        ModelServer::llama_as("smollm2")
    }

    /// [`ModelServer::llama`] with the model as `alias`: a second model, as far as clients tell.
    pub fn llama_as(alias: &str) -> ModelServer {
        ModelServer::serving(&[alias])
    }

    /// One port serving the model under each of `aliases`: with more than one, llama.cpp's
    /// router mode, each alias loaded on demand by a child server and named in its answers.
    pub fn serving(aliases: &[&str]) -> ModelServer {
        let mut args = vec!["serve".to_string(), "--port".into(), "0".into()];
        for a in aliases {
            args.extend(["--alias".to_string(), a.to_string()]);
        }
        // `llama_server: listening on http://127.0.0.1:41234`.
        ModelServer::spawn(&args, "listening on ")
    }

    fn spawn(args: &[String], marker: &str) -> ModelServer {
        // Waits for an install still running in the background (scripts/setup), before the
        // server's own deadline starts.
        let built = Command::new(repo_root().join("scripts/llm-server"))
            .arg("llama-server")
            .output()
            .unwrap_or_else(|e| panic!("scripts/llm-server: {e}"));
        assert!(
            built.status.success(),
            "run scripts/setup: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let mut child = Command::new(repo_root().join("scripts/llm-server"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("scripts/llm-server: {e}"));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let (tx, log) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut said: Vec<String> = Vec::new();
        let mut url = None;
        loop {
            said.extend(log.try_iter());
            url = url.or_else(|| address_after(&said.join("\n"), marker));
            if let Some(url) = &url {
                let up = super::http().get(&format!("{url}/v1/models")).call();
                if up.is_ok_and(|r| r.status().is_success()) {
                    break;
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                said.extend(log.try_iter());
                panic!(
                    "the model server exited ({status}); run scripts/setup to install it:\n{}",
                    said.join("\n")
                );
            }
            assert!(Instant::now() < deadline, "the model server never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
        let url = url.unwrap_or_else(|| panic!("no address"));
        ModelServer { child, url }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python of the model servers' virtual environment, which pins the official clients.
pub fn python() -> String {
    let out = Command::new(repo_root().join("scripts/llm-server"))
        .arg("python")
        .output()
        .unwrap_or_else(|e| panic!("scripts/llm-server python: {e}"));
    assert!(
        out.status.success(),
        "run scripts/setup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
