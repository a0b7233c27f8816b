//! Profile runs side by side: accuracy with its 95 % interval, energy per query and per correct
//! answer, and the efficient front.
//!
//! Rules:
//! - Runs are ranked only against runs of the same machine, energy sources and graders: a wall
//!   plug's joules and a GPU's, or `number` and `contains`, are not one scale. Each other set is
//!   its own group, and says what sets it apart.
//! - A run is on the efficient front of its group when no other run there is at least as
//!   accurate for at most its energy per query, and better in one of the two.
//! - A run whose accuracy or energy is unknown is listed, never ranked.

use serde::Serialize;
use serde_json::Value;

/// What a comparison needs of one run's `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Run {
    /// Where it was read from.
    pub label: String,
    pub model: String,
    pub machine: Option<String>,
    /// The energy's sources, sorted.
    pub sources: Vec<String>,
    /// The graders, sorted.
    pub graders: Vec<String>,
    /// What the energy covers (`energy.scope` of the summary); `None` where one scope was not
    /// recorded.
    #[serde(default)]
    pub scope: Option<crate::scope::Scope>,
    pub correct: u64,
    pub incorrect: u64,
    pub accuracy: Option<f64>,
    pub avg_per_query_energy_joules: Option<f64>,
    pub joules_per_correct_answer: Option<f64>,
    pub intelligence_per_joule: Option<f64>,
    pub itl_seconds_median: Option<f64>,
}

impl Run {
    /// The run a profile's `summary.json` describes, labelled `label`. Sources and graders are
    /// sorted, each once; a figure the summary lacks or gives as `null` is `None`.
    pub fn from_summary(label: String, s: &Value) -> Run {
        let strings = |v: &Value| -> Vec<String> {
            let mut out: Vec<String> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect();
            out.sort();
            out.dedup();
            out
        };
        Run {
            label,
            model: s["model"].as_str().unwrap_or_default().to_string(),
            machine: s["machine"].as_str().map(String::from),
            sources: strings(&s["sources"]),
            graders: strings(&s["graders"]),
            scope: s["energy"]["scope"]
                .as_str()
                .and_then(crate::scope::Scope::named),
            correct: s["correct"].as_u64().unwrap_or(0),
            incorrect: s["incorrect"].as_u64().unwrap_or(0),
            accuracy: s["accuracy"].as_f64().filter(|a| (0.0..=1.0).contains(a)),
            avg_per_query_energy_joules: finite(&s["avg_per_query_energy_joules"]),
            joules_per_correct_answer: finite(&s["joules_per_correct_answer"]),
            intelligence_per_joule: finite(&s["intelligence_per_joule"]),
            itl_seconds_median: finite(&s["itl_seconds_median"]),
        }
    }
}

/// A figure that is a finite number not below 0; `None` otherwise.
fn finite(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite() && *x >= 0.0)
}

/// A run as compared: its interval and whether it is on its group's front.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    #[serde(flatten)]
    pub run: Run,
    /// The accuracy's 95 % Wilson interval.
    pub accuracy_low: Option<f64>,
    pub accuracy_high: Option<f64>,
    pub efficient: bool,
}

/// Runs that may be ranked together, and what they share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub machine: Option<String>,
    pub sources: Vec<String>,
    pub graders: Vec<String>,
    pub runs: Vec<Ranked>,
}

/// The 95 % Wilson score interval of `correct` of `n`; `None` for no trial.
pub fn wilson(correct: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 || correct > n {
        return None;
    }
    const Z: f64 = 1.959_963_984_540_054;
    let (k, n) = (correct as f64, n as f64);
    let p = k / n;
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Groups `runs` by machine, sources and graders, in the order each first appears, each run
/// with its interval and its place on the front.
pub fn compare(runs: Vec<Run>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for run in runs {
        let (lo, hi) = wilson(run.correct, run.correct.saturating_add(run.incorrect)).unzip();
        let ranked = Ranked {
            run,
            accuracy_low: lo,
            accuracy_high: hi,
            efficient: false,
        };
        let r = &ranked.run;
        match groups
            .iter_mut()
            .find(|g| g.machine == r.machine && g.sources == r.sources && g.graders == r.graders)
        {
            Some(g) => g.runs.push(ranked),
            None => groups.push(Group {
                machine: r.machine.clone(),
                sources: r.sources.clone(),
                graders: r.graders.clone(),
                runs: vec![ranked],
            }),
        }
    }
    for g in &mut groups {
        let points: Vec<Option<(f64, f64)>> = g
            .runs
            .iter()
            .map(|r| r.run.accuracy.zip(r.run.avg_per_query_energy_joules))
            .collect();
        for (i, r) in g.runs.iter_mut().enumerate() {
            r.efficient = points[i].is_some_and(|(a, j)| {
                !points.iter().enumerate().any(|(k, other)| {
                    k != i && other.is_some_and(|(oa, oj)| oa >= a && oj <= j && (oa > a || oj < j))
                })
            });
        }
    }
    groups
}

/// What sets `g` apart from `first`, in words: "another machine (b)", "other sources (nvml)".
pub fn apart(first: &Group, g: &Group) -> String {
    let mut why = Vec::new();
    if g.machine != first.machine {
        why.push(format!(
            "another machine ({})",
            g.machine.as_deref().unwrap_or("unknown")
        ));
    }
    if g.sources != first.sources {
        why.push(format!("other energy sources ({})", g.sources.join(", ")));
    }
    if g.graders != first.graders {
        why.push(format!("other graders ({})", g.graders.join(", ")));
    }
    why.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, correct: u64, n: u64, joules: f64) -> Run {
        Run {
            label: label.into(),
            model: label.into(),
            machine: Some("m".into()),
            sources: vec!["rapl".into()],
            graders: vec!["number".into()],
            scope: None,
            correct,
            incorrect: n - correct,
            accuracy: Some(correct as f64 / n as f64),
            avg_per_query_energy_joules: Some(joules),
            joules_per_correct_answer: None,
            intelligence_per_joule: None,
            itl_seconds_median: None,
        }
    }

    #[test]
    fn wilson_matches_the_textbook_interval() {
        // 8 of 10: 0.4902 – 0.9433 (Wilson 1927; e.g. Newcombe 1998, table I, method 3).
        let (lo, hi) = wilson(8, 10).unwrap_or_default();
        assert!(
            (lo - 0.4902).abs() < 5e-5 && (hi - 0.9433).abs() < 5e-5,
            "{lo} {hi}"
        );
        // 0 of 10 never goes below 0, and is not a point.
        let (lo, hi) = wilson(0, 10).unwrap_or_default();
        assert!(lo.abs() < 1e-12 && (hi - 0.2775).abs() < 5e-5, "{lo} {hi}");
        assert_eq!(wilson(0, 0), None);
    }

    #[test]
    fn the_front_holds_the_runs_no_other_beats_on_both_counts() {
        // b is more accurate and cheaper than a; c is the most accurate, dearest; d is worse
        // than b on both.
        let groups = compare(vec![
            run("a", 5, 10, 20.0),
            run("b", 6, 10, 15.0),
            run("c", 9, 10, 40.0),
            run("d", 4, 10, 30.0),
        ]);
        assert_eq!(groups.len(), 1);
        let front: Vec<(&str, bool)> = groups[0]
            .runs
            .iter()
            .map(|r| (r.run.label.as_str(), r.efficient))
            .collect();
        assert_eq!(
            front,
            [("a", false), ("b", true), ("c", true), ("d", false)]
        );
    }

    #[test]
    fn runs_of_another_machine_or_grader_are_listed_apart_with_the_reason() {
        let mut other = run("gpu", 9, 10, 5.0);
        other.sources = vec!["nvml".into()];
        let mut graded = run("mcq", 9, 10, 5.0);
        graded.graders = vec!["mcq".into()];
        let groups = compare(vec![run("cpu", 5, 10, 20.0), other, graded]);
        assert_eq!(groups.len(), 3);
        // Each alone in its group, so each on its own front: never ranked against the others.
        assert!(groups
            .iter()
            .all(|g| g.runs.len() == 1 && g.runs[0].efficient));
        assert_eq!(apart(&groups[0], &groups[1]), "other energy sources (nvml)");
        assert_eq!(apart(&groups[0], &groups[2]), "other graders (mcq)");
        // Unknown energy: listed, not ranked.
        let mut blind = run("blind", 10, 10, 1.0);
        blind.avg_per_query_energy_joules = None;
        let g = compare(vec![run("x", 5, 10, 20.0), blind]);
        assert_eq!(
            g[0].runs.iter().map(|r| r.efficient).collect::<Vec<_>>(),
            [true, false]
        );
    }
}
