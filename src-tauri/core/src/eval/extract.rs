//! What graders read from an answer: a normalised text, its last number, the letter it chose.

use std::sync::LazyLock;

/// Lower case, every run of white space one space, trimmed.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The last number in `text`: `17` in "the answer is not 18 but 17", `1234.5` in "$1,234.50.".
/// Thousands are grouped by commas only when three digits follow each; a minus sign counts
/// where it stands right before the digits and after no letter or digit.
pub fn last_number(text: &str) -> Option<f64> {
    static NUMBER: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"(^|[^0-9A-Za-z.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?").ok()
    });
    let re = NUMBER.as_ref()?;
    let mut last = None;
    for c in re.captures_iter(text) {
        let digits = c.get(3).map_or("", |m| m.as_str()).replace(',', "");
        let fraction = c.get(4).map_or("", |m| m.as_str());
        let sign = c.get(2).map_or("", |m| m.as_str());
        if let Ok(n) = format!("{sign}{digits}{fraction}").parse::<f64>() {
            last = Some(n);
        }
    }
    last
}

/// A GSM8K reference's answer: the number after `####`.
pub fn gsm8k_reference(reference: &str) -> Option<f64> {
    let (_, after) = reference.rsplit_once("####")?;
    last_number(after.lines().next().unwrap_or_default())
}

/// The letter A–J an answer chooses: the last "answer: X", "answer is (X)"; else, on its final
/// non-empty line, the last "(X)", or the line being the letter alone ("C", "C.", "C)").
pub fn mcq_letter(text: &str) -> Option<char> {
    static STATED: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"(?i:answer)\s*(?:(?i:is)\s*)?[:：]?\s*\(?([A-J])\)?(?:[^A-Za-z0-9]|$)")
            .ok()
    });
    static BRACKETED: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"\(([A-J])\)").ok());
    static ALONE: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"^\W*([A-J])\W*$").ok());
    let letter = |c: regex::Captures<'_>| c.get(1).and_then(|m| m.as_str().chars().next());
    if let Some(c) = STATED.as_ref()?.captures_iter(text).last() {
        return letter(c);
    }
    let last_line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    if let Some(c) = BRACKETED.as_ref()?.captures_iter(last_line).last() {
        return letter(c);
    }
    ALONE.as_ref()?.captures(last_line).and_then(letter)
}
