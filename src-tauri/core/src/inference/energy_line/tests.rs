//! The energy line, read back by the rules the agents' parsers use.

use super::*;
use crate::inference::{Observed, Route, ServerFigures, Share, Status};
use crate::Coverage;

/// 190 J over 0.5 s, at the wall, shared with one other request; charged to key `lab`.
fn record() -> Record {
    let mut r = Record::build(
        9,
        Observed {
            route: Route::OpenAiChat,
            model: "smollm2".into(),
            requested_model: None,
            status: Status::Ok,
            error: None,
            start: 100.0,
            end: 100.5,
            ttft_seconds: None,
            figures: ServerFigures::default(),
            share: Some(Share {
                joules: 190.0,
                shared_seconds: 0.5,
                covered_seconds: 0.5,
                window_seconds: 0.5,
                shared_by: 2,
                bound_joules: 1.5,
                quality: Some(Quality::Measured),
                coverage: Some(Coverage {
                    scope: Scope::Wall,
                    covers: Vec::new(),
                }),
                ..Share::default()
            }),
            phases_known: false,
            baseline_watts: None,
            baseline_spread_watts: None,
            ceiling: 5.0,
        },
    );
    r.key = Some("lab".into());
    r
}

/// What Kilo Code's and plexus's readers do with a stream's lines: trim each, and read the JSON
/// after `": energy "` (9 characters) or `": cost "` (7); `energy_joules || 0` and
/// `request_cost_usd || 0` are summed.
fn read_like_the_agents(stream: &str) -> (f64, f64, Option<serde_json::Value>) {
    let (mut joules, mut usd, mut cost_raw) = (0.0, 0.0, None);
    for line in stream.split('\n') {
        let trimmed = line.trim();
        if let Some(json) = trimmed.strip_prefix(": energy ") {
            let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
            joules += v["energy_joules"].as_f64().unwrap_or(0.0);
        } else if let Some(json) = trimmed.strip_prefix(": cost ") {
            let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
            usd += v["request_cost_usd"].as_f64().unwrap_or(0.0);
            cost_raw = Some(v);
        }
    }
    (joules, usd, cost_raw)
}

#[test]
fn the_agents_parsers_read_the_records_joules_and_never_take_euros_for_dollars() {
    // 190 J = 5.2778e-5 kWh; at 0.30 EUR/kWh, 1.5833e-5 EUR.
    let line = EnergyLine::of(&record(), Some(0.30), "EUR", Some(810.0));
    let stream = format!("data: {{\"choices\":[]}}\n\n{}data: [DONE]\n\n", line.sse());
    let (joules, usd, cost) = read_like_the_agents(&stream);
    assert_eq!(joules, 190.0);
    assert_eq!(usd, 0.0, "no request_cost_usd in euros");
    let cost = cost.unwrap_or_default();
    assert_eq!(cost["currency"], "EUR");
    assert!((cost["request_cost"].as_f64().unwrap_or(0.0) - 190.0 / 3.6e6 * 0.30).abs() < 1e-15);
    assert_eq!(cost["budget_remaining_joules"], 810.0);
    assert_eq!(cost["key"], "lab");
    let e = &line.energy;
    assert_eq!(e.avg_power_watts, Some(380.0), "190 J over 0.5 s");
    assert_eq!(
        (e.attribution_method, e.attribution_ratio),
        (Some("wattbar_shared"), Some(0.5))
    );
    assert_eq!(
        (e.scope, e.quality),
        (Some(Scope::Wall), Some(Quality::Measured))
    );
    // In dollars, the same cost is summed as NeuralWatt's is.
    let usd_line = EnergyLine::of(&record(), Some(0.30), "USD", None);
    let (_, usd, _) = read_like_the_agents(&usd_line.sse());
    assert!((usd - 190.0 / 3.6e6 * 0.30).abs() < 1e-15);
}

#[test]
fn an_unmeasured_request_says_null_which_the_parsers_count_as_nothing() {
    let r = Record {
        energy_joules: None,
        shared_by: None,
        ..record()
    };
    let line = EnergyLine::of(&r, None, "EUR", None);
    let (joules, usd, _) = read_like_the_agents(&line.sse());
    assert_eq!((joules, usd), (0.0, 0.0));
    assert!(line.sse().contains("\"energy_joules\":null"));
}
