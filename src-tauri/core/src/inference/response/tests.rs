use super::*;
use crate::inference::fixture;

/// Feeds the body in `size`-byte pieces, as a network would cut it.
fn read(route: Route, framing: Framing, name: &str, size: usize) -> ServerFigures {
    let body = fixture(name);
    let mut meter = ResponseMeter::new(route, framing);
    for piece in body.chunks(size) {
        meter.feed(piece);
    }
    meter.finish()
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-6)
}

#[test]
fn ollama_generate_stream_gives_the_final_lines_figures_in_seconds() {
    for size in [1, 7, 4096] {
        let f = read(
            Route::OllamaGenerate,
            Framing::Ndjson,
            "ollama_api-generate_stream_llama3_openllmetry.ndjson",
            size,
        );
        assert_eq!(f.model.as_deref(), Some("llama3"));
        assert_eq!(f.completion_tokens, Some(71));
        assert_eq!(f.prompt_tokens, Some(17));
        assert!(close(f.decode_seconds, 2.252182));
        assert!(close(f.prefill_seconds, 0.167135));
        assert!(close(f.load_seconds, 1.797788834));
        assert!(close(f.total_seconds, 4.218611084));
        // 71 / 2.252182 s = 31.524983 tokens/s (SOURCES.md).
        assert!(close(
            f.decode_rate.map(|r| (r * 1e6).round() / 1e6),
            31.524983
        ));
        // One line per token but the last: 70 content lines for 71 tokens.
        assert_eq!(f.content_chunks, 70);
        assert!(f.finished);
        assert_eq!(f.error, None);
    }
}

#[test]
fn ollama_chat_stream_and_body() {
    let s = read(
        Route::OllamaChat,
        Framing::Ndjson,
        "ollama_api-chat_stream_llama3_openllmetry.ndjson",
        100,
    );
    assert_eq!((s.prompt_tokens, s.completion_tokens), (Some(17), Some(50)));
    assert!(close(
        s.decode_rate.map(|r| (r * 1e6).round() / 1e6),
        31.685879
    ));
    assert_eq!(s.content_chunks, 49);

    let b = read(
        Route::OllamaChat,
        Framing::Json,
        "ollama_api-chat_nonstream_gemma3-1b_openllmetry.json",
        64,
    );
    assert_eq!(b.model.as_deref(), Some("gemma3:1b"));
    assert_eq!(
        (b.prompt_tokens, b.completion_tokens),
        (Some(19), Some(104))
    );
    assert!(close(b.decode_seconds, 0.81459575));
    assert!(close(
        b.decode_rate.map(|r| (r * 1e6).round() / 1e6),
        127.670688
    ));
    assert!(b.finished);
    assert_eq!(b.content_chunks, 0);
}

#[test]
fn openai_body_with_usage_has_tokens_but_no_durations() {
    let f = read(
        Route::OpenAiChat,
        Framing::Json,
        "ollama_v1-chat-completions_nonstream_llama3.2_exchange.json",
        10,
    );
    assert_eq!(f.model.as_deref(), Some("llama3.2"));
    assert_eq!((f.prompt_tokens, f.completion_tokens), (Some(32), Some(10)));
    assert_eq!((f.decode_seconds, f.decode_rate), (None, None));
    assert!(f.finished);
}

#[test]
fn openai_stream_without_usage_has_its_content_chunks_counted_and_labelled() {
    let f = read(
        Route::OpenAiChat,
        Framing::Sse,
        "ollama_v1-chat-completions_stream_qwen2.5-0.5b_no-usage_elastic.sse",
        13,
    );
    assert_eq!(f.model.as_deref(), Some("qwen2.5:0.5b"));
    // "Atlantic", " Sea", "." ; the finish chunk's empty content is no content.
    assert_eq!(f.content_chunks, 3);
    assert_eq!(f.prompt_tokens, None);
    assert_eq!(
        (f.completion_tokens, f.tokens_source),
        (Some(3), Some(TokensSource::Counted))
    );
    assert!(f.finished);

    let g = read(
        Route::OpenAiChat,
        Framing::Sse,
        "ollama_v1-chat-completions_stream_llama3.1_include-usage-ignored_magentic.sse",
        4096,
    );
    assert_eq!((g.completion_tokens, g.content_chunks), (Some(22), 22));
    assert_eq!(g.tokens_source, Some(TokensSource::Counted));
    assert!(g.finished);
}

#[test]
fn llama_cpp_stream_takes_the_final_usage_and_timings_never_the_chunk_count() {
    let f = read(
        Route::OpenAiChat,
        Framing::Sse,
        "llamacpp_v1-chat-completions_stream_gpt-oss-20b_usage-timings_fantasy.sse",
        333,
    );
    assert_eq!(f.model.as_deref(), Some("openai/gpt-oss-20b"));
    assert_eq!((f.prompt_tokens, f.completion_tokens), (Some(84), Some(57)));
    // 45 reasoning deltas + 2 content deltas.
    assert_eq!(f.content_chunks, 47);
    assert!(close(f.prefill_seconds, 0.008996));
    assert!(close(f.decode_seconds, 0.48401));
    assert!(close(f.decode_rate, 117.76616185616001));
    assert!(f.finished);

    let b = read(
        Route::OpenAiChat,
        Framing::Json,
        "llamacpp_v1-chat-completions_nonstream_gpt-oss-20b_timings_fantasy.json",
        760,
    );
    assert_eq!((b.prompt_tokens, b.completion_tokens), (Some(84), Some(47)));
    assert!(close(b.decode_rate, 119.96743011897196));
}

#[test]
fn an_error_line_after_a_200_is_an_error() {
    let mut m = ResponseMeter::new(Route::OllamaGenerate, Framing::Ndjson);
    m.feed(b"{\"model\":\"m\",\"response\":\"a\",\"done\":false}\n");
    m.feed(b"{\"error\":\"an error was encountered while running the model\"}\n");
    let f = m.finish();
    assert_eq!(
        f.error.as_deref(),
        Some("an error was encountered while running the model")
    );
    assert!(!f.finished);

    let mut s = ResponseMeter::new(Route::OpenAiChat, Framing::Sse);
    s.feed(b"data: {\"error\":{\"message\":\"context overflow\",\"type\":\"server_error\"}}\n\n");
    assert_eq!(s.finish().error.as_deref(), Some("context overflow"));
}

#[test]
fn zero_usage_on_intermediate_chunks_is_unknown_and_a_later_usage_wins() {
    let mut m = ResponseMeter::new(Route::OpenAiCompletions, Framing::Sse);
    m.feed(b"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0}}\n\n");
    assert_eq!(m.figures().completion_tokens, None);
    m.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n");
    let f = m.finish();
    assert_eq!((f.prompt_tokens, f.completion_tokens), (Some(5), Some(9)));
    assert_eq!(f.content_chunks, 1);
}

#[test]
fn a_line_too_long_to_hold_is_skipped_and_the_next_one_read() {
    let mut m = ResponseMeter::new(Route::OllamaGenerate, Framing::Ndjson);
    let big = vec![b'x'; MAX_LINE_BYTES / 4];
    for _ in 0..5 {
        m.feed(&big);
    }
    m.feed(b"\n{\"model\":\"m\",\"done\":true,\"eval_count\":3,\"eval_duration\":1000000000}\n");
    let f = m.finish();
    assert_eq!(f.completion_tokens, Some(3));
    assert_eq!(f.decode_rate, Some(3.0));
}

#[test]
fn framing_follows_the_content_type() {
    assert_eq!(
        Framing::of_content_type("application/x-ndjson"),
        Framing::Ndjson
    );
    assert_eq!(
        Framing::of_content_type("text/event-stream; charset=utf-8"),
        Framing::Sse
    );
    assert_eq!(
        Framing::of_content_type("application/json; charset=utf-8"),
        Framing::Json
    );
}
