//! The cheapest model that is good enough: from the profiles kept, the model with the lowest
//! energy per query whose accuracy and inter-token latency meet the targets.
//!
//! Rules:
//! - One evaluation at a time: the one named, else the newest profile's. Accuracy on GSM8K and
//!   on a multiple-choice set are not one scale.
//! - Profiles are compared only within one group ([`super::compare`]: one machine, energy
//!   sources and graders): the newest profile's group among those of the evaluation. The
//!   others are listed with what sets them apart, never chosen.
//! - Per model, its newest profile counts, whatever its group; older ones are listed as
//!   superseded.
//! - A target set and a figure unknown is not met: an unknown accuracy, latency or energy never
//!   passes for a good one.
//! - Among the profiles that meet every target, the lowest mean energy per query wins; a tie
//!   goes to the more accurate. None met: no choice, and each profile says why.

use super::compare::{apart, compare, wilson, Run};
use serde::Serialize;

/// A profile kept in the ledger: a graded run of one model over one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct KeptProfile {
    /// When it ended, seconds since the Unix epoch.
    pub at: f64,
    /// The evaluation's name: the prompts file's stem unless `profile --eval` named it.
    pub eval: String,
    /// Prompts asked.
    pub queries: u64,
    #[serde(flatten)]
    pub run: Run,
}

/// What the chosen model must meet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Targets {
    /// The lowest accuracy, a fraction.
    pub min_accuracy: f64,
    /// Whether the accuracy that must reach `min_accuracy` is its 95 % Wilson lower bound, not
    /// the share measured: where a choice acts by itself (low-power mode's `auto` model), 7 of
    /// 10 right (a lower bound of 39.7 %) does not pass for 60 %.
    pub by_lower_bound: bool,
    /// The highest median inter-token latency, seconds, where set.
    pub max_itl_seconds: Option<f64>,
    /// The evaluation; `None`: the newest profile's.
    pub eval: Option<String>,
}

/// Accuracy ≥ 0.6 unless told: the "good enough" of `models --best`.
pub const DEFAULT_MIN_ACCURACY: f64 = 0.6;

impl Default for Targets {
    fn default() -> Self {
        Targets {
            min_accuracy: DEFAULT_MIN_ACCURACY,
            by_lower_bound: false,
            max_itl_seconds: None,
            eval: None,
        }
    }
}

/// One profile as weighed: whether it meets the targets, and why or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Weighed {
    #[serde(flatten)]
    pub profile: KeptProfile,
    /// The accuracy's 95 % Wilson interval.
    pub accuracy_low: Option<f64>,
    pub accuracy_high: Option<f64>,
    pub meets: bool,
    /// In words: what it missed, or that it meets every target.
    pub why: String,
}

/// The choice and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub targets: Targets,
    /// The evaluation weighed; `None` with no profile at all.
    pub eval: Option<String>,
    /// The model chosen; `None` where none meets the targets.
    pub chosen: Option<String>,
    /// Why there is no choice, where there is none.
    pub why_none: Option<String>,
    /// Every profile of the evaluation, the chosen first, then by energy per query.
    pub weighed: Vec<Weighed>,
}

/// Chooses among `profiles` (any order) for `targets`.
pub fn best(profiles: &[KeptProfile], targets: &Targets) -> Choice {
    let newest = |p: &&KeptProfile| p.at;
    let eval = targets.eval.clone().or_else(|| {
        profiles
            .iter()
            .max_by(|a, b| newest(a).total_cmp(&newest(b)))
            .map(|p| p.eval.clone())
    });
    let mut of_eval: Vec<&KeptProfile> = profiles
        .iter()
        .filter(|p| Some(&p.eval) == eval.as_ref())
        .collect();
    // Newest first: the group is the newest profile's, and a model's newest profile counts.
    of_eval.sort_by(|a, b| b.at.total_cmp(&a.at));
    let groups = compare(of_eval.iter().map(|p| p.run.clone()).collect());
    let first = groups.first();
    let mut weighed: Vec<Weighed> = Vec::new();
    let mut seen_models: Vec<&str> = Vec::new();
    for (p, g) in of_eval.iter().zip(group_of(&of_eval, &groups)) {
        let (lo, hi) = wilson(p.run.correct, p.run.correct.saturating_add(p.run.incorrect)).unzip();
        // A model's newest profile counts, whatever its group; then only the first group is
        // weighed against the targets.
        let superseded = seen_models.contains(&p.run.model.as_str());
        seen_models.push(p.run.model.as_str());
        let missed: Vec<String> = match (first, g) {
            _ if superseded => vec!["superseded by a newer profile of the model".to_string()],
            (Some(first), Some(g)) if g != first => {
                vec![format!("not comparable: {}", apart(first, g))]
            }
            _ => misses(&p.run, targets),
        };
        weighed.push(Weighed {
            profile: (*p).clone(),
            accuracy_low: lo,
            accuracy_high: hi,
            meets: missed.is_empty(),
            why: if missed.is_empty() {
                "meets every target".to_string()
            } else {
                missed.join("; ")
            },
        });
    }
    let energy = |w: &Weighed| w.profile.run.avg_per_query_energy_joules;
    weighed.sort_by(|a, b| {
        b.meets
            .cmp(&a.meets)
            .then_with(|| match (energy(a), energy(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| {
                let acc = |w: &Weighed| w.profile.run.accuracy.unwrap_or(0.0);
                acc(b).total_cmp(&acc(a))
            })
    });
    let chosen = weighed
        .first()
        .filter(|w| w.meets)
        .map(|w| w.profile.run.model.clone());
    let why_none = match (&chosen, &eval) {
        (Some(_), _) => None,
        (None, None) => Some("no profile is kept: run `wattbar-cli profile` first".to_string()),
        (None, Some(e)) if weighed.is_empty() => Some(format!(
            "no profile is kept for {e}: run `wattbar-cli profile --eval {e:?}` first"
        )),
        (None, Some(e)) => Some(format!(
            "no model profiled on {e} meets the targets: each says what it missed"
        )),
    };
    Choice {
        targets: targets.clone(),
        eval,
        chosen,
        why_none,
        weighed,
    }
}

/// The newest profile of each model on each evaluation, newest first: what a models table shows
/// beside each model's energy.
pub fn newest_per_model(all: &[KeptProfile]) -> Vec<KeptProfile> {
    let mut newest: Vec<&KeptProfile> = all.iter().collect();
    newest.sort_by(|a, b| b.at.total_cmp(&a.at));
    let mut out: Vec<KeptProfile> = Vec::new();
    for p in newest {
        if !out
            .iter()
            .any(|o| o.run.model == p.run.model && o.eval == p.eval)
        {
            out.push(p.clone());
        }
    }
    out
}

/// The group each profile fell in, in order.
fn group_of<'a>(
    profiles: &[&KeptProfile],
    groups: &'a [super::compare::Group],
) -> Vec<Option<&'a super::compare::Group>> {
    profiles
        .iter()
        .map(|p| {
            groups.iter().find(|g| {
                g.machine == p.run.machine
                    && g.sources == p.run.sources
                    && g.graders == p.run.graders
            })
        })
        .collect()
}

/// What `run` misses of `targets`, in words; empty when it meets them all.
fn misses(run: &Run, targets: &Targets) -> Vec<String> {
    let mut out = Vec::new();
    match run.accuracy {
        None => out.push("accuracy unknown (no graded answer)".to_string()),
        Some(a) if a < targets.min_accuracy => out.push(format!(
            "accuracy {:.1} % below {:.1} %",
            a * 100.0,
            targets.min_accuracy * 100.0
        )),
        Some(_) if targets.by_lower_bound => {
            let graded = run.correct.saturating_add(run.incorrect);
            match wilson(run.correct, graded) {
                Some((low, _)) if low >= targets.min_accuracy => {}
                Some((low, _)) => out.push(format!(
                    "accuracy's 95 % lower bound {:.1} % ({} of {graded}) below {:.1} %",
                    low * 100.0,
                    run.correct,
                    targets.min_accuracy * 100.0
                )),
                None => out.push("accuracy unknown (no graded answer)".to_string()),
            }
        }
        Some(_) => {}
    }
    if let Some(max) = targets.max_itl_seconds {
        match run.itl_seconds_median {
            None => out.push("inter-token latency unknown".to_string()),
            Some(itl) if itl > max => out.push(format!(
                "median inter-token latency {:.1} ms above {:.1} ms",
                itl * 1000.0,
                max * 1000.0
            )),
            Some(_) => {}
        }
    }
    if run.avg_per_query_energy_joules.is_none() {
        out.push("energy per query unknown (nothing measured)".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile of `model` on `eval` at `at`: `correct` of 10 right, `joules` a query, a median
    /// ITL of `itl_ms`.
    fn kept(model: &str, at: f64, correct: u64, joules: f64, itl_ms: f64) -> KeptProfile {
        KeptProfile {
            at,
            eval: "gsm8k".into(),
            queries: 10,
            run: Run {
                label: model.into(),
                model: model.into(),
                machine: Some("desk".into()),
                sources: vec!["rapl".into()],
                graders: vec!["number".into()],
                scope: None,
                correct,
                incorrect: 10 - correct,
                accuracy: Some(correct as f64 / 10.0),
                avg_per_query_energy_joules: Some(joules),
                joules_per_correct_answer: (correct > 0).then(|| joules * 10.0 / correct as f64),
                intelligence_per_joule: Some(correct as f64 / 10.0 / joules),
                itl_seconds_median: Some(itl_ms / 1000.0),
            },
        }
    }

    fn targets(min_accuracy: f64, max_itl_ms: Option<f64>) -> Targets {
        Targets {
            min_accuracy,
            by_lower_bound: false,
            max_itl_seconds: max_itl_ms.map(|ms| ms / 1000.0),
            eval: None,
        }
    }

    #[test]
    fn acting_by_itself_a_choice_takes_the_accuracys_lower_bound() {
        // small: 7 of 10 (70 %, Wilson 39.7 – 89.2 %) at 12 J; big: 29 of 30 (96.7 %, Wilson
        // 83.3 – 99.4 %) at 40 J. For 60 %, the point estimates choose small; its lower bound
        // is below 60 %, so low-power mode's auto model is big.
        let small = kept("small", 1.0, 7, 12.0, 10.0);
        let big = KeptProfile {
            queries: 30,
            run: Run {
                correct: 29,
                incorrect: 1,
                accuracy: Some(29.0 / 30.0),
                ..kept("big", 2.0, 9, 40.0, 10.0).run
            },
            ..kept("big", 2.0, 9, 40.0, 10.0)
        };
        let profiles = [small, big];
        let point = best(&profiles, &targets(0.6, None));
        assert_eq!(point.chosen.as_deref(), Some("small"));
        let cautious = Targets {
            by_lower_bound: true,
            ..targets(0.6, None)
        };
        let c = best(&profiles, &cautious);
        assert_eq!(c.chosen.as_deref(), Some("big"), "{c:?}");
        let why = c
            .weighed
            .iter()
            .find(|w| w.profile.run.model == "small")
            .map(|w| w.why.clone())
            .unwrap_or_default();
        assert!(
            why.contains("lower bound 39.7 % (7 of 10) below 60.0 %"),
            "{why}"
        );
    }

    #[test]
    fn the_cheapest_model_that_meets_the_accuracy_is_chosen_not_the_cheapest_overall() {
        // tiny: 3 of 10 at 5 J; small: 7 of 10 at 12 J; big: 9 of 10 at 40 J.
        let profiles = [
            kept("tiny", 1.0, 3, 5.0, 10.0),
            kept("small", 2.0, 7, 12.0, 20.0),
            kept("big", 3.0, 9, 40.0, 60.0),
        ];
        let c = best(&profiles, &targets(0.6, None));
        assert_eq!(c.chosen.as_deref(), Some("small"));
        assert_eq!(c.eval.as_deref(), Some("gsm8k"));
        let order: Vec<(&str, bool)> = c
            .weighed
            .iter()
            .map(|w| (w.profile.run.model.as_str(), w.meets))
            .collect();
        assert_eq!(order, [("small", true), ("big", true), ("tiny", false)]);
        assert_eq!(c.weighed[2].why, "accuracy 30.0 % below 60.0 %");
        // 7 of 10: Wilson 0.3968 – 0.8922.
        let lo = c.weighed[0].accuracy_low.unwrap_or_default();
        assert!((lo - 0.3968).abs() < 5e-4, "{lo}");
        // At 0.8 only big is good enough; with a 50 ms latency target, none.
        assert_eq!(
            best(&profiles, &targets(0.8, None)).chosen.as_deref(),
            Some("big")
        );
        let none = best(&profiles, &targets(0.8, Some(50.0)));
        assert_eq!(none.chosen, None);
        assert_eq!(
            none.why_none.as_deref(),
            Some("no model profiled on gsm8k meets the targets: each says what it missed")
        );
        let big = none.weighed.iter().find(|w| w.profile.run.model == "big");
        assert_eq!(
            big.map(|w| w.why.as_str()),
            Some("median inter-token latency 60.0 ms above 50.0 ms")
        );
    }

    #[test]
    fn a_table_shows_each_models_newest_profile_per_evaluation() {
        let mut mmlu = kept("small", 4.0, 5, 9.0, 20.0);
        mmlu.eval = "mmlu".into();
        let all = [
            kept("small", 3.0, 7, 12.0, 20.0),
            kept("small", 1.0, 2, 30.0, 20.0),
            kept("big", 2.0, 9, 40.0, 60.0),
            mmlu,
        ];
        let newest = newest_per_model(&all);
        let shown: Vec<(&str, &str, f64)> = newest
            .iter()
            .map(|p| (p.run.model.as_str(), p.eval.as_str(), p.at))
            .collect();
        assert_eq!(
            shown,
            [
                ("small", "mmlu", 4.0),
                ("small", "gsm8k", 3.0),
                ("big", "gsm8k", 2.0)
            ]
        );
    }

    #[test]
    fn unknown_figures_never_pass_and_other_groups_and_old_profiles_are_not_chosen() {
        let mut blind = kept("blind", 1.0, 10, 1.0, 10.0);
        blind.run.avg_per_query_energy_joules = None;
        let mut slowless = kept("slowless", 2.0, 10, 2.0, 10.0);
        slowless.run.itl_seconds_median = None;
        // A GPU's joules are not the package's: listed apart, never chosen, however cheap.
        let mut gpu = kept("gpu", 3.0, 10, 0.5, 5.0);
        gpu.run.sources = vec!["nvml".into()];
        // A model newest profiled on the GPU is not chosen by an older package profile.
        let moved = kept("moved", 0.5, 10, 0.1, 1.0);
        let mut moved_now = kept("moved", 2.5, 10, 0.1, 1.0);
        moved_now.run.sources = vec!["nvml".into()];
        // The newest profile sets the group; small's older, better profile is superseded.
        let old_small = kept("small", 4.0, 10, 3.0, 10.0);
        let small = kept("small", 5.0, 7, 12.0, 20.0);
        let c = best(
            &[blind, slowless, gpu, old_small, small, moved, moved_now],
            &targets(0.6, Some(100.0)),
        );
        assert_eq!(c.chosen.as_deref(), Some("small"));
        let why = |model: &str, at: f64| {
            c.weighed
                .iter()
                .find(|w| w.profile.run.model == model && w.profile.at == at)
                .map(|w| w.why.clone())
                .unwrap_or_default()
        };
        assert_eq!(
            why("blind", 1.0),
            "energy per query unknown (nothing measured)"
        );
        assert_eq!(why("slowless", 2.0), "inter-token latency unknown");
        assert_eq!(
            why("gpu", 3.0),
            "not comparable: other energy sources (nvml)"
        );
        assert_eq!(
            why("small", 4.0),
            "superseded by a newer profile of the model"
        );
        assert_eq!(
            why("moved", 0.5),
            "superseded by a newer profile of the model"
        );
        assert_eq!(
            why("moved", 2.5),
            "not comparable: other energy sources (nvml)"
        );
        // Another evaluation is not weighed at all; none kept: no choice, and why.
        let mut mcq = kept("mcq-only", 9.0, 9, 1.0, 10.0);
        mcq.eval = "mmlu".into();
        let c = best(&[mcq.clone(), kept("small", 5.0, 7, 12.0, 20.0)], &{
            let mut t = targets(0.6, None);
            t.eval = Some("gsm8k".into());
            t
        });
        assert_eq!(c.chosen.as_deref(), Some("small"));
        assert_eq!(c.weighed.len(), 1);
        assert_eq!(
            best(&[mcq.clone()], &targets(0.6, None)).chosen.as_deref(),
            Some("mcq-only")
        );
        assert_eq!(
            best(&[], &Targets::default()).why_none.as_deref(),
            Some("no profile is kept: run `wattbar-cli profile` first")
        );
        let unknown = Targets {
            eval: Some("hellaswag".into()),
            ..Targets::default()
        };
        assert_eq!(
            best(&[mcq.clone()], &unknown).why_none.as_deref(),
            Some("no profile is kept for hellaswag: run `wattbar-cli profile --eval \"hellaswag\"` first")
        );
    }
}
