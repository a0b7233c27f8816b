//! `wattbar-cli models --best`: from the profiles kept in the ledger, the model with the lowest
//! energy per query that meets the targets, with the evidence ([`wattbar_core::eval::best`]).
//!
//! Rule: the ledger is read as it is, beside a running engine or none; an unknown figure is
//! shown as "—", never 0.

use crate::cmd::cell::cell;
use anyhow::Result;
use wattbar_core::eval::best::{best, Choice, KeptProfile, Targets};

/// The profiles the ledger kept; none without a ledger.
fn kept() -> Result<Vec<KeptProfile>> {
    Ok(match crate::ledger::open_if_any()? {
        Some(store) => store.profiles()?.into_iter().map(|p| p.profile).collect(),
        None => Vec::new(),
    })
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{:.1} %", x * 100.0))
}

/// The choice in words, then each profile weighed.
pub fn human(c: &Choice) -> String {
    let mut t = String::new();
    let itl = c.targets.max_itl_seconds.map_or(String::new(), |s| {
        format!(", median ITL ≤ {:.0} ms", s * 1000.0)
    });
    let target = format!("accuracy ≥ {:.0} %{itl}", c.targets.min_accuracy * 100.0);
    match (&c.chosen, c.weighed.first(), &c.why_none) {
        (Some(model), Some(w), _) => {
            t.push_str(&format!(
                "Best on {}: {model}, {} J a query at {} accuracy [{} – {}] ({target})\n",
                c.eval.as_deref().unwrap_or("?"),
                cell(w.profile.run.avg_per_query_energy_joules, 2),
                percent(w.profile.run.accuracy),
                percent(w.accuracy_low),
                percent(w.accuracy_high),
            ));
        }
        (_, _, Some(why)) => t.push_str(&format!("No choice ({target}): {why}\n")),
        _ => {}
    }
    if c.weighed.is_empty() {
        return t;
    }
    t.push_str(&format!(
        "\n  {:<24} {:>8} {:>17} {:>10} {:>11} {:>8}  why\n",
        "model", "accuracy", "95 %", "J/query", "J/correct", "ITL ms"
    ));
    for w in &c.weighed {
        let r = &w.profile.run;
        t.push_str(&format!(
            "  {:<24} {:>8} {:>17} {:>10} {:>11} {:>8}  {}\n",
            r.model,
            percent(r.accuracy),
            format!("{} – {}", percent(w.accuracy_low), percent(w.accuracy_high)),
            cell(r.avg_per_query_energy_joules, 2),
            cell(r.joules_per_correct_answer, 1),
            cell(r.itl_seconds_median.map(|s| s * 1000.0), 1),
            w.why
        ));
    }
    t
}

pub fn models_best(targets: &Targets, json: bool) -> Result<()> {
    let choice = best(&kept()?, targets);
    if json {
        crate::out!("{}", serde_json::to_string_pretty(&choice)?)?;
    } else {
        crate::out!("{}", human(&choice).trim_end())?;
    }
    Ok(())
}

/// `models --standards`: each model's newest profile per evaluation, its figures by the public
/// leaderboards' definitions ([`wattbar_core::eval::standards`]), from the summary the ledger
/// kept whole.
pub fn models_standards(json: bool) -> Result<()> {
    use wattbar_core::eval::standards::{standards, table, Inputs};
    let stored = match crate::ledger::open_if_any()? {
        Some(store) => store.profiles()?,
        None => Vec::new(),
    };
    let newest = wattbar_core::eval::best::newest_per_model(
        &stored.iter().map(|p| p.profile.clone()).collect::<Vec<_>>(),
    );
    let rows: Vec<serde_json::Value> = newest
        .iter()
        .filter_map(|k| {
            let kept = stored.iter().find(|p| &p.profile == k)?;
            let summary: serde_json::Value = serde_json::from_str(&kept.summary).ok()?;
            Some(serde_json::json!({
                "model": k.run.model,
                "eval": k.eval,
                "at": k.at,
                "figures": standards(&Inputs::from_summary(&summary)),
            }))
        })
        .collect();
    if json {
        crate::out!("{}", serde_json::json!({ "models": rows }))?;
        return Ok(());
    }
    if rows.is_empty() {
        crate::out!("No profile kept yet: `wattbar-cli profile` makes one.")?;
        return Ok(());
    }
    for r in &rows {
        let figures: Vec<wattbar_core::eval::standards::Figure> =
            serde_json::from_value(r["figures"].clone())?;
        crate::out!(
            "{} on {}:\n{}",
            r["model"].as_str().unwrap_or_default(),
            r["eval"].as_str().unwrap_or_default(),
            table(&figures).trim_end()
        )?;
    }
    Ok(())
}
