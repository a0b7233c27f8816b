//! `profile --sweep KNOB`: the same prompts at each setting of a knob this machine allows, each
//! step a full profile run (graded as any), a step chosen by a stated rule, and the knob put
//! back.
//!
//! Rules:
//! - The knob's setting as it was is journalled before the first change and put back on
//!   success, on an error, on Ctrl+C and on SIGTERM; after a kill -9 the next start of any
//!   Wattbar program puts it back ([`wattbar_engine::knobs`]). One sweep at a time per data
//!   folder.
//! - Each step runs in `--out/KNOB-VALUE` (its records.jsonl and summary.json, kept in the ledger
//!   as any profile); `--out/sweep.json` has every step's figures, the rule, the choice and its
//!   saving against the starting setting ([`wattbar_core::sweep`]); `--out/sweep.svg` the chart of
//!   energy per unit against tokens/s.

use crate::cmd::cell::cell;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::sweep::{choose, Choice, Rule, Step as Figures};
use wattbar_engine::knobs::{KnobKind, Sweep};

/// What `--sweep` asks.
pub struct SweepOptions {
    pub knob: KnobKind,
    pub rule: Rule,
    /// How long each setting is left before its step.
    pub settle: Duration,
}

/// A step's figures from its summary.
fn figures(setting: &str, s: &Value) -> Figures {
    let queries = s["queries"].as_u64().unwrap_or(0);
    let graded = s["unevaluated"].as_u64() == Some(0) && queries > 0;
    Figures {
        setting: setting.to_string(),
        queries,
        correct: s["correct"].as_u64().filter(|_| graded),
        energy_joules: s["totals"]["energy_joules"].as_f64(),
        bound_joules: s["energy"]["bound_joules"].as_f64(),
        wall_seconds: s["totals"]["wall_seconds"].as_f64().unwrap_or(0.0),
        completion_tokens: s["totals"]["completion_tokens"].as_u64().unwrap_or(0),
    }
}

/// Ctrl+C or SIGTERM, by name, whichever comes first.
async fn interrupted() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => "Ctrl+C (SIGINT)",
            _ = term.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl+C"
    }
}

/// Sweeps `s.knob`, each step run by `run` (a profile run into the folder it is given, giving
/// its summary), the report written into `out`.
pub async fn sweep(
    out: &Path,
    s: &SweepOptions,
    run: impl AsyncFn(&Path) -> Result<Value>,
) -> Result<()> {
    let data = wattbar_engine::home::paths::data_dir()?;
    let (sweep, left_over) = Sweep::begin(&data, s.knob).await?;
    if let Some(done) = left_over {
        eprintln!("wattbar: {done}");
    }
    let original = sweep.original().to_string();
    eprintln!(
        "wattbar profile: sweeping {} from {original}; it is put back afterwards",
        s.knob.describe()
    );
    let ran = tokio::select! {
        ran = steps(out, s, &sweep, run) => ran,
        by = interrupted() => Err(anyhow::anyhow!("stopped by {by}")),
    };
    let restored = sweep.restore().await;
    match &restored {
        Ok(done) => eprintln!("wattbar profile: {done}"),
        Err(e) => eprintln!(
            "wattbar profile: {} could not be put back to {original} ({e}); the next start of \
             any Wattbar program tries again",
            s.knob.describe()
        ),
    }
    let ran = ran?;
    restored?;
    let start = ran
        .iter()
        .position(|f| f.setting == original)
        .context("the sweep has no step at the setting it started from")?;
    let choice = choose(&ran, start, s.rule).map_err(anyhow::Error::msg)?;
    let report = json!({
        "knob": s.knob.name(),
        "original": original,
        "rule": s.rule,
        "rule_in_words": s.rule.describe(),
        "per": choice.per,
        "steps": ran.iter().enumerate().map(|(i, f)| json!({
            "setting": f.setting,
            "dir": step_dir(out, s.knob, &f.setting),
            "figures": f,
            "joules_per_unit": f.joules_per(choice.per).map(|(j, _)| j),
            "bound_joules_per_unit": f.joules_per(choice.per).and_then(|(_, b)| b),
            "tokens_per_second": f.tokens_per_second(),
            "mean_watts": f.mean_watts(),
            "slowdown_percent": choice.slowdown_percent[i],
            "cost": choice.cost.get(i).copied().flatten(),
        })).collect::<Vec<_>>(),
        "chosen": ran[choice.chosen].setting,
        "saving": choice.saving,
    });
    let path = out.join("sweep.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let svg = out.join("sweep.svg");
    let drawn = wattbar_report::pareto_svg(&chart(&ran, &choice, s.knob))?;
    std::fs::write(&svg, drawn).with_context(|| format!("cannot write {}", svg.display()))?;
    eprint!("{}", table(&ran, &choice, start));
    eprintln!(
        "wattbar profile: wrote {} and {}",
        path.display(),
        svg.display()
    );
    Ok(())
}

fn step_dir(out: &Path, knob: KnobKind, setting: &str) -> PathBuf {
    out.join(format!("{}-{setting}", knob.name()))
}

/// Each setting in turn: set, left to settle, profiled.
async fn steps(
    out: &Path,
    s: &SweepOptions,
    sweep: &Sweep,
    run: impl AsyncFn(&Path) -> Result<Value>,
) -> Result<Vec<Figures>> {
    let mut settings = sweep.knob().steps().await?;
    if !settings.iter().any(|v| v == sweep.original()) {
        settings.insert(0, sweep.original().to_string());
    }
    let mut ran = Vec::new();
    for (i, setting) in settings.iter().enumerate() {
        eprintln!(
            "wattbar profile: step {} of {}: {} {setting}",
            i + 1,
            settings.len(),
            s.knob.describe()
        );
        sweep.knob().set(setting).await?;
        tokio::time::sleep(s.settle).await;
        let summary = run(&step_dir(out, s.knob, setting))
            .await
            .with_context(|| format!("the step at {setting}"))?;
        ran.push(figures(setting, &summary));
    }
    Ok(ran)
}

fn table(ran: &[Figures], c: &Choice, start: usize) -> String {
    let mut t = format!(
        "wattbar profile: the sweep, {} ({})\n  {:<16} {:>14} {:>10} {:>10} {:>10}\n",
        c.rule.describe(),
        c.per.label(),
        "setting",
        match c.per {
            wattbar_core::sweep::Per::Query => "J/query",
            wattbar_core::sweep::Per::CorrectAnswer => "J/correct",
        },
        "± J",
        "tokens/s",
        "slower %"
    );
    for (i, f) in ran.iter().enumerate() {
        let per = f.joules_per(c.per);
        let mark = match (i == c.chosen, i == start) {
            (true, true) => "  chosen, the start",
            (true, false) => "  chosen",
            (false, true) => "  the start",
            _ => "",
        };
        t.push_str(&format!(
            "  {:<16} {:>14} {:>10} {:>10} {:>10}{mark}\n",
            f.setting,
            cell(per.map(|p| p.0), 2),
            cell(per.and_then(|p| p.1), 2),
            cell(f.tokens_per_second(), 2),
            cell(c.slowdown_percent[i], 1),
        ));
    }
    let within = match (c.saving.at_least_percent, c.saving.at_most_percent) {
        (Some(least), Some(most)) => {
            format!("between {least:.1} and {most:.1} % within the bounds")
        }
        _ => "a step's bound is not known".to_string(),
    };
    t.push_str(&format!(
        "  saving against the start: {:.1} % ({within})\n",
        c.saving.percent
    ));
    t
}

/// Energy per unit against tokens/s, the chosen step marked.
fn chart(ran: &[Figures], c: &Choice, knob: KnobKind) -> wattbar_report::Pareto {
    wattbar_report::Pareto {
        title: format!("{} against speed, by {}", c.per.label(), knob.describe()),
        x_desc: c.per.label().to_string(),
        y_desc: "output tokens/s".to_string(),
        groups: vec![wattbar_report::ParetoGroup {
            name: knob.describe().to_string(),
            points: ran
                .iter()
                .enumerate()
                .filter_map(|(i, f)| {
                    let (j, b) = f.joules_per(c.per)?;
                    let tps = f.tokens_per_second()?;
                    Some(wattbar_report::ParetoPoint {
                        label: if i == c.chosen {
                            format!("{} (chosen)", f.setting)
                        } else {
                            f.setting.clone()
                        },
                        x: j,
                        x_bound: b,
                        y: tps,
                        low: tps,
                        high: tps,
                        efficient: i == c.chosen,
                    })
                })
                .collect(),
        }],
    }
}
