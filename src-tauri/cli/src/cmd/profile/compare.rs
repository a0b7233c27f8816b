//! `wattbar-cli profile compare DIR…`: profile runs side by side, ranked only where they may be
//! ([`wattbar_core::eval::compare`]), as a table, JSON, or a Pareto chart.

use crate::cmd::cell::cell;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use wattbar_core::eval::compare::{apart, compare, Group, Run};

/// A run from its folder's `summary.json`.
fn read_run(dir: &Path) -> Result<Run> {
    let path = dir.join("summary.json");
    let text = wattbar_engine::home::paths::read_at_most(
        &path,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", path.display()))?;
    let s: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let label = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Run::from_summary(label, &s))
}

/// The energy's sources in words.
fn sources(g: &Group) -> String {
    if g.sources.is_empty() {
        "sources unknown".to_string()
    } else {
        g.sources.join(", ")
    }
}

/// The table: each group, the first ranked, the others listed apart with why.
fn table(groups: &[Group]) -> String {
    let mut t = String::new();
    for (k, g) in groups.iter().enumerate() {
        if k == 0 {
            t.push_str(&format!(
                "ranked together: {} · {} · graded by {}\n",
                g.machine.as_deref().unwrap_or("unknown machine"),
                sources(g),
                g.graders.join(", ")
            ));
        } else {
            t.push_str(&format!(
                "\nlisted apart, not ranked against the above: {}\n",
                apart(&groups[0], g)
            ));
        }
        t.push_str(&format!(
            "  {:<24} {:<22} {:>10} {:>12} {:>12} {:>9}  front\n",
            "run (model)", "accuracy [95 %]", "J/query", "J/correct", "correct/kJ", "ITL ms"
        ));
        for r in &g.runs {
            let acc = match (r.run.accuracy, r.accuracy_low, r.accuracy_high) {
                (Some(a), Some(lo), Some(hi)) => format!("{a:.3} [{lo:.3}–{hi:.3}]"),
                (a, _, _) => cell(a, 3),
            };
            t.push_str(&format!(
                "  {:<24} {:<22} {:>10} {:>12} {:>12} {:>9}  {}\n",
                format!("{} ({})", r.run.label, r.run.model),
                acc,
                cell(r.run.avg_per_query_energy_joules, 1),
                cell(r.run.joules_per_correct_answer, 1),
                cell(r.run.intelligence_per_joule.map(|x| x * 1000.0), 3),
                cell(r.run.itl_seconds_median.map(|x| x * 1000.0), 1),
                if r.efficient { "yes" } else { "" }
            ));
        }
    }
    t
}

/// The chart of every group with its front.
fn chart(groups: &[Group]) -> wattbar_report::Pareto {
    wattbar_report::Pareto {
        title: "Accuracy against energy per query".into(),
        x_desc: "energy per query (J)".into(),
        y_desc: "accuracy".into(),
        groups: groups
            .iter()
            .map(|g| wattbar_report::ParetoGroup {
                name: format!(
                    "{} · {} · {}",
                    g.machine.as_deref().unwrap_or("unknown"),
                    sources(g),
                    g.graders.join(", ")
                ),
                points: g
                    .runs
                    .iter()
                    .filter_map(|r| {
                        let (a, j) = r.run.accuracy.zip(r.run.avg_per_query_energy_joules)?;
                        Some(wattbar_report::ParetoPoint {
                            label: r.run.label.clone(),
                            x: j,
                            x_bound: None,
                            y: a,
                            low: r.accuracy_low.unwrap_or(a),
                            high: r.accuracy_high.unwrap_or(a),
                            efficient: r.efficient,
                        })
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub fn run(dirs: &[PathBuf], json: bool, svg: Option<&Path>) -> Result<()> {
    let runs = dirs
        .iter()
        .map(|d| read_run(d))
        .collect::<Result<Vec<_>>>()?;
    let groups = compare(runs);
    if let Some(path) = svg {
        let drawn = wattbar_report::pareto_svg(&chart(&groups))?;
        std::fs::write(path, drawn).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &groups)?;
        std::io::Write::write_all(&mut out, b"\n")?;
    } else {
        std::io::Write::write_all(&mut out, table(&groups).as_bytes())?;
    }
    Ok(())
}
