use super::*;

fn verdict(grader: &str, answer: &str, reference: &str) -> Verdict {
    let g = Grader::parse(grader, 0.0).unwrap_or_else(|e| panic!("{e}"));
    grade(&g, answer, Some(reference))
        .unwrap_or_else(|| panic!("{grader} is pure"))
        .verdict
}

use Verdict::{Correct, Incorrect, Unevaluated};

#[test]
fn number_takes_the_last_number_in_the_answer() {
    let cases: [(&str, &str, Verdict); 24] = [
        ("18", "18", Correct),
        ("The answer is 18.", "18", Correct),
        ("the answer is not 18 but 17", "17", Correct),
        ("the answer is not 18 but 17", "18", Incorrect),
        ("She makes 9 * 2 = $18 every day.", "18", Correct),
        ("$1,234.50", "1234.5", Correct),
        ("1,000,000 bolts", "1000000", Correct),
        ("It takes 2 + 1 = 3 bolts.\n#### 3", "3", Correct),
        ("The temperature fell to -5 degrees", "-5", Correct),
        ("Step 1: 3 apples. Step 2: 4 apples. Total: 7", "7", Correct),
        (
            "Total: 7. Check: 3 + 4 = 7, then add 1 for the gift: 8",
            "7",
            Incorrect,
        ),
        ("**70000**", "70000", Correct),
        ("70,000 dollars", "70000", Correct),
        ("3.5 hours", "3.5", Correct),
        ("3.50", "3.5", Correct),
        ("I'm sorry, I can't help with that.", "18", Incorrect),
        ("", "18", Incorrect),
        ("   \n ", "18", Incorrect),
        ("x-5 is 5 more than x", "5", Correct),
        ("1, 2, 3", "3", Correct),
        ("The farmer has eighteen eggs", "18", Incorrect),
        ("20%", "20", Correct),
        ("12,3456", "3456", Correct),
        ("items 4,5,6", "6", Correct),
    ];
    for (answer, reference, want) in cases {
        assert_eq!(
            verdict("number", answer, reference),
            want,
            "{answer:?} / {reference:?}"
        );
    }
}

#[test]
fn a_gsm8k_reference_is_the_number_after_its_four_hashes() {
    let reference = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = \
                     $<<9*2=18>>18 every day at the farmer’s market.\n#### 18";
    assert_eq!(gsm8k_reference(reference), Some(18.0));
    assert_eq!(gsm8k_reference("… so 70000\n#### 70,000"), Some(70000.0));
    assert_eq!(gsm8k_reference("no hashes 5"), None);
    assert_eq!(verdict("number", "She makes $18.", reference), Correct);
    // Without its hashes a reference's own last number stands.
    assert_eq!(verdict("number", "18", "eighteen: 18"), Correct);
    assert_eq!(verdict("number", "18", "eighteen"), Unevaluated);
}

#[test]
fn number_is_within_its_tolerance_and_no_further() {
    let g = Grader::parse("number", 0.01).unwrap_or_else(|e| panic!("{e}"));
    let v = |a: &str| grade(&g, a, Some("3.14")).map(|g| g.verdict);
    assert_eq!(v("3.1416"), Some(Correct));
    assert_eq!(v("3.15"), Some(Correct));
    assert_eq!(v("3.16"), Some(Incorrect));
    assert!(Grader::parse("number", -1.0).is_err());
    assert!(Grader::parse("number", f64::NAN).is_err());
}

#[test]
fn mcq_reads_the_letter_the_answer_chooses() {
    let cases: [(&str, &str, Verdict); 23] = [
        ("C", "C", Correct),
        ("Answer: (C)", "C", Correct),
        ("Answer: C", "C", Correct),
        ("The answer is (B).", "B", Correct),
        ("The answer is B", "B", Correct),
        ("answer: d", "D", Incorrect),
        ("(A) is wrong because… (B) too. So:\n(D)", "D", Correct),
        (
            "Options (A) and (B) fail.\nThe correct option is (C)",
            "C",
            Correct,
        ),
        (
            "Let me think. The answer is not (A). Answer: (C)",
            "C",
            Correct,
        ),
        (
            "Let me think. The answer is not (A). Answer: (C)",
            "A",
            Incorrect,
        ),
        ("J", "J", Correct),
        ("K", "K", Unevaluated),
        ("C.", "C", Correct),
        ("**B**", "B", Correct),
        ("", "A", Incorrect),
        ("I cannot answer that question.", "A", Incorrect),
        ("The answer is probably B", "B", Incorrect),
        ("A", "(A)", Correct),
        ("My final answer: E", "E", Correct),
        ("Answer: (C)\n", "C", Correct),
        ("The answer is A because A is the only prime", "A", Correct),
        ("The answer I got is (C)", "C", Correct),
        ("The answer is I.", "I", Correct),
    ];
    for (answer, reference, want) in cases {
        assert_eq!(
            verdict("mcq", answer, reference),
            want,
            "{answer:?} / {reference:?}"
        );
    }
}

#[test]
fn exact_and_contains_ignore_case_and_space_only() {
    let exact: [(&str, &str, Verdict); 10] = [
        ("Paris", "paris", Correct),
        ("  Paris \n", "Paris", Correct),
        ("New   York", "new york", Correct),
        ("Paris.", "Paris", Incorrect),
        ("The capital is Paris", "Paris", Incorrect),
        ("", "Paris", Incorrect),
        ("Paris", "", Unevaluated),
        ("PARIS", "Paris", Correct),
        ("Par is", "Paris", Incorrect),
        ("I don't know", "Paris", Incorrect),
    ];
    for (answer, reference, want) in exact {
        assert_eq!(
            verdict("exact", answer, reference),
            want,
            "exact {answer:?}"
        );
    }
    let contains: [(&str, &str, Verdict); 10] = [
        ("The capital is Paris.", "paris", Correct),
        ("NEW\nYORK city", "new york", Correct),
        ("Lyon", "Paris", Incorrect),
        ("", "Paris", Incorrect),
        ("Paris", "  ", Unevaluated),
        ("comparison", "paris", Correct),
        ("P a r i s", "paris", Incorrect),
        ("Not Paris but Lyon", "Paris", Correct),
        ("I'm sorry, I can't answer.", "Paris", Incorrect),
        ("paris", "Paris", Correct),
    ];
    for (answer, reference, want) in contains {
        assert_eq!(
            verdict("contains", answer, reference),
            want,
            "contains {answer:?}"
        );
    }
}

#[test]
fn regex_matches_the_answer_and_says_what_matched() {
    let g = Grader::parse(r"regex:\b(?:yes|oui)\b", 0.0).unwrap_or_else(|e| panic!("{e}"));
    let got = grade(&g, "Well, yes.", None).unwrap_or_else(|| panic!("pure"));
    assert_eq!(
        (got.verdict, got.extracted.as_deref()),
        (Correct, Some("yes"))
    );
    let got = grade(&g, "yesterday", None).unwrap_or_else(|| panic!("pure"));
    assert_eq!(got.verdict, Incorrect);
    assert!(Grader::parse("regex:(", 0.0).is_err());
    assert!(Grader::parse("regex:", 0.0).is_err());
}

#[test]
fn a_grade_says_what_it_read_and_why() {
    let g = Grader::parse("number", 0.0).unwrap_or_else(|e| panic!("{e}"));
    let got =
        grade(&g, "the answer is not 18 but 17", Some("#### 18")).unwrap_or_else(|| panic!("pure"));
    assert_eq!(
        got,
        Grade {
            grader: "number".into(),
            extracted: Some("17".into()),
            verdict: Incorrect,
            why: "its last number is 17, not 18".into(),
        }
    );
    // No reference: not the model's fault.
    let got = grade(&g, "17", None).unwrap_or_else(|| panic!("pure"));
    assert_eq!(got.verdict, Unevaluated);
}

#[test]
fn graders_are_named_as_the_command_line_names_them() {
    for name in [
        "exact",
        "contains",
        "number",
        "mcq",
        "regex:a+",
        "cmd:./check",
        "llm:judge",
    ] {
        let g = Grader::parse(name, 0.0).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(g.to_string(), name);
    }
    assert!(Grader::parse("cmd:", 0.0).is_err());
    assert!(Grader::parse("llm", 0.0).is_err());
    assert!(Grader::parse("exact:x", 0.0).is_err());
    let e = Grader::parse("fuzzy", 0.0).err().unwrap_or_default();
    assert!(e.contains("exact, contains, number, mcq"), "{e}");
    // Those two are run by their callers.
    let cmd = Grader::parse("cmd:./check", 0.0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(grade(&cmd, "x", Some("y")), None);
}
