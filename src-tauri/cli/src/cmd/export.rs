//! `wattbar-cli export`: stored history as CSV or JSON rows (read-only, beside a running engine).

use crate::args::{ExportFormat, StepArg};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::io::Write;
use wattbar_engine::unix_now;

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
    let store = crate::ledger::open_read_only()?;
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
