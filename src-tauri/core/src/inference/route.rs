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

#[cfg(test)]
mod tests {
    use super::*;

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
