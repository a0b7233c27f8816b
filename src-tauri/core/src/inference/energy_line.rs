//! The energy line other clients already read: NeuralWatt's SSE comments `: energy {...}` and
//! `: cost {...}`, made from a Wattbar record.
//!
//! Rules:
//! - NeuralWatt's field names, with its meaning: `energy_joules`, `energy_kwh`,
//!   `avg_power_watts`, `duration_seconds`, `attribution_method`, `attribution_ratio`,
//!   `ratio_was_capped`; Wattbar adds `scope`, `quality`, `energy_bound_joules` and the
//!   record's `id`. A figure not known is `null`, which the agents' parsers skip (`??`, `|| 0`).
//! - The request's share of the machine is its window's energy split among the requests that
//!   ran in it ([`claims`](super::claims)): `attribution_method` `"wattbar_shared"` where
//!   others shared it (`attribution_ratio` is then 1 ÷ their number), `"wattbar_whole"` where
//!   it had the machine to itself.
//! - `: cost` gives the request's cost in the preferences' currency (`request_cost` and
//!   `currency`), as `request_cost_usd` only where that currency is USD: a figure in another
//!   currency is never passed off as dollars. With a key, `budget_remaining_joules` and `key`.
//! - Each comment is one line, `: energy ` or `: cost ` then compact JSON: a parser that trims the
//!   line and reads past the prefix (Kilo Code, plexus, llm-neuralwatt) reads it whole.

use super::Record;
use crate::{Quality, Scope};
use serde::Serialize;

/// `: energy {...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyComment {
    pub energy_joules: Option<f64>,
    pub energy_kwh: Option<f64>,
    pub avg_power_watts: Option<f64>,
    pub duration_seconds: f64,
    pub attribution_method: Option<&'static str>,
    pub attribution_ratio: Option<f64>,
    pub ratio_was_capped: bool,
    pub scope: Option<Scope>,
    pub quality: Option<Quality>,
    pub energy_bound_joules: Option<f64>,
    pub id: u64,
}

/// `: cost {...}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostComment {
    pub request_cost: Option<f64>,
    pub currency: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_cost_usd: Option<f64>,
    pub budget_remaining_joules: Option<f64>,
    pub key: Option<String>,
}

/// Both comments of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyLine {
    pub energy: EnergyComment,
    pub cost: CostComment,
}

impl EnergyLine {
    /// The line of record `r`, priced at `price_per_kwh` in `currency`; `remaining`: what its
    /// key may still spend.
    pub fn of(
        r: &Record,
        price_per_kwh: Option<f64>,
        currency: &str,
        remaining: Option<f64>,
    ) -> Self {
        let joules = r.energy_joules.filter(|j| j.is_finite());
        let kwh = joules.map(|j| j / 3.6e6);
        let shared = r.shared_by.filter(|n| *n > 0);
        let request_cost = kwh
            .zip(price_per_kwh.filter(|p| p.is_finite()))
            .map(|(k, p)| k * p);
        EnergyLine {
            energy: EnergyComment {
                energy_joules: joules,
                energy_kwh: kwh,
                avg_power_watts: joules
                    .filter(|_| r.wall_seconds > 0.0)
                    .map(|j| j / r.wall_seconds),
                duration_seconds: r.wall_seconds,
                attribution_method: shared.map(|n| {
                    if n > 1 {
                        "wattbar_shared"
                    } else {
                        "wattbar_whole"
                    }
                }),
                attribution_ratio: shared.map(|n| 1.0 / n as f64),
                ratio_was_capped: false,
                scope: r.scope,
                quality: r.quality,
                energy_bound_joules: r.energy_bound_joules,
                id: r.id,
            },
            cost: CostComment {
                request_cost,
                currency: currency.to_string(),
                request_cost_usd: request_cost.filter(|_| currency.eq_ignore_ascii_case("USD")),
                budget_remaining_joules: remaining,
                key: r.key.clone(),
            },
        }
    }

    /// `: energy`'s JSON, as a whole answer's header carries it.
    pub fn energy_json(&self) -> String {
        compact(&self.energy)
    }

    /// `: cost`'s JSON.
    pub fn cost_json(&self) -> String {
        compact(&self.cost)
    }

    /// The two comment lines, each ending a blank line as SSE events do.
    pub fn sse(&self) -> String {
        format!(
            ": energy {}\n\n: cost {}\n\n",
            compact(&self.energy),
            compact(&self.cost)
        )
    }
}

fn compact<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests;
