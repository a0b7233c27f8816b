//! Commands on the ledger: `totals` and `export` read it (read-only, next to a running engine);
//! `reset-session` changes it through the running engine, or takes the folder's lock itself.

use crate::args::{ExportFormat, StepArg};
use anyhow::{bail, Result};
use std::io::Write;
use wattbar_engine::lock::EngineLock;
use wattbar_engine::store::Store;
use wattbar_engine::{paths, prefs_file, unix_now};

pub fn open_read_only() -> Result<Store> {
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    Ok(Store::open_read_only(&db)?)
}

pub fn totals(json: bool) -> Result<()> {
    let (prefs, _) = prefs_file::load(&paths::preferences_path()?)?;
    let store = open_read_only()?;
    let now = unix_now();
    let session = store.latest_session()?;
    let currency = session
        .as_ref()
        .map(|s| s.currency.clone())
        .unwrap_or_else(|| prefs.currency.to_string());
    let row = |total: &wattbar_engine::store::Total| {
        serde_json::json!({
            "kwh": total.kwh,
            "cost": total.cost,
            "currency": total.currency,
            "other_costs": total.other_costs,
        })
    };
    let report = serde_json::json!({
        "session": session.as_ref().map(|s| serde_json::json!({
            "kwh": s.joules / wattbar_core::JOULES_PER_KWH,
            "cost": s.cost,
            "currency": s.currency,
        })),
        "today": row(&store.day(now, &currency)?),
        "month": row(&store.month(now, &currency)?),
        "lifetime": row(&store.lifetime(&currency)?),
    });
    if json {
        println!("{}", serde_json::to_string(&report)?);
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
            println!(
                "{key:<9} {:>12.6} kWh  {:>10.4} {}{}",
                v["kwh"].as_f64().unwrap_or(0.0),
                v["cost"].as_f64().unwrap_or(0.0),
                currency,
                others.concat()
            );
        }
    }
    Ok(())
}

pub fn export(from: &str, to: &str, step: StepArg, format: ExportFormat) -> Result<()> {
    let now = unix_now();
    let (from, to) = (
        crate::args::parse_time(from, now)?,
        crate::args::parse_time(to, now)?,
    );
    if from >= to {
        bail!("--from must be before --to");
    }
    let points = open_read_only()?.history(from, to, step.into())?;
    let mut out = std::io::stdout().lock();
    match format {
        ExportFormat::Json => writeln!(out, "{}", serde_json::to_string(&points)?)?,
        ExportFormat::Csv => {
            writeln!(out, "t,mean_watts,max_watts,joules")?;
            let cell = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            for p in points {
                writeln!(
                    out,
                    "{},{},{},{}",
                    p.t,
                    cell(p.mean_watts),
                    cell(p.max_watts),
                    p.joules
                )?;
            }
        }
    }
    Ok(())
}

pub fn reset_session() -> Result<()> {
    if let Some(holder) = crate::client::running()? {
        let api = crate::client::api_of(&holder)?;
        let reply = crate::client::reset_session(&api)?;
        println!(
            "{}",
            serde_json::json!({"ended_sessions": 1, "by": format!("the engine at {api}"), "started": reply["started"]})
        );
        return Ok(());
    }
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    let _lock = EngineLock::acquire(&paths::data_dir()?, None)?;
    let (prefs, _) = prefs_file::load(&paths::preferences_path()?)?;
    let (mut store, _) = Store::open(&db, unix_now())?;
    let ended = store.reset_session(unix_now(), prefs.currency.as_str())?;
    println!("{}", serde_json::json!({ "ended_sessions": ended }));
    Ok(())
}
