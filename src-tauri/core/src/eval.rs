//! Graded evaluations: whether a model's answer is correct, by a named grader, and why.
//!
//! Rules:
//! - A grader reads the answer and the reference and gives a [`Grade`]: the verdict, what it
//!   extracted from the answer, and why, in words a person can check.
//! - **Correct** and **incorrect** are the accuracy's two sides. An answer that gives nothing the
//!   grader can read (empty, a refusal, no number, no letter) is incorrect: the model did not
//!   answer. **Unevaluated** is the grader's own failure (a reference it cannot read, a grading
//!   program that crashed, a grader model that failed): left out of the accuracy, as the
//!   Intelligence-per-Watt profiler leaves out unevaluated queries.
//! - `exact`, `contains`, `number`, `mcq` and `regex:` are pure ([`grade`]); `cmd:` and `llm:`
//!   need a program or a model, which their callers run ([`Grader::Cmd`], [`Grader::Llm`]).

pub mod best;
pub mod class;
pub mod compare;
mod extract;
pub mod judge;
pub mod standards;
pub mod summary;

pub use extract::{gsm8k_reference, last_number, mcq_letter, normalise};

use serde::{Deserialize, Serialize};
use std::fmt;

/// How an answer is graded.
#[derive(Debug, Clone)]
pub enum Grader {
    /// The answer, normalised by case and space, equals the reference.
    Exact,
    /// The reference, normalised, appears in the answer.
    Contains,
    /// The last number in the answer equals the reference's number (a GSM8K reference: the one
    /// after `####`) within `tolerance`.
    Number { tolerance: f64 },
    /// The letter A–J the answer chooses: its last "Answer: X" or "answer is (X)" anywhere, else
    /// the last "(X)" of its final line, or that line being the letter alone.
    Mcq,
    /// The pattern matches the answer (the reference is not used).
    Regex(regex::Regex),
    /// A program given the record as JSON on stdin: exit 0 correct, 1 incorrect, else
    /// unevaluated.
    Cmd(String),
    /// A grader model through the same server, at temperature 0.
    Llm(String),
}

impl Grader {
    /// `exact`, `contains`, `number`, `mcq`, `regex:PATTERN`, `cmd:PROGRAM` or `llm:MODEL`;
    /// `tolerance` for `number`.
    pub fn parse(text: &str, tolerance: f64) -> Result<Grader, String> {
        let text = text.trim();
        let (kind, arg) = match text.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (text, None),
        };
        let needs = |what: &str| -> Result<String, String> {
            match arg.map(str::trim).filter(|a| !a.is_empty()) {
                Some(a) => Ok(a.to_string()),
                None => Err(format!(
                    "grader {kind:?} needs {what}: {kind}:{}",
                    what.to_uppercase()
                )),
            }
        };
        let plain = |g: Grader| match arg {
            None => Ok(g),
            Some(_) => Err(format!("grader {kind:?} takes nothing after it")),
        };
        match kind {
            "exact" => plain(Grader::Exact),
            "contains" => plain(Grader::Contains),
            "number" if tolerance.is_finite() && tolerance >= 0.0 => {
                plain(Grader::Number { tolerance })
            }
            "number" => Err(format!("tolerance {tolerance} is not a number ≥ 0")),
            "mcq" => plain(Grader::Mcq),
            "regex" => {
                let pattern = needs("a pattern")?;
                regex::Regex::new(&pattern)
                    .map(Grader::Regex)
                    .map_err(|e| format!("grader regex: {e}"))
            }
            "cmd" => needs("a program").map(Grader::Cmd),
            "llm" => needs("a model").map(Grader::Llm),
            other => Err(format!(
                "no grader {other:?}: exact, contains, number, mcq, regex:PATTERN, \
                 cmd:PROGRAM or llm:MODEL"
            )),
        }
    }
}

impl fmt::Display for Grader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grader::Exact => f.write_str("exact"),
            Grader::Contains => f.write_str("contains"),
            Grader::Number { .. } => f.write_str("number"),
            Grader::Mcq => f.write_str("mcq"),
            Grader::Regex(r) => write!(f, "regex:{}", r.as_str()),
            Grader::Cmd(p) => write!(f, "cmd:{p}"),
            Grader::Llm(m) => write!(f, "llm:{m}"),
        }
    }
}

/// What a grader decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Correct,
    Incorrect,
    Unevaluated,
}

/// A verdict, what it was read from, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    pub grader: String,
    /// What the grader read from the answer: the number, the letter, the normalised text.
    pub extracted: Option<String>,
    pub verdict: Verdict,
    pub why: String,
}

/// Grades `answer` against `reference` with a pure grader; `None` for `cmd:` and `llm:`, which
/// their callers run.
pub fn grade(grader: &Grader, answer: &str, reference: Option<&str>) -> Option<Grade> {
    let name = grader.to_string();
    let made = |extracted: Option<String>, verdict: Verdict, why: String| Grade {
        grader: name.clone(),
        extracted,
        verdict,
        why,
    };
    let no_reference = || {
        made(
            None,
            Verdict::Unevaluated,
            "no reference answer to grade against".into(),
        )
    };
    Some(match grader {
        Grader::Exact | Grader::Contains => {
            let Some(reference) = reference else {
                return Some(no_reference());
            };
            let (got, want) = (normalise(answer), normalise(reference));
            if want.is_empty() {
                made(
                    Some(got),
                    Verdict::Unevaluated,
                    "the reference is empty".into(),
                )
            } else if matches!(grader, Grader::Exact) && got == want {
                made(
                    Some(got),
                    Verdict::Correct,
                    format!("the answer is {want:?}"),
                )
            } else if matches!(grader, Grader::Contains) && got.contains(&want) {
                made(
                    Some(got),
                    Verdict::Correct,
                    format!("the answer holds {want:?}"),
                )
            } else if matches!(grader, Grader::Exact) {
                made(
                    Some(got),
                    Verdict::Incorrect,
                    format!("the answer is not {want:?}"),
                )
            } else {
                made(
                    Some(got),
                    Verdict::Incorrect,
                    format!("the answer lacks {want:?}"),
                )
            }
        }
        Grader::Number { tolerance } => {
            let Some(reference) = reference else {
                return Some(no_reference());
            };
            let Some(want) = gsm8k_reference(reference).or_else(|| last_number(reference)) else {
                return Some(made(
                    None,
                    Verdict::Unevaluated,
                    format!("no number in the reference {reference:?}"),
                ));
            };
            match last_number(answer) {
                None => made(None, Verdict::Incorrect, "no number in the answer".into()),
                Some(got) if (got - want).abs() <= *tolerance => made(
                    Some(format_number(got)),
                    Verdict::Correct,
                    format!("its last number is {}", format_number(want)),
                ),
                Some(got) => made(
                    Some(format_number(got)),
                    Verdict::Incorrect,
                    format!(
                        "its last number is {}, not {}",
                        format_number(got),
                        format_number(want)
                    ),
                ),
            }
        }
        Grader::Mcq => {
            let Some(want) = reference.and_then(|r| mcq_letter(r.trim())) else {
                return Some(made(
                    None,
                    Verdict::Unevaluated,
                    "the reference is not a letter A–J".into(),
                ));
            };
            match mcq_letter(answer) {
                None => made(None, Verdict::Incorrect, "no letter A–J chosen".into()),
                Some(got) if got == want => made(
                    Some(got.to_string()),
                    Verdict::Correct,
                    format!("it chose {got}"),
                ),
                Some(got) => made(
                    Some(got.to_string()),
                    Verdict::Incorrect,
                    format!("it chose {got}, not {want}"),
                ),
            }
        }
        Grader::Regex(pattern) => match pattern.find(answer) {
            Some(m) => made(
                Some(m.as_str().to_string()),
                Verdict::Correct,
                format!("it matches /{}/", pattern.as_str()),
            ),
            None => made(
                None,
                Verdict::Incorrect,
                format!("it does not match /{}/", pattern.as_str()),
            ),
        },
        Grader::Cmd(_) | Grader::Llm(_) => return None,
    })
}

/// `17`, `0.5`, `-3`: a whole number without its `.0`.
fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests;
