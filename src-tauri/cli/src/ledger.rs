//! Commands on the ledger: `totals` and `export` read it (read-only, next to a running engine);
//! `reset-session` changes it through the running engine, or takes the folder's lock itself.

use crate::args::{ExportFormat, StepArg};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
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

/// History as rows: the headline's columns (`mean_watts`, `max_watts`, `joules`) when `system`
/// is wanted, then `<domain>_mean_watts` and `<domain>_joules` for each domain, one row per
/// bucket. A bucket where a domain was not metered has empty cells, never 0.
pub fn export(
    from: &str,
    to: &str,
    step: StepArg,
    format: ExportFormat,
    domains: &[String],
) -> Result<()> {
    let now = unix_now();
    let (from, to) = (
        crate::args::parse_time(from, now)?,
        crate::args::parse_time(to, now)?,
    );
    if from >= to {
        bail!("--from must be before --to");
    }
    let store = open_read_only()?;
    let stored = store.history_domains()?;
    if let Some(unknown) = domains
        .iter()
        .find(|d| *d != "system" && !stored.contains(d))
    {
        bail!(
            "no history for domain {unknown:?}: this ledger has system{}",
            stored.iter().map(|d| format!(", {d}")).collect::<String>()
        );
    }
    let headline = domains.is_empty() || domains.iter().any(|d| d == "system");
    let wanted: Vec<String> = if domains.is_empty() {
        stored
    } else {
        domains.iter().filter(|d| *d != "system").cloned().collect()
    };
    let step = step.into();
    let mut rows: BTreeMap<i64, ExportRow> = BTreeMap::new();
    if headline {
        for p in store.history(from, to, step)? {
            rows.entry(p.t as i64).or_default().headline = Some(p);
        }
    }
    if !wanted.is_empty() {
        for p in store.domain_history(from, to, step, &wanted)? {
            rows.entry(p.t as i64)
                .or_default()
                .domains
                .insert(p.domain.clone(), p);
        }
    }
    let mut out = std::io::stdout().lock();
    match format {
        ExportFormat::Json => {
            let points: Vec<serde_json::Value> = rows
                .iter()
                .map(|(t, r)| {
                    let mut v = serde_json::json!({ "t": t });
                    if let Some(h) = &r.headline {
                        v["mean_watts"] = h.mean_watts.into();
                        v["max_watts"] = h.max_watts.into();
                        v["joules"] = h.joules.into();
                    }
                    v["domains"] = r
                        .domains
                        .iter()
                        .map(|(d, p)| {
                            (
                                d.clone(),
                                serde_json::json!({"mean_watts": p.mean_watts, "joules": p.joules}),
                            )
                        })
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                    v
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string(&points)?)?;
        }
        ExportFormat::Csv => {
            let mut w = csv::Writer::from_writer(out);
            let mut header = vec!["t".to_string()];
            if headline {
                header.extend(["mean_watts", "max_watts", "joules"].map(String::from));
            }
            for d in &wanted {
                header.push(format!("{d}_mean_watts"));
                header.push(format!("{d}_joules"));
            }
            w.write_record(&header)?;
            let cell = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
            for (t, r) in &rows {
                let mut record = vec![t.to_string()];
                if headline {
                    let h = r.headline.as_ref();
                    record.push(cell(h.and_then(|h| h.mean_watts)));
                    record.push(cell(h.and_then(|h| h.max_watts)));
                    record.push(cell(h.map(|h| h.joules)));
                }
                for d in &wanted {
                    let p = r.domains.get(d);
                    record.push(cell(p.and_then(|p| p.mean_watts)));
                    record.push(cell(p.map(|p| p.joules)));
                }
                w.write_record(&record)?;
            }
            w.flush()?;
        }
    }
    Ok(())
}

/// One bucket of an export.
#[derive(Default)]
struct ExportRow {
    headline: Option<wattbar_engine::store::HistoryPoint>,
    domains: BTreeMap<String, wattbar_engine::store::domains::DomainPoint>,
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
