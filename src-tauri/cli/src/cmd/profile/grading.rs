//! Each answer graded as it comes: the pure graders of [`wattbar_core::eval`], and `cmd:`, a
//! program given the record as JSON on stdin.
//!
//! Rule: a `cmd:` grader runs a shell command, so a prompts file that names one is code. It runs
//! only when the person asked for it (`--allow-cmd-grader`); otherwise every grader is checked
//! before anything is sent, and the profile is refused, saying which line and why.

use anyhow::{bail, Result};
use std::process::Command;
use std::time::Duration;
use wattbar_core::eval::judge;
use wattbar_core::eval::{grade, Grade, Grader, Verdict};
use wattbar_sources::tool::run_bounded;

/// How long a `cmd:` grader may take over one answer before it is unevaluated.
const CMD_TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a `cmd:` grader's output read: its first line is what it extracted.
const MAX_CMD_OUTPUT_BYTES: usize = 4096;

/// The graders of a profile: the one asked for, and each line's own.
pub struct Graders {
    default: Grader,
    tolerance: f64,
    /// `--allow-cmd-grader`: whether a `cmd:` grader may run.
    allow_cmd: bool,
}

impl Graders {
    /// `name`: `--grader`; none: `number` for GSM8K, else `contains`. `allow_cmd`:
    /// `--allow-cmd-grader`.
    pub fn new(
        name: Option<&str>,
        gsm8k: bool,
        tolerance: f64,
        allow_cmd: bool,
    ) -> Result<Graders> {
        let name = name.unwrap_or(if gsm8k { "number" } else { "contains" });
        let default = Grader::parse(name, tolerance).map_err(anyhow::Error::msg)?;
        let graders = Graders {
            default,
            tolerance,
            allow_cmd,
        };
        graders.permitted(&graders.default)?;
        Ok(graders)
    }

    /// Refuses a grader that runs a program when nobody allowed one.
    fn permitted(&self, grader: &Grader) -> Result<()> {
        if matches!(grader, Grader::Cmd(_)) && !self.allow_cmd {
            bail!(
                "grader {grader} runs a shell command: refused without --allow-cmd-grader \
                 (a prompts file from elsewhere is code when it names one)"
            );
        }
        Ok(())
    }

    /// Checks a line's own grader before anything is sent.
    pub fn check(&self, line: Option<&str>) -> Result<()> {
        self.grader(line).map(|_| ())
    }

    /// The grader of a line: its own, else the profile's.
    pub fn grader(&self, line: Option<&str>) -> Result<Grader> {
        let grader = match line {
            None => self.default.clone(),
            Some(name) => Grader::parse(name, self.tolerance).map_err(anyhow::Error::msg)?,
        };
        self.permitted(&grader)?;
        Ok(grader)
    }

    /// The grade of `response` against `reference`; `record`: the query's record, for `cmd:`.
    pub fn grade(
        &self,
        line: Option<&str>,
        response: &str,
        reference: Option<&str>,
        record: &serde_json::Value,
    ) -> Result<Grade> {
        let grader = self.grader(line)?;
        if let Some(g) = grade(&grader, response, reference) {
            return Ok(g);
        }
        let Grader::Cmd(program) = &grader else {
            bail!("grader {grader} cannot be run here");
        };
        Ok(run_cmd(&grader.to_string(), program, record))
    }
}

/// Grades `response` to `question` with grader model `judge`, asked the same way as the
/// profiled model (temperature 0, with [`judge::room`] for the reference's answer): what it read, and the
/// record of its own request. A grader model that fails leaves the answer unevaluated, and
/// says why.
pub(crate) async fn ask_judge(
    asked: &super::asked::Asked<'_>,
    judge: &str,
    question: &str,
    response: &str,
    reference: Option<&str>,
    tolerance: f64,
    seen: &mut Vec<u64>,
) -> (Grade, Option<super::asked::GraderRecord>) {
    let name = format!("llm:{judge}");
    let unevaluated = |why: String| Grade {
        grader: name.clone(),
        extracted: None,
        verdict: Verdict::Unevaluated,
        why,
    };
    let Some(reference) = reference else {
        return (
            unevaluated("no reference answer to grade against".into()),
            None,
        );
    };
    let Some(wanted) = judge::wanted(reference) else {
        return (judge::grade_read(judge, "", reference, tolerance), None);
    };
    let sampling = super::ask::Sampling {
        max_tokens: Some(judge::room(reference)),
        temperature: Some(0.0),
    };
    let prompt = judge::prompt(question, response, wanted);
    match asked.ask(judge, &prompt, sampling, seen).await {
        Ok((answer, record)) => (
            judge::grade_read(judge, &answer.text, reference, tolerance),
            Some(super::asked::GraderRecord {
                model: judge.to_string(),
                record_id: record.id,
                energy_joules: record.energy_joules,
                completion_tokens: record.completion_tokens,
                wall_seconds: record.wall_seconds,
            }),
        ),
        Err(e) => (unevaluated(format!("the grader model failed: {e:#}")), None),
    }
}

/// Runs `program` (through `sh -c`) with `record` on stdin: exit 0 correct, 1 incorrect,
/// anything else (or no exit within [`CMD_TIMEOUT`]) unevaluated. Its first line of output is
/// kept as what it extracted.
fn run_cmd(name: &str, program: &str, record: &serde_json::Value) -> Grade {
    let made = |verdict: Verdict, extracted: Option<String>, why: String| Grade {
        grader: name.to_string(),
        extracted,
        verdict,
        why,
    };
    let ran = run_bounded(
        Command::new("sh").args(["-c", program]),
        Some(format!("{record}\n").into_bytes()),
        CMD_TIMEOUT,
        MAX_CMD_OUTPUT_BYTES,
    );
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => return made(Verdict::Unevaluated, None, format!("{program}: {e}")),
    };
    let status = ran.status;
    let said = String::from_utf8_lossy(&ran.stdout)
        .lines()
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from);
    match status.and_then(|s| s.code()) {
        Some(0) => made(Verdict::Correct, said, format!("{program} exited 0")),
        Some(1) => made(Verdict::Incorrect, said, format!("{program} exited 1")),
        Some(code) => made(
            Verdict::Unevaluated,
            said,
            format!("{program} exited {code}"),
        ),
        None if status.is_some() => made(
            Verdict::Unevaluated,
            said,
            format!("{program} was killed by a signal"),
        ),
        None => made(
            Verdict::Unevaluated,
            said,
            format!(
                "{program} gave no verdict within {} s",
                CMD_TIMEOUT.as_secs()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grading_program_says_by_its_exit_status_and_reads_the_record() {
        let g = Graders::new(Some("cmd:grep -q '\"response\":\"42\"'"), false, 0.0, true)
            .unwrap_or_else(|e| panic!("{e}"));
        let record = |r: &str| serde_json::json!({"response": r, "expected": "42"});
        let v = |r: &str| {
            g.grade(None, r, Some("42"), &record(r))
                .unwrap_or_else(|e| panic!("{e}"))
                .verdict
        };
        assert_eq!(v("42"), Verdict::Correct);
        assert_eq!(v("41"), Verdict::Incorrect);
        let broken =
            Graders::new(Some("cmd:exit 3"), false, 0.0, true).unwrap_or_else(|e| panic!("{e}"));
        let got = broken
            .grade(None, "x", None, &record("x"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (got.verdict, got.why.as_str()),
            (Verdict::Unevaluated, "exit 3 exited 3")
        );
    }

    #[test]
    fn a_grader_that_prints_20_mb_is_read_for_4_kib_and_its_verdict_stands() {
        let g = Graders::new(
            Some("cmd:head -c 20000000 /dev/zero | tr '\\0' 7; exit 0"),
            false,
            0.0,
            true,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let got = g
            .grade(None, "x", None, &serde_json::Value::Null)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.verdict, Verdict::Correct);
        assert_eq!(got.extracted.map(|e| e.len()), Some(MAX_CMD_OUTPUT_BYTES));
    }

    #[test]
    fn the_default_grader_follows_the_format_and_a_line_may_name_its_own() {
        let g = Graders::new(None, true, 0.0, false).unwrap_or_else(|e| panic!("{e}"));
        let record = serde_json::Value::Null;
        let got = g
            .grade(None, "so 18", Some("#### 18"), &record)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (got.grader.as_str(), got.verdict),
            ("number", Verdict::Correct)
        );
        let got = g
            .grade(Some("mcq"), "Answer: (B)", Some("B"), &record)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (got.grader.as_str(), got.verdict),
            ("mcq", Verdict::Correct)
        );
        assert!(g.check(Some("fuzzy")).is_err());
        // A grader model is asked by the profile itself (`ask_judge`), never by `grade`.
        let judged =
            Graders::new(Some("llm:judge"), false, 0.0, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(judged.grader(None), Ok(Grader::Llm(m)) if m == "judge"));
        assert!(judged.grade(None, "42", Some("42"), &record).is_err());
    }

    #[test]
    fn a_cmd_grader_runs_only_when_the_person_allowed_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let planted = dir.path().join("ran");
        let line = format!("cmd:touch {}", planted.display());
        let record = serde_json::Value::Null;
        // A downloaded prompts file naming a command: refused before anything runs.
        let plain = Graders::new(None, false, 0.0, false).unwrap_or_else(|e| panic!("{e}"));
        let refused = plain.check(Some(&line)).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("--allow-cmd-grader")),
            "{refused:?}"
        );
        assert!(plain.grade(Some(&line), "x", None, &record).is_err());
        assert!(Graders::new(Some(&line), false, 0.0, false).is_err());
        assert!(!planted.exists(), "nothing ran");
        // Allowed, the same line runs.
        let allowed = Graders::new(None, false, 0.0, true).unwrap_or_else(|e| panic!("{e}"));
        allowed.check(Some(&line)).unwrap_or_else(|e| panic!("{e}"));
        let _ = allowed.grade(Some(&line), "x", None, &record);
        assert!(planted.exists());
    }
}
