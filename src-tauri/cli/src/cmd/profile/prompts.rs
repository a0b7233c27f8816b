//! The prompts file: Wattbar's own lines, or GSM8K's as they are.

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// How the prompts file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `{"prompt", "id"?, "answer"?, "grader"?}` a line.
    Wattbar,
    /// GSM8K's `{"question", "answer"}` a line, the answer's last line `#### N`.
    Gsm8k,
}

/// One line of the prompts file.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub id: Value,
    pub prompt: String,
    /// The reference answer.
    pub answer: Option<String>,
    /// This line's own grader, where it names one.
    pub grader: Option<String>,
}

/// Reads a prompts file written as `format`. The id is the line's `id`, else its line number.
/// Blank lines are skipped; anything else is an error naming its line.
pub fn parse_prompts(text: &str, format: Format) -> Result<Vec<Prompt>> {
    let (prompt_key, answer_key) = match format {
        Format::Wattbar => ("prompt", "answer"),
        Format::Gsm8k => ("question", "answer"),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).with_context(|| format!("line {n}: not JSON"))?;
        let Some(prompt) = v[prompt_key].as_str().filter(|p| !p.trim().is_empty()) else {
            bail!("line {n}: no {prompt_key:?} string");
        };
        let text_of = |key: &str| match &v[key] {
            Value::Null => Ok(None),
            Value::String(a) => Ok(Some(a.clone())),
            other => bail!("line {n}: {key:?} is {other}, not a string"),
        };
        let answer = text_of(answer_key)?;
        if format == Format::Gsm8k && answer.is_none() {
            bail!("line {n}: no \"answer\" string");
        }
        out.push(Prompt {
            id: match &v["id"] {
                Value::Null => Value::from(n),
                id => id.clone(),
            },
            prompt: prompt.to_string(),
            answer,
            grader: text_of("grader")?,
        });
    }
    if out.is_empty() {
        bail!("no prompts");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompts_are_read_whole_and_a_bad_line_is_named() {
        let p = parse_prompts(
            "{\"prompt\":\"Say hi\",\"id\":\"a\",\"answer\":\"hi\",\"grader\":\"exact\"}\n\n\
             {\"prompt\":\"Count\"}\n",
            Format::Wattbar,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.len(), 2);
        assert_eq!(
            (
                p[0].id.clone(),
                p[0].answer.as_deref(),
                p[0].grader.as_deref()
            ),
            (json!("a"), Some("hi"), Some("exact"))
        );
        // Without an id, the line number (blank lines count).
        assert_eq!(p[1].id, json!(3));
        for (text, why) in [
            ("{\"prompt\":\"ok\"}\nnot json\n", "line 2: not JSON"),
            ("{\"id\":1}\n", "line 1: no \"prompt\""),
            (
                "{\"prompt\":\"x\",\"answer\":4}\n",
                "line 1: \"answer\" is 4",
            ),
            (
                "{\"prompt\":\"x\",\"grader\":[]}\n",
                "line 1: \"grader\" is []",
            ),
            ("\n\n", "no prompts"),
        ] {
            match parse_prompts(text, Format::Wattbar) {
                Ok(p) => panic!("{text:?} was taken: {p:?}"),
                Err(e) => assert!(e.to_string().contains(why), "{e} lacks {why}"),
            }
        }
    }

    #[test]
    fn gsm8k_lines_are_taken_as_they_are() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/evals/gsm8k-test-first40.jsonl");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let p = parse_prompts(&text, Format::Gsm8k).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.len(), 40);
        assert!(p[0]
            .prompt
            .starts_with("Janet’s ducks lay 16 eggs per day."));
        assert!(p[0]
            .answer
            .as_deref()
            .is_some_and(|a| a.ends_with("#### 18")));
        assert_eq!((p[0].id.clone(), p[39].id.clone()), (json!(1), json!(40)));
        assert!(parse_prompts("{\"question\":\"q\"}\n", Format::Gsm8k).is_err());
        assert!(parse_prompts("{\"prompt\":\"q\",\"answer\":\"1\"}\n", Format::Gsm8k).is_err());
    }
}
