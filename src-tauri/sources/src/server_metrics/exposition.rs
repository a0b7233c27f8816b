//! Prometheus' text exposition, read leniently: `name{label="value",…} value [timestamp]` per
//! line, `#` comments, blank lines.
//!
//! Rules:
//! - A line that is not a sample is skipped and counted, never fatal: one odd line of a server
//!   must not hide its token counters. A final line without its newline is read.
//! - Label values are unescaped (`\\`, `\"`, `\n`); names and values borrow from the text, so a
//!   scrape allocates only for escaped values and the list of labels.
//! - Values are Prometheus' floats: `Nan`, `+Inf` and `-Inf` included; a timestamp is ignored.
//!
//! Written here rather than taken from `prometheus-parse`: that crate brings `regex` into the
//! daemon and owns every string of every sample, where a scrape once a window should cost next to
//! nothing.

use std::borrow::Cow;

/// A sample's labels: name and value, in the order written.
pub type Labels<'a> = Vec<(&'a str, Cow<'a, str>)>;

/// One sample of an exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: Labels<'a>,
    pub value: f64,
}

impl Sample<'_> {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// The samples of `text`, and how many lines were neither a sample, a comment nor blank.
pub fn samples(text: &str) -> (Vec<Sample<'_>>, usize) {
    let mut out = Vec::new();
    let mut skipped = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match sample(line) {
            Some(s) => out.push(s),
            None => skipped += 1,
        }
    }
    (out, skipped)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// One line as a sample; `None` when it is not one.
fn sample(line: &str) -> Option<Sample<'_>> {
    let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut rest = line[name_end..].trim_start();
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        let (parsed, after) = label_set(inside)?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    Some(Sample {
        name,
        labels,
        value: number(value)?,
    })
}

/// The labels up to the closing brace, and what follows it.
fn label_set(mut text: &str) -> Option<(Labels<'_>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Some((labels, after));
        }
        let key_end = text.find(|c: char| !is_name_char(c))?;
        let key = &text[..key_end];
        let after_eq = text[key_end..].trim_start().strip_prefix('=')?;
        let quoted = after_eq.trim_start().strip_prefix('"')?;
        let (value, after) = quoted_value(quoted)?;
        labels.push((key, value));
        text = after.trim_start();
        text = text.strip_prefix(',').unwrap_or(text);
    }
}

/// A label value up to its closing quote, unescaped, and what follows the quote.
fn quoted_value(text: &str) -> Option<(Cow<'_, str>, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => {
                let raw = &text[..i];
                let value = if raw.contains('\\') {
                    Cow::Owned(unescape(raw))
                } else {
                    Cow::Borrowed(raw)
                };
                return Some((value, &text[i + 1..]));
            }
            _ => escaped = false,
        }
    }
    None
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A sample's value as Prometheus writes it.
fn number(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" | "Nan" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_and_without_labels_escapes_and_a_timestamp_are_read() {
        let text =
            "# HELP x y\nup 1\nreqs_total{path=\"/a\\\"b\",code=\"200\"} 3.5e+02 1700000000\n\
                    \n  spaced { a = \"1\" , } -Inf\nlast{m=\"x\\\\y\\nz\"} NaN";
        let (s, skipped) = samples(text);
        assert_eq!(skipped, 0);
        assert_eq!(s.len(), 4);
        assert_eq!((s[0].name, s[0].value), ("up", 1.0));
        assert_eq!(s[1].label("path"), Some("/a\"b"));
        assert_eq!(s[1].label("code"), Some("200"));
        assert_eq!(s[1].value, 350.0);
        assert_eq!(s[2].label("a"), Some("1"));
        assert_eq!(s[2].value, f64::NEG_INFINITY);
        assert_eq!(s[3].label("m"), Some("x\\y\nz"));
        assert!(s[3].value.is_nan());
    }

    #[test]
    fn lines_that_are_no_sample_are_counted_and_the_rest_kept() {
        let (s, skipped) =
            samples("ok 1\n{a=\"b\"} 2\nno_value\nbad{a=\"b\" 3\n9lives 1\nx two\nok2 2");
        assert_eq!(skipped, 5);
        assert_eq!(s.iter().map(|s| s.name).collect::<Vec<_>>(), ["ok", "ok2"]);
    }
}
