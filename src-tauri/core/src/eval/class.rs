//! An energy class A–G per model, from its newest profile (`wattbar-cli profile`): the energy
//! per correct answer where the profile was graded, per query where it was not, against a ladder
//! per task and scope.
//!
//! Rules (the thresholds' reasoning is in docs/inference.md, "An energy class per model"):
//! - The ladder doubles: A up to a limit L, B up to 2 L, C 4 L, D 8 L, E 16 L, F 32 L, G above;
//!   one class better is at most half the energy.
//! - L by task ([`Task::of_eval`]) and what the energy is per: general prompts 25 J a query, 50 J
//!   a correct answer; GSM8K (grade-school arithmetic, worked in words) 50 J a query, 100 J a
//!   correct answer. Wall and whole-machine energy take L as it is; energy of some components
//!   only (a CPU package, a GPU) takes L ÷ 2, since it leaves the rest of the machine out; an
//!   unrecorded scope is classed as the whole machine and says so.
//! - Each model and scope is classed by its newest profile; a graded profile with no correct
//!   answer, or one with no energy measured, has no class and says why, never a G it did not
//!   earn or an A it did not either.

use crate::eval::best::KeptProfile;
use crate::scope::Scope;
use crate::sweep::Per;
use serde::{Deserialize, Serialize};

/// A to G, least energy first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EnergyClass {
    A,
    B,
    C,
    D,
    E,
    F,
    G,
}

const CLASSES: [EnergyClass; 7] = [
    EnergyClass::A,
    EnergyClass::B,
    EnergyClass::C,
    EnergyClass::D,
    EnergyClass::E,
    EnergyClass::F,
    EnergyClass::G,
];

/// What the prompts ask, as far as the ladder tells tasks apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// GSM8K's grade-school arithmetic word problems, answered in worked steps.
    Gsm8k,
    /// Any other prompts.
    General,
}

impl Task {
    /// The task an evaluation's name says: `gsm8k…` is GSM8K, anything else general.
    pub fn of_eval(eval: &str) -> Task {
        if eval.trim().to_ascii_lowercase().starts_with("gsm8k") {
            Task::Gsm8k
        } else {
            Task::General
        }
    }
}

/// The upper limits of A to F, joules; G is above the last.
pub fn limits(task: Task, per: Per, scope: Option<Scope>) -> [f64; 6] {
    let a = match (task, per) {
        (Task::General, Per::Query) => 25.0,
        (Task::General, Per::CorrectAnswer) => 50.0,
        (Task::Gsm8k, Per::Query) => 50.0,
        (Task::Gsm8k, Per::CorrectAnswer) => 100.0,
    };
    let a = if scope == Some(Scope::Components) {
        a / 2.0
    } else {
        a
    };
    [a, 2.0 * a, 4.0 * a, 8.0 * a, 16.0 * a, 32.0 * a]
}

/// The class of `joules` on a ladder; `None` for what is not an energy.
pub fn class_of(joules: f64, limits: &[f64; 6]) -> Option<EnergyClass> {
    if !joules.is_finite() || joules < 0.0 {
        return None;
    }
    let step = limits.iter().position(|l| joules <= *l).unwrap_or(6);
    Some(CLASSES[step])
}

/// One model's class, with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelClass {
    pub model: String,
    /// What the energy covers; `None` where the profile did not record it.
    pub scope: Option<Scope>,
    /// `None` with `why` where there is nothing to class.
    pub class: Option<EnergyClass>,
    pub why: Option<String>,
    pub per: Per,
    /// The energy classed, joules per `per`.
    pub joules: Option<f64>,
    pub task: Task,
    /// The profile's evaluation and when it ended.
    pub eval: String,
    pub at: f64,
    /// The ladder's limits for A to F.
    pub limits: [f64; 6],
}

impl ModelClass {
    /// The class in words: `D: 493.4 J a correct answer on gsm8k-first20, system (D is up to
    /// 800 J)`, or why there is none.
    pub fn in_words(&self) -> String {
        let per = match self.per {
            Per::Query => "a query",
            Per::CorrectAnswer => "a correct answer",
        };
        let scope = Scope::shown(self.scope);
        match (self.class, self.joules) {
            (Some(class), Some(joules)) => {
                let step = CLASSES.iter().position(|c| *c == class).unwrap_or(6);
                let limit = match self.limits.get(step) {
                    Some(l) => format!("{class:?} is up to {l} J"),
                    None => format!("G is above {} J", self.limits[5]),
                };
                format!(
                    "{class:?}: {joules:.1} J {per} on {}, {scope} ({limit})",
                    self.eval
                )
            }
            _ => format!(
                "no class: {}",
                self.why.as_deref().unwrap_or("nothing measured")
            ),
        }
    }
}

/// Each model's class per scope, from its newest profile there; by model, then scope.
pub fn classes(profiles: &[KeptProfile]) -> Vec<ModelClass> {
    let mut newest: Vec<&KeptProfile> = Vec::new();
    for p in profiles {
        match newest
            .iter_mut()
            .find(|n| n.run.model == p.run.model && n.run.scope == p.run.scope)
        {
            Some(n) if n.at < p.at => *n = p,
            Some(_) => {}
            None => newest.push(p),
        }
    }
    newest.sort_by(|a, b| {
        (a.run.model.as_str(), a.run.scope.map(Scope::as_str))
            .cmp(&(b.run.model.as_str(), b.run.scope.map(Scope::as_str)))
    });
    newest.into_iter().map(class_of_profile).collect()
}

fn class_of_profile(p: &KeptProfile) -> ModelClass {
    let r = &p.run;
    let graded = r.correct + r.incorrect > 0;
    let per = if graded {
        Per::CorrectAnswer
    } else {
        Per::Query
    };
    let joules = if graded {
        r.joules_per_correct_answer
    } else {
        r.avg_per_query_energy_joules
    };
    let task = Task::of_eval(&p.eval);
    let limits = limits(task, per, r.scope);
    let class = joules.and_then(|j| class_of(j, &limits));
    let why = match (class, graded) {
        (Some(_), _) if r.scope.is_none() => Some(
            "the profile did not record its energy's scope: classed as the whole machine's"
                .to_string(),
        ),
        (Some(_), _) => None,
        (None, true) if r.correct == 0 => Some(format!(
            "no correct answer in {}: no energy per correct answer to class",
            p.eval
        )),
        (None, _) => Some(format!("no energy measured in {}", p.eval)),
    };
    ModelClass {
        model: r.model.clone(),
        scope: r.scope,
        class,
        why,
        per,
        joules,
        task,
        eval: p.eval.clone(),
        at: p.at,
        limits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::compare::Run;

    fn profile(
        model: &str,
        eval: &str,
        at: f64,
        scope: Option<Scope>,
        graded: (u64, u64),
    ) -> KeptProfile {
        KeptProfile {
            at,
            eval: eval.into(),
            queries: 20,
            run: Run {
                label: "run".into(),
                model: model.into(),
                machine: None,
                sources: vec![],
                graders: vec![],
                scope,
                correct: graded.0,
                incorrect: graded.1,
                accuracy: None,
                avg_per_query_energy_joules: Some(12.3),
                joules_per_correct_answer: (graded.0 > 0).then_some(493.4),
                intelligence_per_joule: None,
                itl_seconds_median: None,
            },
        }
    }

    #[test]
    fn the_ladder_doubles_per_class_from_its_task_and_scope() {
        let whole = limits(Task::General, Per::Query, Some(Scope::System));
        assert_eq!(whole, [25.0, 50.0, 100.0, 200.0, 400.0, 800.0]);
        assert_eq!(class_of(25.0, &whole), Some(EnergyClass::A));
        assert_eq!(class_of(25.1, &whole), Some(EnergyClass::B));
        assert_eq!(class_of(800.0, &whole), Some(EnergyClass::F));
        assert_eq!(class_of(800.1, &whole), Some(EnergyClass::G));
        assert_eq!(class_of(f64::NAN, &whole), None);
        assert_eq!(class_of(-1.0, &whole), None);
        // A GPU's energy alone leaves the rest of the machine out: half the limits.
        assert_eq!(
            limits(Task::General, Per::Query, Some(Scope::Components))[0],
            12.5
        );
        assert_eq!(
            limits(Task::Gsm8k, Per::CorrectAnswer, Some(Scope::Wall))[5],
            3200.0
        );
        assert_eq!(Task::of_eval("gsm8k-test-first40 (first 20)"), Task::Gsm8k);
        assert_eq!(Task::of_eval("my prompts"), Task::General);
    }

    #[test]
    fn each_model_is_classed_by_its_newest_profile_per_scope() {
        let classes = classes(&[
            // SmolLM2 over GSM8K's first 20, 1 right: 493.4 J a correct answer, on a ladder
            // of 100, 200, 400, 800: D.
            profile(
                "smollm2",
                "gsm8k-first20",
                20.0,
                Some(Scope::System),
                (1, 19),
            ),
            profile(
                "smollm2",
                "gsm8k-first20",
                10.0,
                Some(Scope::System),
                (0, 20),
            ),
            // Ungraded, on the CPU package alone: 12.3 J a query on 12.5, 25, …: A.
            profile("smollm2", "chat", 5.0, Some(Scope::Components), (0, 0)),
            // Graded, none right: no class, and why.
            profile("qwen", "gsm8k-first20", 30.0, None, (0, 20)),
        ]);
        let got: Vec<(&str, Option<Scope>, Option<EnergyClass>)> = classes
            .iter()
            .map(|c| (c.model.as_str(), c.scope, c.class))
            .collect();
        assert_eq!(
            got,
            [
                ("qwen", None, None),
                ("smollm2", Some(Scope::Components), Some(EnergyClass::A)),
                ("smollm2", Some(Scope::System), Some(EnergyClass::D)),
            ]
        );
        assert_eq!(classes[2].per, Per::CorrectAnswer);
        assert_eq!(classes[2].joules, Some(493.4));
        assert_eq!(classes[2].at, 20.0);
        assert_eq!(classes[1].per, Per::Query);
        assert_eq!(
            classes[2].in_words(),
            "D: 493.4 J a correct answer on gsm8k-first20, system (D is up to 800 J)"
        );
        assert!(classes[0]
            .why
            .as_deref()
            .is_some_and(|w| w.contains("no correct answer in gsm8k-first20")));
    }
}
