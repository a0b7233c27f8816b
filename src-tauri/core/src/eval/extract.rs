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
/// Commas group thousands only where each group after the first has three digits ("12,3456" is
/// 12 and 3456); a minus sign counts where it stands right before the digits and after no letter
/// or digit.
pub fn last_number(text: &str) -> Option<f64> {
    static NUMBER: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"(^|[^0-9A-Za-z.])(-?)(\d+(?:,\d+)*)(\.\d+)?").ok());
    let re = NUMBER.as_ref()?;
    let mut last = None;
    for c in re.captures_iter(text) {
        let sign = c.get(2).map_or("", |m| m.as_str());
        let digits = c.get(3).map_or("", |m| m.as_str());
        let fraction = c.get(4).map_or("", |m| m.as_str());
        let groups: Vec<&str> = digits.split(',').collect();
        let grouped = groups[0].len() <= 3 && groups[1..].iter().all(|g| g.len() == 3);
        let text = match groups.last() {
            // Not thousands: a list, whose last member is the last number.
            Some(last_group) if groups.len() > 1 && !grouped => format!("{last_group}{fraction}"),
            _ => format!("{sign}{}{fraction}", digits.replace(',', "")),
        };
        if let Ok(n) = text.parse::<f64>() {
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
/// non-empty line, the last "(X)", or the line being the letter alone ("C", "C.", "C)"). A bare
/// "I" followed by a word is the pronoun ("the answer I got is (C)"), not a choice.
pub fn mcq_letter(text: &str) -> Option<char> {
    static STATED: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(
            r"(?i:answer)\s*(?:(?i:is)\s*)?[:：]?\s*(?:\(([A-J])\)|([A-J])(?:[^A-Za-z0-9]|$))",
        )
        .ok()
    });
    static BRACKETED: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"\(([A-J])\)").ok());
    static ALONE: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"^\W*([A-J])\W*$").ok());
    let first = |m: regex::Match<'_>| m.as_str().chars().next();
    let stated = STATED.as_ref()?.captures_iter(text).filter_map(|c| {
        if let Some(m) = c.get(1) {
            return first(m);
        }
        let m = c.get(2)?;
        // "I" then a space and a word: the pronoun.
        let after = &text[m.end()..];
        let pronoun = m.as_str() == "I"
            && after.starts_with(' ')
            && after[1..].starts_with(|ch: char| ch.is_ascii_lowercase());
        if pronoun {
            None
        } else {
            first(m)
        }
    });
    if let Some(letter) = stated.last() {
        return Some(letter);
    }
    let last_line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    if let Some(c) = BRACKETED.as_ref()?.captures_iter(last_line).last() {
        return c.get(1).and_then(first);
    }
    ALONE
        .as_ref()?
        .captures(last_line)
        .and_then(|c| c.get(1))
        .and_then(first)
}
