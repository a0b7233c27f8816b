//! Choosing a setting from a sweep: each step a full profile run at one setting of one knob
//! (the OS power profile, a GPU's power limit), the rule that picks one, and what it saves
//! against the setting the machine started at.
//!
//! Rules:
//! - A step's energy is per correct answer where every step was graded and answered at least one
//!   correctly, else per query ([`Per`]): the same unit for every step, or no comparison.
//! - Its speed is output tokens per second over the step: completion tokens ÷ the queries' wall
//!   seconds (time to the first token included, as a user waits for it).
//! - Slowdown against the start: start tokens/s ÷ step tokens/s − 1 (25 → 20 tokens/s is 25 %).
//! - [`Rule::Slowdown`] (`slowdown<=5%`): the least energy per unit among the steps at most that
//!   much slower than the start; the start always qualifies, so a choice always exists.
//! - [`Rule::Cost`] (Zeus's, `--eta η`): the least η·E + (1 − η)·P_max·T per unit, E the energy
//!   and T the seconds per unit, P_max the highest mean power of any step (Zeus uses the GPU's
//!   maximum power limit; over settings that are not power limits the most any step drew is the
//!   same idea: the price of a second at full power). η = 1 is energy alone, η = 0 time alone.
//! - The saving is 1 − E_chosen ÷ E_start, its bound from each figure's bound: at least
//!   1 − (E_c + b_c) ÷ (E_s − b_s), at most 1 − (E_c − b_c) ÷ (E_s + b_s).
//! - A step with no measured energy or no tokens is never chosen, and says why.

use serde::{Deserialize, Serialize};

/// A slowdown this close above the limit is the limit (42 s ÷ 40 s − 1 is 5.000000000000004 %).
const ROUNDING: f64 = 1e-9;

/// One step's figures, summed over its queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The knob's value, as the knob names it (`power-saver`, `150 W`).
    pub setting: String,
    pub queries: u64,
    /// Answers graded correct; `None` where the step was not graded.
    pub correct: Option<u64>,
    /// The queries' measured energy; `None` where nothing was measured.
    pub energy_joules: Option<f64>,
    /// The energy is within this many joules of the truth.
    pub bound_joules: Option<f64>,
    pub wall_seconds: f64,
    pub completion_tokens: u64,
}

/// What a step's energy is counted per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    Query,
    CorrectAnswer,
}

impl Per {
    pub fn label(self) -> &'static str {
        match self {
            Per::Query => "J per query",
            Per::CorrectAnswer => "J per correct answer",
        }
    }
}

impl Step {
    fn units(&self, per: Per) -> Option<u64> {
        match per {
            Per::Query => Some(self.queries),
            Per::CorrectAnswer => self.correct,
        }
        .filter(|n| *n > 0)
    }

    /// Energy per unit, and its bound where the step knew one.
    pub fn joules_per(&self, per: Per) -> Option<(f64, Option<f64>)> {
        let n = self.units(per)? as f64;
        let e = self.energy_joules.filter(|e| e.is_finite() && *e >= 0.0)?;
        let b = self.bound_joules.filter(|b| b.is_finite() && *b >= 0.0);
        Some((e / n, b.map(|b| b / n)))
    }

    /// Output tokens per second over the step.
    pub fn tokens_per_second(&self) -> Option<f64> {
        (self.completion_tokens > 0 && self.wall_seconds > 0.0)
            .then(|| self.completion_tokens as f64 / self.wall_seconds)
    }

    /// Mean power over the step.
    pub fn mean_watts(&self) -> Option<f64> {
        self.energy_joules
            .filter(|_| self.wall_seconds > 0.0)
            .map(|e| e / self.wall_seconds)
    }

    fn seconds_per(&self, per: Per) -> Option<f64> {
        Some(self.wall_seconds / self.units(per)? as f64)
    }
}

/// The stated rule a step is chosen by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Rule {
    /// The least energy at most `percent` % slower than the start.
    Slowdown { percent: f64 },
    /// Zeus's cost, η between 0 and 1.
    Cost { eta: f64 },
}

impl Rule {
    /// `slowdown<=5%` (spaces and the `%` optional).
    pub fn parse(text: &str) -> Result<Rule, String> {
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let number = squeezed
            .strip_prefix("slowdown<=")
            .map(|n| n.strip_suffix('%').unwrap_or(n))
            .ok_or_else(|| format!("{text:?}: a rule reads slowdown<=P% (e.g. slowdown<=5%)"))?;
        let percent: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: {number:?} is not a number of percent"))?;
        if !(0.0..=1000.0).contains(&percent) {
            return Err(format!("{text:?}: the slowdown is between 0 and 1000 %"));
        }
        Ok(Rule::Slowdown { percent })
    }

    /// Zeus's cost with `eta`, which is between 0 and 1.
    pub fn cost(eta: f64) -> Result<Rule, String> {
        if (0.0..=1.0).contains(&eta) {
            Ok(Rule::Cost { eta })
        } else {
            Err(format!(
                "--eta {eta}: η is between 0 (time alone) and 1 (energy alone)"
            ))
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Rule::Slowdown { percent } => {
                format!("the least energy at most {percent} % slower than the start")
            }
            Rule::Cost { eta } => format!(
                "Zeus's cost η·E + (1 − η)·P_max·T with η = {eta}, P_max the most any step drew"
            ),
        }
    }
}

/// The saving against the start, in percent of its energy, with its bound: `None` where a
/// step's bound is not known (or the start's bound reaches down to 0 J), never a guess.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Saving {
    pub percent: f64,
    pub at_least_percent: Option<f64>,
    pub at_most_percent: Option<f64>,
}

/// The step chosen and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub chosen: usize,
    pub per: Per,
    pub rule: Rule,
    /// Each step's slowdown against the start, in percent; `None` where a step had no tokens.
    pub slowdown_percent: Vec<Option<f64>>,
    /// Each step's cost under [`Rule::Cost`]; empty under another rule.
    pub cost: Vec<Option<f64>>,
    pub saving: Saving,
}

/// Chooses among `steps` by `rule`, `start` being the step at the machine's own setting.
pub fn choose(steps: &[Step], start: usize, rule: Rule) -> Result<Choice, String> {
    let base = steps
        .get(start)
        .ok_or_else(|| "the sweep has no step at the starting setting".to_string())?;
    let graded = steps.iter().all(|s| s.correct.is_some_and(|c| c > 0));
    let per = if graded {
        Per::CorrectAnswer
    } else {
        Per::Query
    };
    let (base_j, base_b) = base
        .joules_per(per)
        .filter(|(j, _)| *j > 0.0)
        .ok_or_else(|| {
            format!(
                "the starting setting {} has no measured energy: nothing to compare against",
                base.setting
            )
        })?;
    let base_tps = base.tokens_per_second().ok_or_else(|| {
        format!(
            "the starting setting {} generated no tokens: no speed to compare against",
            base.setting
        )
    })?;
    let slowdown: Vec<Option<f64>> = steps
        .iter()
        .map(|s| Some((base_tps / s.tokens_per_second()? - 1.0) * 100.0))
        .collect();
    let energy = |i: usize| steps[i].joules_per(per).map(|(j, _)| j);
    let (chosen, cost) = match rule {
        Rule::Slowdown { percent } => {
            let chosen = (0..steps.len())
                .filter(|&i| i == start || slowdown[i].is_some_and(|s| s <= percent + ROUNDING))
                .filter_map(|i| Some((i, energy(i)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(start, |(i, _)| i);
            (chosen, Vec::new())
        }
        Rule::Cost { eta } => {
            let p_max = steps
                .iter()
                .filter_map(Step::mean_watts)
                .fold(0.0, f64::max);
            let cost: Vec<Option<f64>> = steps
                .iter()
                .map(|s| {
                    let (e, _) = s.joules_per(per)?;
                    let t = s.seconds_per(per)?;
                    s.tokens_per_second()?;
                    Some(eta * e + (1.0 - eta) * p_max * t)
                })
                .collect();
            let chosen = cost
                .iter()
                .enumerate()
                .filter_map(|(i, c)| Some((i, (*c)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(start, |(i, _)| i);
            (chosen, cost)
        }
    };
    let (j, b) = steps[chosen].joules_per(per).unwrap_or((base_j, base_b));
    let ratio = |num: f64, den: f64| (den > 0.0).then(|| (1.0 - num / den) * 100.0);
    let bounds = b.zip(base_b);
    let saving = Saving {
        percent: (1.0 - j / base_j) * 100.0,
        at_least_percent: bounds.and_then(|(b, bb)| ratio(j + b, base_j - bb)),
        at_most_percent: bounds.and_then(|(b, bb)| ratio((j - b).max(0.0), base_j + bb)),
    };
    Ok(Choice {
        chosen,
        per,
        rule,
        slowdown_percent: slowdown,
        cost,
        saving,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(setting: &str, joules: f64, seconds: f64, tokens: u64, correct: Option<u64>) -> Step {
        Step {
            setting: setting.into(),
            queries: 4,
            correct,
            energy_joules: Some(joules),
            bound_joules: Some(4.0),
            wall_seconds: seconds,
            completion_tokens: tokens,
        }
    }

    /// balanced (the start): 400 J, 40 s, 1,000 tokens = 25 tokens/s;
    /// power-saver: 300 J, 42 s = 23.81 tokens/s, 5 % slower (25 ÷ 23.81 − 1);
    /// performance: 480 J, 32 s = 31.25 tokens/s, faster.
    fn three(correct: [Option<u64>; 3]) -> Vec<Step> {
        vec![
            step("performance", 480.0, 32.0, 1000, correct[0]),
            step("balanced", 400.0, 40.0, 1000, correct[1]),
            step("power-saver", 300.0, 42.0, 1000, correct[2]),
        ]
    }

    #[test]
    fn the_least_energy_within_the_slowdown_is_chosen_and_its_saving_bounded() {
        let steps = three([None; 3]);
        let five =
            choose(&steps, 1, Rule::Slowdown { percent: 5.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(five.chosen, 2);
        assert_eq!(five.per, Per::Query);
        // 42 s for the same 1,000 tokens: 42 ÷ 40 − 1 = 5 %.
        assert!((five.slowdown_percent[2].unwrap_or(0.0) - 5.0).abs() < 1e-9);
        assert!((five.slowdown_percent[0].unwrap_or(0.0) + 20.0).abs() < 1e-9);
        // 75 J a query against 100: 25 %; bounds of 1 J a query each:
        // 1 − 76/99 = 23.23 %, 1 − 74/101 = 26.73 %.
        assert!((five.saving.percent - 25.0).abs() < 1e-9);
        let (least, most) = (five.saving.at_least_percent, five.saving.at_most_percent);
        assert!((least.unwrap_or(0.0) - (1.0 - 76.0 / 99.0) * 100.0).abs() < 1e-9);
        assert!((most.unwrap_or(0.0) - (1.0 - 74.0 / 101.0) * 100.0).abs() < 1e-9);
        // A step whose bound is not known: the saving stands, its interval is not stated.
        let mut unbounded = three([None; 3]);
        unbounded[2].bound_joules = None;
        let c = choose(&unbounded, 1, Rule::Slowdown { percent: 5.0 })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!((c.saving.percent - 25.0).abs() < 1e-9);
        assert_eq!(
            (c.saving.at_least_percent, c.saving.at_most_percent),
            (None, None)
        );
        // Allowing 4 %: power-saver is out, balanced itself the least left.
        let four =
            choose(&steps, 1, Rule::Slowdown { percent: 4.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(four.chosen, 1);
        assert_eq!(four.saving.percent, 0.0);
    }

    #[test]
    fn graded_steps_are_compared_per_correct_answer() {
        // 2, 2 and 1 correct: 240, 200, 300 J a correct answer; within 5 %, balanced wins.
        let steps = three([Some(2), Some(2), Some(1)]);
        let c =
            choose(&steps, 1, Rule::Slowdown { percent: 5.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.per, Per::CorrectAnswer);
        assert_eq!(c.chosen, 1);
        // One step with no correct answer: per query for all.
        let c = choose(
            &three([Some(2), Some(0), Some(1)]),
            1,
            Rule::Slowdown { percent: 5.0 },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.per, Per::Query);
    }

    #[test]
    fn zeus_cost_weighs_energy_against_time_at_the_most_power_drawn() {
        // P_max = 480 J ÷ 32 s = 15 W. Per query: performance 120 J, 8 s; balanced 100 J,
        // 10 s; power-saver 75 J, 10.5 s.
        let steps = three([None; 3]);
        let energy = choose(&steps, 1, Rule::Cost { eta: 1.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(energy.chosen, 2);
        let time = choose(&steps, 1, Rule::Cost { eta: 0.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(time.chosen, 0);
        // η = 0.5: 0.5·120 + 0.5·15·8 = 120; 0.5·100 + 0.5·150 = 125; 0.5·75 + 0.5·157.5 = 116.25.
        let half = choose(&steps, 1, Rule::Cost { eta: 0.5 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(half.chosen, 2);
        let costs: Vec<f64> = half.cost.iter().map(|c| c.unwrap_or(0.0)).collect();
        for (got, want) in costs.iter().zip([120.0, 125.0, 116.25]) {
            assert!((got - want).abs() < 1e-9, "{costs:?}");
        }
    }

    #[test]
    fn a_step_without_energy_is_never_chosen_and_a_start_without_it_is_an_error() {
        let mut steps = three([None; 3]);
        steps[2].energy_joules = None;
        let c =
            choose(&steps, 1, Rule::Slowdown { percent: 50.0 }).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.chosen, 1);
        steps[1].energy_joules = None;
        let e = choose(&steps, 1, Rule::Slowdown { percent: 50.0 }).err();
        assert!(e.is_some_and(|e| e.contains("balanced has no measured energy")));
        steps[1].energy_joules = Some(f64::NAN);
        assert!(choose(&steps, 1, Rule::Cost { eta: 0.5 }).is_err());
    }

    #[test]
    fn rules_are_read_as_written_and_nonsense_is_refused() {
        assert_eq!(
            Rule::parse("slowdown<=5%"),
            Ok(Rule::Slowdown { percent: 5.0 })
        );
        assert_eq!(
            Rule::parse(" slowdown <= 2.5 "),
            Ok(Rule::Slowdown { percent: 2.5 })
        );
        for bad in [
            "slowdown<5%",
            "speed>=5%",
            "slowdown<=x%",
            "slowdown<=-1%",
            "",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Rule::cost(0.5), Ok(Rule::Cost { eta: 0.5 }));
        assert!(Rule::cost(1.5).is_err());
        assert!(Rule::cost(f64::NAN).is_err());
    }
}
