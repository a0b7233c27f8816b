//! What a router should run, as one sentence per score band: the configured low-power model,
//! or with `auto` the one the profiles chose.

use super::*;

/// What a router should do, as one sentence per score band.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// The model to switch to; `None` while `low_power_model` is `auto` and no profiled model is
    /// good enough (routers then keep the model asked for).
    pub recommended_model: Option<String>,
    /// Mean score 0–10 of the last records; `None` until inference data arrives.
    pub score: Option<f64>,
    /// The raw figure the score is made from, always given beside it.
    pub tokens_per_second_per_watt: Option<f64>,
    /// The model with the most tokens/s per W measured on this machine.
    pub most_efficient_model: Option<String>,
    pub recommendation: String,
}

/// What the inference ledger measured, for the advice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub score: Option<f64>,
    pub tokens_per_second_per_watt: Option<f64>,
    pub most_efficient_model: Option<String>,
    /// The cheapest model good enough by the profiles kept, for [`AUTO_MODEL`]: the model, and
    /// the evaluation it was profiled on; `None` where none meets the targets.
    pub good_enough: Option<(String, String)>,
}

pub const NO_INFERENCE_DATA: &str = "No inference data yet.";

/// Advice for the current state and what inference measured. The bands use the mean score of
/// the last records; the model to switch to is the configured low-power model, or with
/// [`AUTO_MODEL`] the one the profiles chose (none, and a sentence saying why, while none is
/// good enough).
pub fn advice(config: &PolicyConfig, state: &LowPowerState, measured: &Measured) -> Advice {
    let score = measured.score.filter(|s| s.is_finite());
    let model = match (config.auto_model(), &measured.good_enough) {
        (false, _) => config.model.trim().to_string(),
        (true, Some((model, _))) => model.clone(),
        (true, None) => {
            return Advice {
                recommended_model: None,
                score,
                tokens_per_second_per_watt: measured.tokens_per_second_per_watt,
                most_efficient_model: measured.most_efficient_model.clone(),
                recommendation: format!(
                    "No profiled model is good enough yet (accuracy at least {:.0} %): profile \
                     your models with `wattbar-cli profile`, and see `wattbar-cli models --best`.",
                    config.min_accuracy * 100.0
                ),
            }
        }
    };
    let chosen = match &measured.good_enough {
        Some((_, eval)) if config.auto_model() => {
            format!(" ({model} is the cheapest model good enough on {eval})")
        }
        _ => String::new(),
    };
    let recommendation = match score {
        None if state.enabled => {
            format!("Low-power mode is on: route requests to {model}. {NO_INFERENCE_DATA}")
        }
        None => NO_INFERENCE_DATA.to_string(),
        Some(s) if s >= 8.0 => format!(
            "Efficiency {s:.1}/10: excellent; the current model is a good use of power."
        ),
        Some(s) if s >= 5.0 => {
            format!("Efficiency {s:.1}/10: good; switch to {model} only when power matters more than quality.")
        }
        Some(s) if s >= 2.0 => format!(
            "Efficiency {s:.1}/10: fair; {model} would answer for less energy per token."
        ),
        Some(s) => format!(
            "Efficiency {s:.1}/10: poor; switch to {model}, the current model spends a lot of power per token."
        ),
    };
    Advice {
        recommendation: format!("{recommendation}{chosen}"),
        recommended_model: Some(model),
        score,
        tokens_per_second_per_watt: measured.tokens_per_second_per_watt,
        most_efficient_model: measured.most_efficient_model.clone(),
    }
}
