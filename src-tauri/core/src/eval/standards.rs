//! A profile's figures in the units the public leaderboards use, each with its scope, quality
//! and bound, the definition it follows and where that is published; where this run's scope
//! cannot give one, why instead of a number.
//!
//! Rules, from a profile's `summary.json` (`profile --report standards`, `models --standards`):
//! - AI Energy Score: GPU Wh per 1,000 queries (batch 1, its text-generation task) = the
//!   queries' energy ÷ queries × 1,000 ÷ 3,600, only where the energy is the GPU's alone (scope
//!   `components`, covering `gpu` and nothing else).
//! - ML.ENERGY: J per response = energy ÷ queries; J per output token = energy ÷ completion
//!   tokens; beside the median inter-token latency, and the tightest of its latency targets
//!   (50, 100, 250 ms) that median meets.
//! - Intelligence per Watt: accuracy per joule = accuracy ÷ the mean energy of an evaluated
//!   query; accuracy per watt = accuracy ÷ their mean power (as `profile` computes them,
//!   [`crate::eval::summary`]).
//! - SCI for AI: gCO₂e per output token = the queries' grams at the grid intensity in force at
//!   each (the carbon feed's slot, else `carbon_g_per_kwh`) ÷ completion tokens; operational
//!   emissions only, the embodied share (SCI's M) left out and said.
//! - MLPerf Power: J per query at the wall, only where a plug measured it (scope `wall`).
//! - Each energy figure's bound is the run's bound divided as the figure is; a figure whose bound
//!   is not known (the accuracy ratios, a run without bounds) has none, never 0.

use crate::scope::Scope;
use crate::Quality;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// ML.ENERGY's latency targets for the median inter-token latency, seconds.
pub const ITL_TARGETS_SECONDS: [f64; 3] = [0.050, 0.100, 0.250];

/// What the figures are made of, read from a profile's summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inputs {
    pub queries: u64,
    pub energy_joules: Option<f64>,
    pub bound_joules: Option<f64>,
    pub completion_tokens: u64,
    pub itl_median_seconds: Option<f64>,
    pub accuracy: Option<f64>,
    pub intelligence_per_joule: Option<f64>,
    pub intelligence_per_watt: Option<f64>,
    pub carbon_g: Option<f64>,
    pub scope: Option<Scope>,
    pub covers: Vec<String>,
    pub quality: Option<Quality>,
}

impl Inputs {
    /// From a profile's `summary.json`.
    pub fn from_summary(s: &Value) -> Inputs {
        let number = |v: &Value| v.as_f64().filter(|x| x.is_finite() && *x >= 0.0);
        Inputs {
            queries: s["queries"].as_u64().unwrap_or(0),
            energy_joules: number(&s["totals"]["energy_joules"]),
            bound_joules: number(&s["energy"]["bound_joules"]),
            completion_tokens: s["totals"]["completion_tokens"].as_u64().unwrap_or(0),
            itl_median_seconds: number(&s["per_query"]["itl_seconds"]["median"]),
            accuracy: number(&s["accuracy"]),
            intelligence_per_joule: number(&s["intelligence_per_joule"]),
            intelligence_per_watt: number(&s["intelligence_per_watt"]),
            carbon_g: number(&s["totals"]["carbon_g"]),
            scope: s["energy"]["scope"].as_str().and_then(Scope::named),
            covers: s["energy"]["covers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(String::from))
                .collect(),
            quality: serde_json::from_value(s["energy"]["quality"].clone()).ok(),
        }
    }
}

/// One figure by one standard's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Whose definition: `AI Energy Score`, `ML.ENERGY`, …
    pub standard: String,
    /// What it is, with its unit: `GPU Wh per 1,000 queries`.
    pub figure: String,
    pub value: Option<f64>,
    /// The value is within this much of the truth (same unit), where known.
    pub bound: Option<f64>,
    pub scope: Option<Scope>,
    pub quality: Option<Quality>,
    /// The definition followed, in a line, and where it is published.
    pub definition: String,
    pub source: String,
    /// Why there is no value.
    pub why: Option<String>,
}

const AI_ENERGY_SCORE: &str =
    "AI Energy Score (Hugging Face and partners), huggingface.github.io/AIEnergyScore";
const ML_ENERGY: &str = "The ML.ENERGY Leaderboard (University of Michigan), ml.energy/leaderboard";
const IPW: &str =
    "Intelligence per Watt (Stanford Hazy Research and Together AI, 2025), the ipw profiler";
const SCI: &str =
    "Software Carbon Intensity (Green Software Foundation, ISO/IEC 21031:2024) for AI";
const MLPERF: &str = "MLPerf Inference: Power (MLCommons), mlcommons.org";

impl Inputs {
    /// The energy over `n` units, and its bound where the run knew one.
    fn per(&self, n: f64) -> Option<(f64, Option<f64>)> {
        Some((self.energy_joules? / n, self.bound_joules.map(|b| b / n)))
    }

    fn per_query(&self) -> Option<(f64, Option<f64>)> {
        self.per((self.queries > 0).then_some(self.queries as f64)?)
    }

    fn figure(&self, standard: &str, figure: &str, definition: &str, source: &str) -> Figure {
        Figure {
            standard: standard.into(),
            figure: figure.into(),
            value: None,
            bound: None,
            scope: self.scope,
            quality: self.quality,
            definition: definition.into(),
            source: source.into(),
            why: None,
        }
    }

    fn scope_in_words(&self) -> String {
        match (self.scope, self.covers.is_empty()) {
            (Some(Scope::Components), false) => format!("components ({})", self.covers.join(", ")),
            (scope, _) => Scope::shown(scope).to_string(),
        }
    }
}

/// `f` with its value and bound (`None`: not known, never 0), or why there is none.
fn valued(mut f: Figure, value: Option<(f64, Option<f64>)>, missing: &str) -> Figure {
    match value {
        Some((v, b)) => {
            f.value = Some(v);
            f.bound = b;
        }
        None => f.why = Some(missing.to_string()),
    }
    f
}

/// Every standard's figures for one run.
pub fn standards(i: &Inputs) -> Vec<Figure> {
    let mut out = Vec::new();
    let no_energy = "no energy measured in this run";
    // AI Energy Score: the GPU alone.
    let gpu_alone = i.scope == Some(Scope::Components) && i.covers == ["gpu"];
    let aes = i.figure(
        "AI Energy Score",
        "GPU Wh per 1,000 queries",
        "the GPU's energy over 1,000 queries at batch 1, in Wh",
        AI_ENERGY_SCORE,
    );
    out.push(if gpu_alone {
        valued(
            aes,
            i.per_query()
                .map(|(j, b)| (j * 1000.0 / 3600.0, b.map(|b| b * 1000.0 / 3600.0))),
            no_energy,
        )
    } else {
        let mut f = aes;
        f.why = Some(format!(
            "it counts the GPU's energy alone; this run measured {}",
            i.scope_in_words()
        ));
        f
    });
    // ML.ENERGY.
    out.push(valued(
        i.figure(
            "ML.ENERGY",
            "J per response",
            "the energy of one response, in J",
            ML_ENERGY,
        ),
        i.per_query(),
        no_energy,
    ));
    let tokens = (i.completion_tokens > 0).then_some(i.completion_tokens as f64);
    out.push(valued(
        i.figure(
            "ML.ENERGY",
            "J per output token",
            "the energy of a response ÷ the tokens it generated, in J",
            ML_ENERGY,
        ),
        tokens.and_then(|n| i.per(n)),
        if tokens.is_none() {
            "no output token counted"
        } else {
            no_energy
        },
    ));
    let mut itl = i.figure(
        "ML.ENERGY",
        "median inter-token latency, ms",
        "the time between output tokens, the median over responses; compared at targets of 50, \
         100 and 250 ms",
        ML_ENERGY,
    );
    itl.scope = None;
    itl.quality = None;
    match i.itl_median_seconds {
        Some(s) => {
            itl.value = Some(s * 1000.0);
            itl.why = Some(
                match ITL_TARGETS_SECONDS.iter().find(|t| s <= **t + 1e-12) {
                    Some(t) => format!("meets the {:.0} ms target", t * 1000.0),
                    None => "meets none of the 50, 100 and 250 ms targets".to_string(),
                },
            );
        }
        None => itl.why = Some("no response had two tokens or more".into()),
    }
    out.push(itl);
    // Intelligence per Watt.
    let ungraded = "no answer was graded";
    out.push(valued(
        i.figure(
            "Intelligence per Watt",
            "accuracy per joule",
            "accuracy ÷ the mean energy of an evaluated query, per J",
            IPW,
        ),
        i.intelligence_per_joule.map(|v| (v, None)),
        if i.accuracy.is_none() {
            ungraded
        } else {
            no_energy
        },
    ));
    out.push(valued(
        i.figure(
            "Intelligence per Watt",
            "accuracy per watt",
            "accuracy ÷ the mean power of an evaluated query, per W",
            IPW,
        ),
        i.intelligence_per_watt.map(|v| (v, None)),
        if i.accuracy.is_none() {
            ungraded
        } else {
            no_energy
        },
    ));
    // SCI for AI, operational.
    let mut sci = valued(
        i.figure(
            "SCI for AI",
            "gCO₂e per output token",
            "operational emissions (energy × the grid's intensity in force) ÷ output tokens; the \
             embodied share (M) left out",
            SCI,
        ),
        tokens.zip(i.carbon_g).map(|(n, g)| {
            // The grams carry the energy's bound in proportion.
            let b = match (i.energy_joules, i.bound_joules) {
                (Some(e), Some(b)) if e > 0.0 => Some(g * b / e / n),
                _ => None,
            };
            (g / n, b)
        }),
        if tokens.is_none() {
            "no output token counted"
        } else {
            "no grid intensity was in force: set a carbon feed or carbon_g_per_kwh"
        },
    );
    if sci.why.is_none() {
        sci.why = Some("operational only: the hardware's embodied emissions are not in it".into());
    }
    out.push(sci);
    // MLPerf Power: the wall.
    let wall = i.figure(
        "MLPerf Power",
        "J per query at the wall",
        "the system's energy at its AC input over the queries ÷ queries, in J",
        MLPERF,
    );
    out.push(if i.scope == Some(Scope::Wall) {
        valued(wall, i.per_query(), no_energy)
    } else {
        let mut f = wall;
        f.why = Some(format!(
            "it measures at the wall, and no plug measured this run ({})",
            i.scope_in_words()
        ));
        f
    });
    out
}

/// The figures as a table, one line each.
pub fn table(figures: &[Figure]) -> String {
    let mut t = String::new();
    for f in figures {
        // Four significant digits; a bound under one in ten thousand of the value is not shown.
        let shown = |x: f64| {
            if x == 0.0 || (0.01..1e6).contains(&x.abs()) {
                format!(
                    "{:.*}",
                    3_usize.saturating_sub(x.abs().log10().max(0.0) as usize),
                    x
                )
            } else {
                format!("{x:.3e}")
            }
        };
        let value = match (f.value, f.bound) {
            (Some(v), Some(b)) if b > 1e-4 * v.abs() => format!("{} ± {}", shown(v), shown(b)),
            (Some(v), _) => shown(v),
            (None, _) => "—".to_string(),
        };
        let scope = match (f.scope, f.quality) {
            (Some(s), Some(q)) => format!(" [{}, {}]", s.as_str(), q.as_str()),
            (Some(s), None) => format!(" [{}]", s.as_str()),
            _ => String::new(),
        };
        t.push_str(&format!(
            "  {:<22} {:<32} {:>24}{scope}{}\n",
            f.standard,
            f.figure,
            value,
            f.why
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default()
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            queries: 20,
            energy_joules: Some(400.0),
            bound_joules: Some(2.0),
            completion_tokens: 1000,
            itl_median_seconds: Some(0.08),
            accuracy: Some(0.1),
            intelligence_per_joule: Some(0.005),
            intelligence_per_watt: Some(0.004),
            carbon_g: Some(400.0 / 3.6e6 * 200.0),
            scope: Some(Scope::System),
            covers: vec![],
            quality: Some(Quality::Measured),
        }
    }

    fn named<'a>(fs: &'a [Figure], figure: &str) -> &'a Figure {
        fs.iter()
            .find(|f| f.figure == figure)
            .unwrap_or_else(|| panic!("no {figure}"))
    }

    #[test]
    fn each_figure_follows_its_definition_and_says_why_where_the_scope_cannot_give_it() {
        let fs = standards(&inputs());
        // 400 J over 20 queries: 20 J a response (± 0.1); 400 J over 1,000 tokens: 0.4 J.
        assert_eq!(named(&fs, "J per response").value, Some(20.0));
        assert_eq!(named(&fs, "J per response").bound, Some(0.1));
        assert_eq!(named(&fs, "J per output token").value, Some(0.4));
        let itl = named(&fs, "median inter-token latency, ms");
        assert_eq!(itl.value, Some(80.0));
        assert_eq!(itl.why.as_deref(), Some("meets the 100 ms target"));
        // 400 J = 1/9,000 kWh × 200 g = 0.02222 g over 1,000 tokens.
        let sci = named(&fs, "gCO₂e per output token");
        assert!((sci.value.unwrap_or(0.0) - 400.0 / 3.6e6 * 200.0 / 1000.0).abs() < 1e-15);
        // The whole machine is not the GPU, nor the wall.
        let aes = named(&fs, "GPU Wh per 1,000 queries");
        assert_eq!(aes.value, None);
        assert_eq!(
            aes.why.as_deref(),
            Some("it counts the GPU's energy alone; this run measured system")
        );
        assert_eq!(named(&fs, "J per query at the wall").value, None);
        // The accuracy ratios carry no bound of their energy: unknown, not 0.
        assert_eq!(named(&fs, "accuracy per joule").bound, None);
        let mut unbounded = inputs();
        unbounded.bound_joules = None;
        let fs = standards(&unbounded);
        assert_eq!(named(&fs, "J per response").value, Some(20.0));
        assert_eq!(named(&fs, "J per response").bound, None);
        assert_eq!(named(&fs, "gCO₂e per output token").bound, None);
    }

    #[test]
    fn the_gpu_alone_gives_ai_energy_scores_figure_and_a_plug_mlperfs() {
        let mut gpu = inputs();
        gpu.scope = Some(Scope::Components);
        gpu.covers = vec!["gpu".into()];
        // 20 J a query × 1,000 ÷ 3,600 = 5.556 Wh per 1,000 queries.
        let aes = standards(&gpu)
            .into_iter()
            .find(|f| f.standard == "AI Energy Score")
            .unwrap_or_else(|| panic!("none"));
        assert!((aes.value.unwrap_or(0.0) - 20.0 * 1000.0 / 3600.0).abs() < 1e-9);
        let mut cpu_and_gpu = gpu.clone();
        cpu_and_gpu.covers = vec!["cpu".into(), "gpu".into()];
        assert_eq!(standards(&cpu_and_gpu)[0].value, None);
        let mut wall = inputs();
        wall.scope = Some(Scope::Wall);
        assert_eq!(
            named(&standards(&wall), "J per query at the wall").value,
            Some(20.0)
        );
    }

    #[test]
    fn without_a_grid_intensity_or_tokens_the_carbon_figure_says_what_to_set() {
        let mut i = inputs();
        i.carbon_g = None;
        let sci = standards(&i)
            .into_iter()
            .find(|f| f.standard == "SCI for AI")
            .unwrap_or_else(|| panic!("none"));
        assert!(sci.why.is_some_and(|w| w.contains("set a carbon feed")));
        assert_eq!(sci.value, None);
    }
}
