//! `run --out DIR`: `summary.json`, `samples.csv`, `events.jsonl` and `report.svg`.
//!
//! `samples.csv` has one row per reading per sample: `t` (Unix seconds), `domain`, `device`,
//! `source`, `quality`, `watts`, and `joules`, the energy of the interval the sample ends.
//! - The headline's row has the headline's energy: the reading it was taken from, or, when it is
//!   a sum of parts, a row of its own with the domain `system`.
//! - Every other row has its part's energy as the ledger counts it (counter or trapezoid): the
//!   difference of the part's running total since the previous state, as the headline's is of
//!   the session's. The first state has no figure, nor has a reading that adds nothing that
//!   counts (another source owns that domain).

use super::samples::State;
use super::summary::Summary;
use super::trace::RunTrace;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

pub fn write_all(dir: &Path, summary: &Summary, kept: &RunTrace) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write(
        "summary.json",
        serde_json::to_string_pretty(summary)?.as_bytes(),
    )?;
    write("samples.csv", &samples_csv(kept.states())?)?;
    let mut lines = Vec::new();
    for (command, run, e) in &kept.events {
        let mut v = e.to_json();
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "command".into(),
                summary
                    .results
                    .get(*command)
                    .map(|r| r.command.clone())
                    .into(),
            );
            m.insert("run".into(), (*run).into());
        }
        writeln!(lines, "{v}")?;
    }
    write("events.jsonl", &lines)?;
    write("report.svg", super::report::svg(summary, kept)?.as_bytes())?;
    Ok(())
}

fn samples_csv(states: impl Iterator<Item = State>) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "t", "domain", "device", "source", "quality", "watts", "joules",
    ])?;
    let mut last_session: Option<f64> = None;
    // Each part's running total at the previous state: its row's energy is the difference, so
    // that states the run never saw still count and the first state has no figure.
    let mut last_total: HashMap<(String, Option<String>, String), f64> = HashMap::new();
    for s in states {
        let Some(t) = s.at else { continue };
        let joules = last_session
            .map(|prev| s.session_joules - prev)
            .filter(|j| *j >= 0.0 && j.is_finite());
        last_session = Some(s.session_joules);
        let t = format!("{t:.3}");
        let num = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
        let headline_item = s.breakdown.iter().position(|i| {
            Some(i.domain.as_str()) == s.domain.as_deref()
                && Some(&i.source) == s.source.as_ref()
                && i.watts == s.watts
        });
        for (n, i) in s.breakdown.iter().enumerate() {
            let key = (i.domain.clone(), i.device.clone(), i.source.clone());
            let part = match i.total_joules {
                Some(total) => last_total
                    .insert(key, total)
                    .map(|prev| total - prev)
                    .filter(|j| *j >= 0.0 && j.is_finite()),
                None => {
                    last_total.remove(&key);
                    None
                }
            };
            let j = if Some(n) == headline_item {
                joules
            } else {
                part
            };
            w.write_record([
                t.as_str(),
                &i.domain,
                i.device.as_deref().unwrap_or(""),
                &i.source,
                i.quality.as_str(),
                &num(i.watts),
                &num(j),
            ])?;
        }
        if headline_item.is_none() && (s.watts.is_some() || joules.is_some()) {
            w.write_record([
                t.as_str(),
                "system",
                "",
                s.source.as_deref().unwrap_or(""),
                s.quality.map_or("", |q| q.as_str()),
                &num(s.watts),
                &num(joules),
            ])?;
        }
    }
    w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))
}
