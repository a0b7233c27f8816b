//! `/v1/models`' carbon: grams of CO₂ per 1,000 completion tokens per model, at the grid
//! intensity in force now (the carbon feed's slot, else `carbon_g_per_kwh`), and which it was.
//! Absent where no intensity is known: never 0 g.

use serde::Serialize;
use wattbar_core::inference::server_totals::{ServerModel, Sourced};
use wattbar_core::inference::ModelStats;
use wattbar_core::JOULES_PER_KWH;
use wattbar_engine::PublishedState;

#[derive(Debug, Serialize, PartialEq)]
pub(super) struct Carbon {
    /// The intensity the figures are at, gCO₂/kWh.
    pub g_per_kwh: f64,
    /// `carbon_feed:<feed>` (its slot in force now) or `carbon_g_per_kwh` (fixed).
    pub intensity_from: String,
    pub models: Vec<ModelCarbon>,
}

#[derive(Debug, Serialize, PartialEq)]
pub(super) struct ModelCarbon {
    pub model: String,
    /// `proxy` or `server-metrics`, as the figures it is made from.
    pub source: String,
    pub g_co2_per_1000_tokens: f64,
}

/// Grams of CO₂ for 1,000 tokens at `joules_per_token` on a grid of `g_per_kwh`: 0.36 J a
/// token on a 400 g grid is 360 J ÷ 3.6 MJ/kWh × 400 g = 0.04 g.
pub(super) fn per_1000_tokens(joules_per_token: f64, g_per_kwh: f64) -> f64 {
    joules_per_token * 1000.0 / JOULES_PER_KWH * g_per_kwh
}

pub(super) fn carbon(
    p: &PublishedState,
    models: &[Sourced<ModelStats>],
    servers: &[Sourced<ServerModel>],
) -> Option<Carbon> {
    let (g_per_kwh, intensity_from) = match p.prices.carbon.as_ref() {
        Some(feed) if feed.now.is_some() => (feed.now?, format!("carbon_feed:{}", feed.feed)),
        _ => (p.prefs.carbon_g_per_kwh?, "carbon_g_per_kwh".to_string()),
    };
    let proxied = models.iter().filter_map(|m| {
        Some(ModelCarbon {
            model: m.figures.model.clone(),
            source: m.source.to_string(),
            g_co2_per_1000_tokens: per_1000_tokens(m.figures.joules_per_token?, g_per_kwh),
        })
    });
    let counted = servers.iter().filter_map(|m| {
        Some(ModelCarbon {
            model: m.figures.model.clone(),
            source: m.source.to_string(),
            g_co2_per_1000_tokens: per_1000_tokens(m.figures.joules_per_token?, g_per_kwh),
        })
    });
    Some(Carbon {
        g_per_kwh,
        intensity_from,
        models: proxied.chain(counted).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_tokens_at_0_36_joules_on_a_400_gram_grid_is_0_04_grams() {
        assert!((per_1000_tokens(0.36, 400.0) - 0.04).abs() < 1e-12);
        assert_eq!(per_1000_tokens(2.0, 0.0), 0.0);
    }
}
