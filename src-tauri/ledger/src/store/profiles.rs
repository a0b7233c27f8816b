//! Graded profiles (v18): `profiles`, one row per `wattbar-cli profile` run: when it ended, the
//! evaluation, the model, the machine, the energy's sources and the graders (JSON arrays,
//! sorted), the counts and the figures that choose a model ([`wattbar_core::eval::best`]), and
//! the whole `summary.json` beside them. Written in the engine's batch, never pruned: a profile
//! is the evidence of a choice.
//!
//! Limits, checked before anything is kept ([`StoredProfile::from_summary`]): every name (the
//! evaluation, label, model, machine, each source and grader) is at most [`MAX_NAME_CHARS`]
//! characters with no control character, and the evaluation is named; the time is after [`EARLIEST_AT`]; the counts at most
//! [`MAX_QUERIES`].

use super::{Store, StoreError};
use rusqlite::{params, Connection};
use wattbar_core::eval::best::KeptProfile;
use wattbar_core::eval::compare::Run;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE profiles (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
                       eval TEXT NOT NULL, model TEXT NOT NULL, label TEXT NOT NULL,
                       machine TEXT, sources TEXT NOT NULL, graders TEXT NOT NULL,
                       queries INTEGER NOT NULL, correct INTEGER NOT NULL,
                       incorrect INTEGER NOT NULL, accuracy REAL, joules_per_query REAL,
                       joules_per_correct REAL, intelligence_per_joule REAL,
                       itl_seconds_median REAL, summary TEXT NOT NULL);
CREATE INDEX profiles_eval ON profiles (eval, at);
"#;

/// The first schema that keeps profiles.
const SINCE: i64 = 18;

/// The longest name a profile may give (a model's full path on Hugging Face is under 100).
pub const MAX_NAME_CHARS: usize = 200;

/// No profile ended before 2020-01-01 (Unix seconds): Wattbar did not exist.
pub const EARLIEST_AT: f64 = 1_577_836_800.0;

/// The most queries one profile may count.
pub const MAX_QUERIES: u64 = 10_000_000;

/// `text` as a name of `what`: at most [`MAX_NAME_CHARS`] characters, none of them a control
/// character (a name is shown in tables and terminals).
fn name(what: &str, text: &str) -> Result<(), String> {
    let chars = text.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(format!(
            "{what} has {chars} characters, more than {MAX_NAME_CHARS}"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{what} holds a control character"));
    }
    Ok(())
}

/// A profile as the ledger keeps it: its figures and its whole summary.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredProfile {
    pub profile: KeptProfile,
    /// `summary.json` as the profile wrote it.
    pub summary: String,
}

impl StoredProfile {
    /// The profile a run's `summary.json` describes: of evaluation `eval`, called `label` (the
    /// model where absent), ended at `at`. Refused, with the reason, where the summary gives no
    /// count of queries.
    pub fn from_summary(
        eval: String,
        label: Option<String>,
        at: f64,
        summary: &serde_json::Value,
    ) -> Result<StoredProfile, String> {
        if !(at.is_finite() && at >= EARLIEST_AT) {
            return Err(format!("at ({at}) is before 2020"));
        }
        let queries = summary["queries"]
            .as_u64()
            .ok_or("the summary has no count of queries")?;
        if queries > MAX_QUERIES {
            return Err(format!("{queries} queries, more than {MAX_QUERIES}"));
        }
        // A figure the summary gives must be one: read strictly here, where a figure out of
        // range would otherwise be kept as unknown.
        for key in [
            "avg_per_query_energy_joules",
            "joules_per_correct_answer",
            "intelligence_per_joule",
            "itl_seconds_median",
        ] {
            if let Some(v) = summary[key].as_f64().filter(|v| *v < 0.0) {
                return Err(format!("{key} is {v}, below 0"));
            }
            if !(summary[key].is_null() || summary[key].is_number()) {
                return Err(format!("{key} is not a number"));
            }
        }
        if let Some(a) = summary["accuracy"]
            .as_f64()
            .filter(|a| !(0.0..=1.0).contains(a))
        {
            return Err(format!("accuracy {a} is not a fraction"));
        }
        let model = summary["model"].as_str().unwrap_or_default();
        let label = label.unwrap_or_else(|| model.to_string());
        let run = Run::from_summary(label, summary);
        if eval.trim().is_empty() {
            return Err("the evaluation has no name".into());
        }
        name("the evaluation", &eval)?;
        name("the label", &run.label)?;
        name("the model", &run.model)?;
        if let Some(machine) = &run.machine {
            name("the machine", machine)?;
        }
        for source in &run.sources {
            name("a source", source)?;
        }
        for grader in &run.graders {
            name("a grader", grader)?;
        }
        Ok(StoredProfile {
            profile: KeptProfile {
                at,
                eval,
                queries,
                run,
            },
            summary: summary.to_string(),
        })
    }
}

/// A list as kept: a JSON array, since a grader's name (`regex:\d{1,3}`, `cmd:a,b`) may hold
/// any character.
fn joined(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

fn split(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

/// The energy's scope the kept `summary.json` names (`energy.scope`); `None` where it names none.
fn scope_of(summary: &str) -> Option<wattbar_core::Scope> {
    let s: serde_json::Value = serde_json::from_str(summary).ok()?;
    s["energy"]["scope"]
        .as_str()
        .and_then(wattbar_core::Scope::named)
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Adds `p`; `conn` is the batch's transaction.
pub(super) fn put(conn: &Connection, p: &StoredProfile) -> rusqlite::Result<()> {
    let k = &p.profile;
    let r = &k.run;
    conn.prepare_cached(
        "INSERT INTO profiles (at, eval, model, label, machine, sources, graders, queries,
           correct, incorrect, accuracy, joules_per_query, joules_per_correct,
           intelligence_per_joule, itl_seconds_median, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        k.at,
        k.eval,
        r.model,
        r.label,
        r.machine,
        joined(&r.sources),
        joined(&r.graders),
        count(k.queries),
        count(r.correct),
        count(r.incorrect),
        r.accuracy,
        r.avg_per_query_energy_joules,
        r.joules_per_correct_answer,
        r.intelligence_per_joule,
        r.itl_seconds_median,
        p.summary,
    ])?;
    Ok(())
}

impl Store {
    /// Every profile kept, oldest first; none in a ledger from before profiles were kept.
    pub fn profiles(&self) -> Result<Vec<StoredProfile>, StoreError> {
        if self.version < SINCE {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT at, eval, model, label, machine, sources, graders, queries, correct,
                        incorrect, accuracy, joules_per_query, joules_per_correct,
                        intelligence_per_joule, itl_seconds_median, summary
                 FROM profiles ORDER BY at, id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                let n = |i: usize| r.get::<_, i64>(i).map(|v| u64::try_from(v).unwrap_or(0));
                Ok(StoredProfile {
                    profile: KeptProfile {
                        at: r.get(0)?,
                        eval: r.get(1)?,
                        queries: n(7)?,
                        run: Run {
                            model: r.get(2)?,
                            label: r.get(3)?,
                            machine: r.get(4)?,
                            sources: split(&r.get::<_, String>(5)?),
                            graders: split(&r.get::<_, String>(6)?),
                            scope: scope_of(&r.get::<_, String>(15)?),
                            correct: n(8)?,
                            incorrect: n(9)?,
                            accuracy: r.get(10)?,
                            avg_per_query_energy_joules: r.get(11)?,
                            joules_per_correct_answer: r.get(12)?,
                            intelligence_per_joule: r.get(13)?,
                            itl_seconds_median: r.get(14)?,
                        },
                    },
                    summary: r.get(15)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests {
    use super::StoredProfile;
    use crate::ledger::Ledger;
    use crate::store::{Store, DB_FILE};
    use wattbar_core::eval::best::KeptProfile;
    use wattbar_core::eval::compare::Run;

    fn profile(model: &str, at: f64, correct: u64, joules: Option<f64>) -> StoredProfile {
        StoredProfile {
            profile: KeptProfile {
                at,
                eval: "gsm8k-test-first40".into(),
                queries: 10,
                run: Run {
                    label: format!("{model}-run"),
                    model: model.into(),
                    machine: Some("desk".into()),
                    sources: vec!["proc-stat".into(), "rapl".into()],
                    graders: vec!["cmd:grade --ok 0,1".into(), "regex:\\d{1,3}".into()],
                    scope: None,
                    correct,
                    incorrect: 10 - correct,
                    accuracy: Some(correct as f64 / 10.0),
                    avg_per_query_energy_joules: joules,
                    joules_per_correct_answer: joules
                        .filter(|_| correct > 0)
                        .map(|j| j * 10.0 / correct as f64),
                    intelligence_per_joule: joules.map(|j| correct as f64 / 10.0 / j),
                    itl_seconds_median: Some(0.0066),
                },
            },
            summary: format!("{{\"model\":\"{model}\"}}"),
        }
    }

    #[test]
    fn profiles_survive_a_restart_field_for_field_with_unknown_figures_kept_unknown() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(DB_FILE);
        let kept = [
            profile("smollm2", 1_000.0, 1, Some(12.3)),
            profile("smollm2-q4", 2_000.0, 0, None),
        ];
        {
            let (mut ledger, _) =
                Ledger::open(&path, 900.0, "EUR").unwrap_or_else(|e| panic!("{e}"));
            for p in &kept {
                ledger.record_profile(p.clone());
            }
            ledger
                .flush(0.0, 0.0, 2_001.0)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let store = Store::open_read_only(&path).unwrap_or_else(|e| panic!("{e}"));
        let read = store.profiles().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read, kept);
        // No correct answer: no J per correct answer, never 0 or infinite.
        assert_eq!(read[1].profile.run.joules_per_correct_answer, None);
        // Graders whose names hold commas come back whole.
        assert_eq!(read[0].profile.run.graders.len(), 2);
    }

    #[test]
    fn a_summary_whose_figures_are_out_of_range_is_refused_not_kept_as_unknown() {
        let at = |summary: serde_json::Value| {
            StoredProfile::from_summary("gsm8k".into(), None, 1_796_000_000.0, &summary)
        };
        let ok = serde_json::json!({"model": "m", "queries": 4, "correct": 1, "incorrect": 3,
            "accuracy": 0.25, "avg_per_query_energy_joules": 12.0});
        assert_eq!(at(ok).map(|p| p.profile.run.accuracy), Ok(Some(0.25)));
        for (key, bad) in [
            ("accuracy", serde_json::json!(1.5)),
            ("avg_per_query_energy_joules", serde_json::json!(-3.0)),
            ("itl_seconds_median", serde_json::json!("fast")),
        ] {
            let mut s = serde_json::json!({"model": "m", "queries": 4});
            s[key] = bad;
            assert!(at(s).is_err(), "{key}");
        }
        assert!(
            at(serde_json::json!({"model": "m"})).is_err(),
            "no count of queries"
        );
    }

    #[test]
    fn names_with_control_characters_or_past_200_characters_and_absurd_times_are_refused() {
        let summary = |model: &str| serde_json::json!({"model": model, "queries": 4});
        let keep = |eval: &str, label: Option<&str>, at: f64, model: &str| {
            StoredProfile::from_summary(eval.into(), label.map(str::to_string), at, &summary(model))
                .map(|p| p.profile.run.label)
        };
        let now = 1_796_000_000.0;
        assert_eq!(keep("gsm8k", None, now, "smollm2"), Ok("smollm2".into()));
        let long = "m".repeat(200);
        assert_eq!(
            keep("gsm8k", None, now, &long),
            Ok(long.clone()),
            "200 is room"
        );
        let refused = [
            keep("gsm8k", None, now, &format!("{long}m")),
            keep("gsm8k", Some("run\x1b[2J"), now, "m"),
            keep("gsm\nfake line", None, now, "m"),
            keep("gsm8k", None, now, "model\u{7f}"),
            keep("", None, now, "m"),
            keep("gsm8k", None, 0.0, "m"),
            keep("gsm8k", None, f64::NAN, "m"),
            keep("gsm8k", None, -1e300, "m"),
        ];
        for (i, r) in refused.iter().enumerate() {
            assert!(r.is_err(), "case {i} was kept: {r:?}");
        }
        let many = serde_json::json!({"model": "m", "queries": u64::MAX});
        assert!(StoredProfile::from_summary("e".into(), None, now, &many).is_err());
    }
}
