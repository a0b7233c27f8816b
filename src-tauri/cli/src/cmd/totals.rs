//! `wattbar-cli totals`: session, today, month and lifetime from the ledger (read-only, beside a
//! running engine), in the scope the headline had last; energy of other scopes is listed apart,
//! never added.

use anyhow::Result;
use wattbar_engine::unix_now;

pub fn totals(json: bool) -> Result<()> {
    let prefs = crate::engine::read_prefs()?;
    let store = crate::ledger::open_read_only()?;
    let now = unix_now();
    let session = store.latest_session()?;
    let currency = session
        .as_ref()
        .map(|s| s.currency.clone())
        .unwrap_or_else(|| prefs.currency.to_string());
    let scope = store.last_scope()?;
    let row = |total: &wattbar_engine::store::Total| {
        serde_json::json!({
            "kwh": total.kwh,
            "cost": total.cost,
            "currency": total.currency,
            "other_costs": total.other_costs,
            "scope": total.scope,
            "other_scopes": total.other_scopes.iter().map(|o| serde_json::json!({
                "scope": o.scope,
                "kwh": o.kwh,
                "cost": o.cost,
                "currency": o.currency,
            })).collect::<Vec<_>>(),
        })
    };
    let report = serde_json::json!({
        "session": session.as_ref().map(|s| serde_json::json!({
            "kwh": s.joules / wattbar_core::JOULES_PER_KWH,
            "cost": s.cost,
            "currency": s.currency,
        })),
        "today": row(&store.day(now, &currency, scope)?),
        "month": row(&store.month(now, &currency, scope)?),
        "lifetime": row(&store.lifetime(&currency, scope)?),
    });
    if json {
        crate::out!("{}", serde_json::to_string(&report)?)?;
    } else {
        for key in ["session", "today", "month", "lifetime"] {
            let v = &report[key];
            let others: Vec<String> = v["other_costs"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|m| {
                            format!(
                                " + {:.4} {}",
                                m["amount"].as_f64().unwrap_or(0.0),
                                m["currency"].as_str().unwrap_or("")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let within = v["scope"]
                .as_str()
                .map_or(String::new(), |s| format!("  ({s})"));
            crate::out!(
                "{key:<9} {:>12.6} kWh  {:>10.4} {}{}{within}",
                v["kwh"].as_f64().unwrap_or(0.0),
                v["cost"].as_f64().unwrap_or(0.0),
                currency,
                others.concat()
            )?;
            for o in v["other_scopes"].as_array().into_iter().flatten() {
                crate::out!(
                    "{:<9} {:>12.6} kWh  {:>10.4} {}  ({}, not added)",
                    "",
                    o["kwh"].as_f64().unwrap_or(0.0),
                    o["cost"].as_f64().unwrap_or(0.0),
                    currency,
                    o["scope"].as_str().unwrap_or("scope not recorded")
                )?;
            }
        }
    }
    Ok(())
}
