//! Which web pages may use the proxy: the ones Ollama itself would answer.
//!
//! Rule: a request with no `Origin` (a program, not a page) passes; a page's request passes when
//! its origin is one of Ollama's defaults (a page on this machine, or a desktop app's own scheme)
//! or matches a pattern of `OLLAMA_ORIGINS` (comma-separated, `*` for any run of characters), as
//! Ollama reads it. Any other page is refused before its request reaches the model server or
//! becomes a record: a simple cross-origin POST (`Content-Type: text/plain`) needs no preflight,
//! so the browser would otherwise send it.

/// Ollama's own allowed origins when `OLLAMA_ORIGINS` adds nothing (its `envconfig.AllowedOrigins`).
const DEFAULTS: [&str; 17] = [
    "http://localhost",
    "https://localhost",
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1",
    "https://127.0.0.1",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://0.0.0.0",
    "https://0.0.0.0",
    "http://0.0.0.0:*",
    "https://0.0.0.0:*",
    "app://*",
    "file://*",
    "tauri://*",
    "vscode-webview://*",
    "vscode-file://*",
];

#[derive(Debug, Clone)]
pub struct Origins {
    patterns: Vec<String>,
}

impl Origins {
    /// Ollama's defaults and the patterns of `ollama_origins` (the variable's value).
    pub fn from_ollama_origins(ollama_origins: Option<&str>) -> Origins {
        let extra = ollama_origins
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        Origins {
            patterns: extra
                .chain(DEFAULTS.iter().map(|d| d.to_string()))
                .collect(),
        }
    }

    pub fn allows(&self, origin: &str) -> bool {
        self.patterns.iter().any(|p| glob(p, origin))
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_on_this_machine_and_app_schemes_pass_and_others_are_refused() {
        let o = Origins::from_ollama_origins(None);
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "https://127.0.0.1:8443",
            "tauri://localhost",
            "file://",
        ] {
            assert!(o.allows(ok), "{ok}");
        }
        for refused in [
            "http://evil.example",
            "https://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "null",
            "http://192.168.1.10:3000",
        ] {
            assert!(!o.allows(refused), "{refused}");
        }
    }

    #[test]
    fn ollama_origins_adds_patterns_as_ollama_reads_them() {
        let o = Origins::from_ollama_origins(Some(
            " https://chat.example.org , chrome-extension://*,http://*.lan:8080",
        ));
        assert!(o.allows("https://chat.example.org"));
        assert!(!o.allows("https://chat.example.org.evil.example"));
        assert!(o.allows("chrome-extension://abcdef"));
        assert!(o.allows("http://box.lan:8080"));
        assert!(!o.allows("http://box.lan:8081"));
        assert!(Origins::from_ollama_origins(Some("*")).allows("http://evil.example"));
    }
}
