//! `GET /v1/battery`: each battery's health now (from the latest sample), its history by the
//! day (from the ledger) and the straight-line trend of that history to 80 % health.
//!
//! Without a battery source `now` is empty; without a ledger `history` is. Unknown figures are
//! `null`, never 0.

use super::shared::{unavailable, Shared};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use wattbar_core::battery::{self, Health, Trend};
use wattbar_ledger::store::battery::BatteryDay;

#[derive(Debug, Serialize)]
pub(super) struct BatteryBody {
    /// Each battery as the latest sample saw it.
    pub now: Vec<BatteryNow>,
    /// Every battery's days, oldest first.
    pub history: Vec<BatteryDay>,
    /// Per battery: the trend of its history's health.
    pub trends: BTreeMap<String, BatteryTrend>,
}

#[derive(Debug, Serialize)]
pub(super) struct BatteryNow {
    #[serde(flatten)]
    pub health: Health,
    /// Health in percent; `null` where not reported.
    pub health_percent: Option<f64>,
    /// How the energy figures were found, in words.
    pub energy_from_text: String,
}

#[derive(Debug, Serialize)]
pub(super) struct BatteryTrend {
    #[serde(flatten)]
    pub trend: Trend,
    /// The day health reaches 80 %, `YYYY-MM-DD`, where it falls.
    pub worn_on: Option<String>,
}

/// The trend of each battery's days with a health figure.
pub(super) fn trends(history: &[BatteryDay]) -> BTreeMap<String, BatteryTrend> {
    let mut points: BTreeMap<&str, Vec<(i64, f64)>> = BTreeMap::new();
    for d in history {
        let entry = points.entry(d.battery.as_str()).or_default();
        if let (Some(n), Some(r)) = (battery::day_number(&d.day), d.ratio) {
            entry.push((n, r));
        }
    }
    points
        .into_iter()
        .map(|(name, points)| {
            let trend = battery::trend(&points);
            let worn_on = match &trend {
                Trend::Falling { worn_on_day, .. } => battery::day_text(*worn_on_day),
                _ => None,
            };
            (name.to_string(), BatteryTrend { trend, worn_on })
        })
        .collect()
}

pub(super) async fn get_battery(State(shared): State<Arc<Shared>>) -> Response {
    let p = shared.engine.current();
    let now: Vec<BatteryNow> = p
        .snapshot
        .as_ref()
        .and_then(|s| s.battery_health.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|h| BatteryNow {
            health_percent: h.percent(),
            energy_from_text: h.energy_from.describe(),
            health: h.clone(),
        })
        .collect();
    let history = match shared.ledger.clone() {
        None => Vec::new(),
        Some(ledger) => match ledger
            .read(|store| Ok(store.battery_days("0000-01-01")?))
            .await
        {
            Ok(Some(days)) => days,
            Ok(None) => Vec::new(),
            Err(e) => return unavailable(&e),
        },
    };
    let trends = trends(&history);
    Json(BatteryBody {
        now,
        history,
        trends,
    })
    .into_response()
}
