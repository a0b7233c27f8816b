//! Every model server's `/metrics` capture in `../shared/fixtures/server-metrics/` (read in
//! place, never copied) against the numbers its SOURCES.md states, read off the files by hand.

use proptest::prelude::*;
use std::path::PathBuf;
use wattbar_core::inference::server_window::ServerCounters;
use wattbar_sources::server_metrics::{parse_server_metrics, Family};

fn capture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/server-metrics")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn counters(prompt: f64, completion: f64, running: f64) -> ServerCounters {
    ServerCounters {
        prompt_tokens: Some(prompt),
        completion_tokens: Some(completion),
        running: Some(running),
        ..ServerCounters::default()
    }
}

#[test]
fn vllm_v0_after_one_request_counted_5_prompt_and_7_generated_tokens() {
    let m = parse_server_metrics(&capture("vllm-v0-metrics-opt-125m-one-request-2024-06.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.family, Family::Vllm);
    assert_eq!(m.skipped_lines, 0);
    assert_eq!(m.models.len(), 1);
    assert_eq!(
        m.models.get(&Some("facebook/opt-125m".to_string())),
        Some(&counters(5.0, 7.0, 0.0))
    );
}

#[test]
fn sglang_under_load_counted_8_128_902_prompt_and_7_557_572_generated_with_162_running() {
    let m = parse_server_metrics(&capture(
        "sglang-metrics-llama3.1-8b-docs-example-v0.3-2024-11.txt",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.family, Family::Sglang);
    // v0.3 has no gpu_execution_seconds_total: its split is unknown, not zero.
    assert_eq!(
        m.models
            .get(&Some("meta-llama/Llama-3.1-8B-Instruct".to_string())),
        Some(&counters(8_128_902.0, 7_557_572.0, 162.0))
    );
    assert_eq!(
        m.models.len(),
        1,
        "func_latency has no model_name: not a model"
    );
}

#[test]
fn llama_server_names_no_model_and_counted_6886_prompt_and_3469_predicted_tokens() {
    let m = parse_server_metrics(&capture(
        "llamacpp-ik_llama-server-metrics-kvcache-ratio-2025-08-15.txt",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.family, Family::LlamaCpp);
    assert_eq!(m.models.get(&None), Some(&counters(6886.0, 3469.0, 0.0)));
}

#[test]
fn ollamas_unreleased_metrics_are_refused_with_the_reason() {
    let e = parse_server_metrics(&capture(
        "ollama-pr11159-build-metrics-eval-counters-qwen2.5-coder-2025-06-22.txt",
    ))
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("Ollama has no /metrics"), "{e}");
}

/// No genuine TGI exposition was found (SOURCES.md): this text is written from TGI's documented
/// metric names, one histogram each, as its Prometheus exporter writes them.
#[test]
fn tgi_by_its_documented_names_counts_the_histograms_sums() {
    let text = "tgi_request_count 3\n\
                tgi_request_input_length_sum 120\ntgi_request_input_length_count 3\n\
                tgi_request_generated_tokens_sum 300\ntgi_request_generated_tokens_count 3\n\
                tgi_batch_current_size 1\n";
    let m = parse_server_metrics(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.family, Family::Tgi);
    assert_eq!(m.models.get(&None), Some(&counters(120.0, 300.0, 1.0)));
}

/// vLLM's data-parallel ranks (`engine`), and SGLang's GPU seconds by category: no genuine
/// capture holds either (SOURCES.md), so these lines follow the documented labels. Each model's
/// series are summed across ranks; a NaN or negative counter is left out, never counted.
#[test]
fn ranks_are_summed_per_model_and_absurd_counters_left_out() {
    let vllm = "vllm:prompt_tokens_total{engine=\"0\",model_name=\"a\"} 10\n\
                vllm:prompt_tokens_total{engine=\"1\",model_name=\"a\"} 32\n\
                vllm:generation_tokens_total{engine=\"0\",model_name=\"a\"} NaN\n\
                vllm:generation_tokens_total{engine=\"1\",model_name=\"a\"} 5\n\
                vllm:prompt_tokens_total{engine=\"0\",model_name=\"b\"} -4\n";
    let m = parse_server_metrics(vllm).unwrap_or_else(|e| panic!("{e}"));
    let a = m.models.get(&Some("a".to_string()));
    assert_eq!(a.and_then(|c| c.prompt_tokens), Some(42.0));
    assert_eq!(a.and_then(|c| c.completion_tokens), Some(5.0));
    let b = m.models.get(&Some("b".to_string()));
    assert_eq!(b.and_then(|c| c.prompt_tokens), None);

    let sglang = "sglang:gpu_execution_seconds_total{category=\"prefill\",model_name=\"m\"} 2.5\n\
                  sglang:gpu_execution_seconds_total{category=\"decode\",model_name=\"m\"} 7.5\n";
    let m = parse_server_metrics(sglang).unwrap_or_else(|e| panic!("{e}"));
    let c = m.models.get(&Some("m".to_string()));
    assert_eq!(c.and_then(|c| c.prefill_gpu_seconds), Some(2.5));
    assert_eq!(c.and_then(|c| c.decode_gpu_seconds), Some(7.5));
}

proptest! {
    /// Any text, as a hostile or broken server may send: parsed or refused, never a panic, and
    /// no counter that is negative or not finite.
    #[test]
    fn any_exposition_is_parsed_or_refused_without_a_panic(
        text in prop_oneof![
            "\\PC{0,400}",
            proptest::collection::vec(
                prop_oneof![
                    Just("vllm:prompt_tokens_total".to_string()),
                    Just("llamacpp:tokens_predicted_total".to_string()),
                    "[a-z:_{}=\",\\\\ ]{0,20}".prop_map(String::from),
                ]
                .prop_flat_map(|name| ("[-+0-9.eNaInf]{0,8}", Just(name)))
                .prop_map(|(v, name)| format!("{name} {v}")),
                0..20,
            )
            .prop_map(|lines| lines.join("\n")),
        ],
    ) {
        if let Ok(m) = parse_server_metrics(&text) {
            for c in m.models.values() {
                for v in [c.prompt_tokens, c.completion_tokens, c.running].into_iter().flatten() {
                    prop_assert!(v.is_finite() && v >= 0.0, "{v}");
                }
            }
        }
    }
}

/// A one-shot-per-connection HTTP server on loopback answering every GET with `status` and
/// `body`, when the request carries `Authorization: Bearer wb-metrics-t0ken` or `open` is set;
/// else 401. Its address.
fn metrics_server(status: u16, body: Vec<u8>, open: bool) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(&mut stream);
            let mut authorized = open;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                authorized |= line.trim() == "Authorization: Bearer wb-metrics-t0ken"
                    || line.trim() == "authorization: Bearer wb-metrics-t0ken";
                line.clear();
            }
            let (code, body) = if authorized {
                (status, body.clone())
            } else {
                (401, b"unauthorized".to_vec())
            };
            let head = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_scrape_reads_the_servers_metrics_with_its_token_and_says_why_when_it_cannot() {
    use wattbar_core::secret::Bound;
    use wattbar_sources::error::Error;
    use wattbar_sources::server_metrics::scrape::MetricsClient;
    let vllm = capture("vllm-v0-metrics-opt-125m-one-request-2024-06.txt").into_bytes();

    let url = metrics_server(200, vllm.clone(), false);
    let token = |kept_for: &str| Bound::new(kept_for, "wb-metrics-t0ken".into());
    let with_token = MetricsClient::new(&url, token(&url)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(with_token.shown(), format!("{url}/metrics"));
    let m = with_token.scrape().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.family, Family::Vllm);
    let without = MetricsClient::new(&url, None).unwrap_or_else(|e| panic!("{e}"));
    let kept_elsewhere = MetricsClient::new(&url, token("http://gpu-box.lan:8000"))
        .unwrap_or_else(|e| panic!("{e}"));
    for client in [without, kept_elsewhere] {
        let refused = client
            .scrape()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(refused.contains("401"), "{refused}");
    }
    assert!(!format!("{with_token:?}").contains("t0ken"));

    // llama-server without --metrics answers 404: said how to turn it on.
    let off = MetricsClient::new(&metrics_server(404, b"not found".to_vec(), true), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let said = off
        .scrape()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(said.contains("--metrics"), "{said}");

    // An answer past 4 MiB is cut off, not read whole.
    let huge = MetricsClient::new(&metrics_server(200, vec![b'#'; 5 << 20], true), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(huge.scrape(), Err(Error::Transient(_))));

    // Nothing listening: it may come back.
    let (_held, port) = crate::refusing_port();
    let gone = MetricsClient::new(&format!("http://127.0.0.1:{port}"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        matches!(gone.scrape(), Err(Error::Transient(_))),
        "{:?}",
        gone.scrape()
    );
    // A password in the address is refused before anything is asked.
    assert!(MetricsClient::new("http://u:pw@127.0.0.1:1", None).is_err());

    // A key in the query is sent, and shown nowhere: not in the address every window, label
    // and message carries, nor in the client's debug form.
    let keyed = MetricsClient::new(&format!("{url}?api_key=wb-s3cret"), None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(keyed.shown(), format!("{url}/metrics"));
    assert!(!format!("{keyed:?}").contains("s3cret"), "{keyed:?}");
}
