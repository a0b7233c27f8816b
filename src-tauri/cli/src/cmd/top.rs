//! `top`: which programs draw the watts, as a table or JSON lines, from the running engine's
//! `GET /v1/processes` or from an engine of its own.

use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::time::Duration;
use wattbar_engine::home::paths;
use wattbar_engine::programs::{Sort, Top};
use wattbar_engine::runner::EngineConfig;

pub struct Options {
    pub json: bool,
    pub interval: Duration,
    pub count: Option<u64>,
    pub limit: usize,
    pub sort: Sort,
}

pub fn top(runtime: &tokio::runtime::Runtime, o: Options) -> Result<()> {
    if let Some(client) = crate::client::running().context("cannot follow it")? {
        eprintln!(
            "wattbar-cli: another Wattbar engine{} records into this data folder; following it at {}/",
            client.pid_text(),
            client.base()
        );
        return follow(&client, &o);
    }
    runtime.block_on(top_here(&o))
}

fn sort_name(sort: Sort) -> &'static str {
    match sort {
        Sort::Watts => "watts",
        Sort::Energy => "energy",
    }
}

/// Asks the engine every interval; prints each new window once.
fn follow(client: &crate::client::Client, o: &Options) -> Result<()> {
    let path = format!("/v1/processes?limit={}&sort={}", o.limit, sort_name(o.sort));
    let mut printed = 0u64;
    let mut last_at = None;
    while o.count.is_none_or(|c| printed < c) {
        let top: Top = client.get_as(&path)?;
        if top.at.is_none() {
            if let Some(why) = &top.unavailable {
                anyhow::bail!("programs cannot be measured there: {why}");
            }
        }
        if due(top.at, last_at, o.interval) {
            last_at = top.at;
            print(&top, o.json)?;
            printed += 1;
        }
        std::thread::sleep(o.interval);
    }
    Ok(())
}

async fn top_here(o: &Options) -> Result<()> {
    let (prefs, notice) = crate::engine::load_prefs(|m| eprintln!("wattbar-cli: {m}"))?;
    let chain = crate::engine::open_sources(Default::default()).await?;
    let mut config = EngineConfig::new(prefs).with_store(paths::database_path()?);
    config.notice = notice;
    let engine = wattbar_engine::spawn(chain, config)?;
    let mut rx = engine.subscribe();
    let mut printed = 0u64;
    let mut last_at: Option<f64> = None;
    let stop = crate::engine::terminated();
    tokio::pin!(stop);
    while o.count.is_none_or(|c| printed < c) {
        tokio::select! {
            changed = rx.changed() => changed.context("the engine stopped")?,
            _ = &mut stop => break,
        }
        let programs = rx.borrow_and_update().programs.clone();
        let Some(at) = programs.at else {
            if let Some(why) = &programs.unavailable {
                anyhow::bail!("programs cannot be measured here: {why}");
            }
            continue;
        };
        if due(Some(at), last_at, o.interval) {
            last_at = Some(at);
            print(&programs.top(o.limit, o.sort), o.json)?;
            printed += 1;
        }
    }
    engine
        .shutdown()
        .await
        .context("the last batch could not be written")?;
    Ok(())
}

/// A window ending at `at` is printed when none was, or when it ended at least `interval` after
/// the one printed last (by the windows' own times: half a second early still counts, since
/// windows end on the engine's samples, not on this process's clock).
fn due(at: Option<f64>, last: Option<f64>, interval: Duration) -> bool {
    match (at, last) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(at), Some(last)) => at - last >= interval.as_secs_f64() - 0.5,
    }
}

fn print(top: &Top, json: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(top)?)?;
        out.flush()?;
        return Ok(());
    }
    if out.is_terminal() {
        // Like top: the table replaces the one before.
        write!(out, "\x1b[H\x1b[2J")?;
    }
    writeln!(
        out,
        "{:<32} {:>9} {:>12}  quality",
        "program", "watts", "energy (J)"
    )?;
    // Unknown watts (a window with no measured power) are a dash, never 0.00.
    let watts = |w: Option<f64>| w.map_or("—".to_string(), |w| format!("{w:.2}"));
    for p in &top.programs {
        let gpu = match p.gpu_watts {
            Some(g) if g > 0.0 => format!("  (GPU {g:.2} W)"),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:<32} {:>9} {:>12.1}  {}{gpu}",
            p.shown_name(),
            watts(p.watts),
            p.joules,
            p.quality.map_or("—", |q| q.as_str())
        )?;
    }
    if top.others > 0 {
        writeln!(
            out,
            "{:<32} {:>9} {:>12.1}",
            format!("({} more)", top.others),
            "",
            top.others_joules
        )?;
    }
    writeln!(
        out,
        "{:<32} {:>9} {:>12.1}",
        "idle",
        watts(top.idle_watts),
        top.idle_joules
    )?;
    writeln!(
        out,
        "{:<32} {:>9} {:>12.1}",
        "unattributed",
        watts(top.unattributed_watts),
        top.unattributed_joules
    )?;
    if let Some(note) = &top.gpu_note {
        writeln!(out, "{note}")?;
    }
    if let Some(why) = &top.unavailable {
        writeln!(out, "not measured: {why}")?;
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_printed_by_its_own_time_not_this_processs_clock() {
        let ten = Duration::from_secs(10);
        assert!(!due(None, None, ten), "no window yet");
        assert!(due(Some(100.0), None, ten), "the first window");
        assert!(!due(Some(100.0), Some(100.0), ten), "the same window again");
        assert!(
            due(Some(109.9), Some(100.0), ten),
            "a window ending a little early"
        );
        assert!(!due(Some(105.0), Some(100.0), Duration::from_secs(30)));
    }
}
