//! The `llm:` grader's pure half: what the grader model is asked, and how its few words are
//! read ([`crate::eval::Grader::Llm`]; the caller asks the model).
//!
//! Rules:
//! - The grader model only extracts: asked at temperature 0 for a few tokens ([`room`]: a
//!   letter's [`JUDGE_MAX_TOKENS`], or room for the reference's number written out, as
//!   tokenizers that give each digit a token need), it names the final answer the response gives — a letter A–J where the reference is
//!   one, else a number — or `NONE`. Whether that is right is decided here, by `mcq` or `number`
//!   against the reference, never by the grader model's opinion.
//! - `NONE`, or words with no letter or number, is an answer that gave nothing to read:
//!   incorrect. A reference that is neither a letter nor a number is unevaluated: the grader
//!   model could extract nothing to compare.

use super::{grade, gsm8k_reference, last_number, mcq_letter, Grade, Grader, Verdict};

/// The most tokens the grader model may generate: a letter or a number.
pub const JUDGE_MAX_TOKENS: u32 = 5;

/// The most tokens the grader model may generate for `reference`: [`JUDGE_MAX_TOKENS`] for a
/// letter, and for a number one a character of it written with thousands' separators, and 4
/// for a sign, a currency sign, a point and the end; at most [`JUDGE_MAX_ROOM`]. A read cut off
/// there is longer than the reference, never mistaken for it.
pub fn room(reference: &str) -> u32 {
    let r = reference.trim();
    let number = match wanted(r) {
        Some(Wanted::Number) => gsm8k_reference(r).or_else(|| last_number(r)),
        _ => None,
    };
    let Some(n) = number.filter(|n| n.is_finite()) else {
        return JUDGE_MAX_TOKENS;
    };
    let digits = format!("{}", n.abs()).len();
    let chars = digits + digits / 3 + 4;
    u32::try_from(chars)
        .unwrap_or(JUDGE_MAX_ROOM)
        .clamp(JUDGE_MAX_TOKENS, JUDGE_MAX_ROOM)
}

/// The most tokens a grader model is ever given.
pub const JUDGE_MAX_ROOM: u32 = 64;

/// Whether `reference` asks for a letter (multiple choice) or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    Letter,
    Number,
}

/// What `reference` asks for; `None` where it is neither a letter A–J nor holds a number.
pub fn wanted(reference: &str) -> Option<Wanted> {
    let r = reference.trim();
    if r.len() <= 3 && mcq_letter(r).is_some() {
        return Some(Wanted::Letter);
    }
    (gsm8k_reference(r).or_else(|| last_number(r)))
        .is_some()
        .then_some(Wanted::Number)
}

/// The grader model's prompt: the question and the response, and what to extract.
pub fn prompt(question: &str, response: &str, wanted: Wanted) -> String {
    let what = match wanted {
        Wanted::Letter => "the letter (A to J) of the option the response finally chooses",
        Wanted::Number => "the final number the response gives as its answer, digits only",
    };
    format!(
        "Read the question and the response below. Reply with {what}, and nothing else. If the \
         response gives no final answer, reply NONE.\n\nQuestion:\n{question}\n\nResponse:\n\
         {response}\n\nFinal answer:"
    )
}

/// The grade of `read`, what grader model `model` replied, against `reference`.
pub fn grade_read(model: &str, read: &str, reference: &str, tolerance: f64) -> Grade {
    let name = format!("llm:{model}");
    let heard = read.trim();
    let Some(wanted) = wanted(reference) else {
        return Grade {
            grader: name,
            extracted: None,
            verdict: Verdict::Unevaluated,
            why: format!("the reference {reference:?} is neither a letter A–J nor a number"),
        };
    };
    let inner = match wanted {
        Wanted::Letter => Grader::Mcq,
        Wanted::Number => Grader::Number { tolerance },
    };
    let said = if heard.to_ascii_uppercase().starts_with("NONE") {
        ""
    } else {
        heard
    };
    let g = grade(&inner, said, Some(reference)).unwrap_or_else(|| Grade {
        grader: String::new(),
        extracted: None,
        verdict: Verdict::Unevaluated,
        why: "no grade".into(),
    });
    Grade {
        grader: name,
        extracted: g.extracted,
        verdict: g.verdict,
        why: format!("the grader model read {heard:?}: {}", g.why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(read: &str, reference: &str) -> (Option<String>, Verdict) {
        let g = grade_read("smollm2", read, reference, 0.0);
        assert_eq!(g.grader, "llm:smollm2");
        (g.extracted, g.verdict)
    }

    #[test]
    fn what_the_grader_model_read_is_compared_by_number_or_letter_never_taken_on_its_word() {
        // GSM8K's reference: the number after ####.
        let gsm = "Natalia sold 48/2 = 24 clips in May.\n#### 72";
        assert_eq!(wanted(gsm), Some(Wanted::Number));
        assert_eq!(verdict("72", gsm), (Some("72".into()), Verdict::Correct));
        assert_eq!(verdict(" 72\n", gsm), (Some("72".into()), Verdict::Correct));
        assert_eq!(verdict("$72.", gsm), (Some("72".into()), Verdict::Correct));
        assert_eq!(verdict("18", gsm), (Some("18".into()), Verdict::Incorrect));
        // "Correct" or "yes" is an opinion, not an answer: nothing to compare, incorrect.
        assert_eq!(verdict("Correct", gsm), (None, Verdict::Incorrect));
        assert_eq!(verdict("NONE", gsm), (None, Verdict::Incorrect));
        assert_eq!(verdict("", gsm), (None, Verdict::Incorrect));
        // A letter reference.
        assert_eq!(wanted("C"), Some(Wanted::Letter));
        assert_eq!(verdict("C", "C"), (Some("C".into()), Verdict::Correct));
        assert_eq!(verdict("(B)", "C"), (Some("B".into()), Verdict::Incorrect));
        // A reference with nothing to extract: the grader cannot grade.
        assert_eq!(verdict("Paris", "Paris").1, Verdict::Unevaluated);
        let g = grade_read("m", "72", "72", 0.0);
        assert_eq!(g.why, "the grader model read \"72\": its last number is 72");
    }

    #[test]
    fn the_grader_model_has_room_for_every_digit_of_a_long_reference() {
        // SmolLM2's tokenizer gives each digit a token: 1,234,567 is 9 tokens, cut at 5 to
        // "1,234" it would read as 1234 and be graded wrong.
        assert_eq!(room("C"), JUDGE_MAX_TOKENS);
        assert_eq!(room("Paris"), JUDGE_MAX_TOKENS);
        assert_eq!(room("#### 72"), 2 + 4);
        assert_eq!(room("#### 1234567"), 7 + 2 + 4);
        assert_eq!(room("#### 0.125"), 5 + 1 + 4);
        assert_eq!(room(&format!("#### {}", "9".repeat(80))), JUDGE_MAX_ROOM);
        assert!(room("#### 1,234,567") as usize >= "$-1,234,567.".len());
    }

    #[test]
    fn the_prompt_asks_for_what_the_reference_is() {
        let p = prompt("What is 6 × 7?", "It is 42.", Wanted::Number);
        assert!(
            p.contains("the final number")
                && p.contains("It is 42.")
                && p.ends_with("Final answer:")
        );
        assert!(prompt("Q", "R", Wanted::Letter).contains("the letter (A to J)"));
    }
}
