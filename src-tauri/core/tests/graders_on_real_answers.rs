//! The `number` grader on a real model's answers to GSM8K: SmolLM2-135M through llama.cpp's own
//! server (`tests/fixtures/llm/smollm2-135m_llama-server_gsm8k-first12_answers.jsonl`), graded
//! against GSM8K's references read in place from `../shared/fixtures/evals/`.

use std::path::Path;
use wattbar_core::eval::{grade, Grader, Verdict};

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn smollm2s_twelve_gsm8k_answers_are_read_at_their_last_number_and_all_wrong() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let answers = lines(
        &root
            .join("../../tests/fixtures/llm/smollm2-135m_llama-server_gsm8k-first12_answers.jsonl"),
    );
    let gsm8k = lines(&root.join("../../../shared/fixtures/evals/gsm8k-test-first40.jsonl"));
    // Read by hand off each answer (SOURCES.md): its last number, and the reference.
    let expected = [
        ("2400", "18"),
        ("2", "3"),
        ("15", "70000"),
        ("220", "540"),
        ("80", "20"),
        ("16", "64"),
        ("20", "260"),
        ("12000", "160"),
        ("30", "45"),
        ("15.2", "460"),
        ("3", "366"),
        ("192", "694"),
    ];
    assert_eq!(answers.len(), expected.len());
    let grader = Grader::parse("number", 0.0).unwrap_or_else(|e| panic!("{e}"));
    for (a, (number, reference)) in answers.iter().zip(expected) {
        let line = a["line"].as_u64().unwrap_or_else(|| panic!("{a}")) as usize;
        let reference_text = gsm8k[line - 1]["answer"].as_str().unwrap_or_default();
        let response = a["response"].as_str().unwrap_or_default();
        let got = grade(&grader, response, Some(reference_text))
            .unwrap_or_else(|| panic!("number is pure"));
        assert_eq!(got.extracted.as_deref(), Some(number), "line {line}");
        assert_eq!(got.verdict, Verdict::Incorrect, "line {line}: {got:?}");
        assert_eq!(
            got.why,
            format!("its last number is {number}, not {reference}"),
            "line {line}"
        );
    }
    // Against their own last numbers the same answers are all correct: the grader compares, it
    // does not fail everything.
    for (a, (number, _)) in answers.iter().zip(expected) {
        let response = a["response"].as_str().unwrap_or_default();
        let own = format!("#### {number}");
        let got = grade(&grader, response, Some(&own)).unwrap_or_else(|| panic!("pure"));
        assert_eq!(got.verdict, Verdict::Correct, "{own}");
    }
}
