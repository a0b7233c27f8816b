//! The inference endpoints Wattbar measures, and the models that run elsewhere.

use serde::{Deserialize, Serialize};

/// The inference endpoints Wattbar measures; every other path is forwarded unmeasured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Route {
    #[serde(rename = "/api/generate")]
    OllamaGenerate,
    #[serde(rename = "/api/chat")]
    OllamaChat,
    #[serde(rename = "/v1/chat/completions")]
    OpenAiChat,
    #[serde(rename = "/v1/completions")]
    OpenAiCompletions,
    /// A record a client measured itself and sent to `POST /v1/inference`.
    #[serde(rename = "external")]
    External,
}

impl Route {
    /// The route a `POST` to `path` is, if it is one Wattbar measures.
    pub fn of_post(path: &str) -> Option<Route> {
        match path.trim_end_matches('/') {
            "/api/generate" => Some(Route::OllamaGenerate),
            "/api/chat" => Some(Route::OllamaChat),
            "/v1/chat/completions" => Some(Route::OpenAiChat),
            "/v1/completions" => Some(Route::OpenAiCompletions),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Route::OllamaGenerate => "/api/generate",
            Route::OllamaChat => "/api/chat",
            Route::OpenAiChat => "/v1/chat/completions",
            Route::OpenAiCompletions => "/v1/completions",
            Route::External => "external",
        }
    }

    pub fn parse(s: &str) -> Option<Route> {
        match s {
            "external" => Some(Route::External),
            other => Route::of_post(other),
        }
    }
}

/// Models named `*:cloud` or `*-cloud` run on a remote service: local watts are not theirs.
pub fn is_remote_model(model: &str) -> bool {
    let m = model.trim();
    m.ends_with(":cloud") || m.ends_with("-cloud")
}

/// A model's name as Ollama compares names: case aside, `registry.ollama.ai/library/` implied,
/// and a missing tag meaning `:latest`. `gemma3`, `library/gemma3` and `gemma3:latest` are one
/// model; the servers' `/api/ps` says the last.
pub fn model_key(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    let short = name
        .strip_prefix("registry.ollama.ai/")
        .unwrap_or(&name)
        .trim_start_matches("library/");
    let last = short.rsplit('/').next().unwrap_or(short);
    match last.contains(':') {
        true => short.to_string(),
        false => format!("{short}:latest"),
    }
}

/// The longest model name Wattbar keeps; Ollama's own names stay far below it.
pub const MAX_MODEL_NAME_BYTES: usize = 256;

/// Why a model name is refused where it enters (a request, an answer, a posted record): it ends
/// up in records, labels and reports, so it is bounded and holds no control character.
pub fn check_model_name(model: &str) -> Result<(), String> {
    if model.len() > MAX_MODEL_NAME_BYTES {
        return Err(format!(
            "the model name is {} bytes long; at most {MAX_MODEL_NAME_BYTES} are accepted",
            model.len()
        ));
    }
    if let Some(c) = model.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the model name holds the control character {:?}",
            c
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_names_of_one_model_share_a_key() {
        for same in [
            "gemma3",
            "gemma3:latest",
            "Gemma3",
            "library/gemma3",
            "registry.ollama.ai/library/gemma3:latest",
        ] {
            assert_eq!(model_key(same), "gemma3:latest", "{same}");
        }
        assert_eq!(model_key("gemma3:1b"), "gemma3:1b");
        assert_eq!(
            model_key("hf.co/bartowski/qwen"),
            "hf.co/bartowski/qwen:latest"
        );
        assert_ne!(model_key("gemma3:1b"), model_key("gemma3"));
    }

    #[test]
    fn a_model_name_is_bounded_and_free_of_control_characters() {
        assert!(check_model_name("llama3.2:3b").is_ok());
        assert!(check_model_name("hf.co/bartowski/Qwen \"quoted\" \\ name").is_ok());
        assert!(check_model_name(&"m".repeat(MAX_MODEL_NAME_BYTES)).is_ok());
        assert!(check_model_name(&"m".repeat(MAX_MODEL_NAME_BYTES + 1)).is_err());
        for bad in [
            "a\nb",
            "a\0b",
            "a\rb",
            "tab\tname",
            "esc\u{1b}[31m",
            "del\u{7f}",
            "c1\u{85}",
        ] {
            assert!(check_model_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_the_four_generation_endpoints_are_measured() {
        assert_eq!(Route::of_post("/api/generate"), Some(Route::OllamaGenerate));
        assert_eq!(Route::of_post("/api/chat/"), Some(Route::OllamaChat));
        assert_eq!(
            Route::of_post("/v1/chat/completions"),
            Some(Route::OpenAiChat)
        );
        assert_eq!(
            Route::of_post("/v1/completions"),
            Some(Route::OpenAiCompletions)
        );
        assert_eq!(Route::of_post("/api/embed"), None);
        assert_eq!(Route::of_post("/api/pull"), None);
    }

    #[test]
    fn cloud_models_are_recognised_by_their_tag_or_suffix() {
        assert!(is_remote_model("gpt-oss:120b-cloud"));
        assert!(is_remote_model("deepseek-v3.1:671b-cloud"));
        assert!(is_remote_model("kimi:cloud"));
        assert!(!is_remote_model("llama3.2:3b"));
        assert!(!is_remote_model("cloudy-llama:7b"));
    }
}
