//! `wattbar-cli watch`: one line per sample. One engine per data folder: when one already
//! records, `watch` follows it through its API instead of starting a second.

use anyhow::{Context, Result};
use std::io::Write;
use std::time::Duration;
use wattbar_engine::home::paths;
use wattbar_engine::{Command, EngineConfig};
use wattbar_serve::view::StatePayload;

#[derive(Clone, Copy, PartialEq)]
pub enum Format {
    Human,
    Json,
    Csv,
}

/// How `watch` prints the states it sees, from its own engine or another's stream.
struct Printer {
    format: Format,
    origin: Option<f64>,
    last: Option<f64>,
}

impl Printer {
    fn new(format: Format) -> Self {
        Printer {
            format,
            origin: None,
            last: None,
        }
    }

    fn header(&self) -> Option<&'static str> {
        (self.format == Format::Csv).then_some("t,watts,domain,quality")
    }

    /// The line for a state; `None` before the first sample and for a sample already printed.
    fn line(&mut self, s: &StatePayload) -> Result<Option<String>> {
        let Some(t) = s.at else {
            return Ok(None);
        };
        if self.last == Some(t) {
            return Ok(None);
        }
        self.last = Some(t);
        Ok(Some(match self.format {
            Format::Json => serde_json::to_string(&serde_json::json!({
                "t": t,
                "watts": s.watts,
                "quality": s.quality,
                "source": s.source,
                "domain": s.domain,
                "scope": s.scope,
                "covers": s.covers,
                "session_joules": s.session_joules,
                "energy_method": s.energy_method,
            }))?,
            Format::Human => {
                let watts = match (s.watts, s.quality, &s.source) {
                    (Some(w), Some(q), Some(src)) => {
                        let covers = s.scope_text.as_deref().unwrap_or("unknown");
                        format!("{w:>8.1} W  {:<9}  {src} ({covers})", q.as_str())
                    }
                    _ => {
                        let why: Vec<String> = s
                            .unavailable
                            .iter()
                            .map(|u| format!("{}: {}", u.source, u.reason))
                            .collect();
                        format!("     -- W  no reading ({})", why.join("; "))
                    }
                };
                format!(
                    "{watts}  session {:.6} kWh  {:.4} {}",
                    s.session_joules / wattbar_core::JOULES_PER_KWH,
                    s.session_cost,
                    s.currency
                )
            }
            Format::Csv => {
                let origin = *self.origin.get_or_insert(t);
                format!(
                    "{:.3},{},{},{}",
                    t - origin,
                    s.watts.map(|w| w.to_string()).unwrap_or_default(),
                    s.domain.map_or("system", |d| d.as_str()),
                    s.quality.map_or("measured", |q| q.as_str())
                )
            }
        }))
    }
}

pub fn watch(
    runtime: &tokio::runtime::Runtime,
    interval: Duration,
    count: Option<u64>,
    format: Format,
    batch: Duration,
    wall: crate::args::WallMeterArgs,
) -> Result<()> {
    if let Some(client) = crate::client::running().context("cannot watch")? {
        eprintln!(
            "wattbar-cli: another Wattbar engine{} records into this data folder; following it at {}/",
            client.pid_text(),
            client.base()
        );
        return follow(&client, count, format);
    }
    runtime.block_on(watch_here(interval, count, format, batch, wall))
}

/// Prints the states of the engine `client` reaches, from its event stream.
fn follow(client: &crate::client::Client, count: Option<u64>, format: Format) -> Result<()> {
    let url = format!("{}/v1/stream", client.base());
    let stream = client
        .stream()
        .with_context(|| format!("cannot follow {url}"))?;
    let mut printer = Printer::new(format);
    let mut out = std::io::stdout().lock();
    if let Some(h) = printer.header() {
        writeln!(out, "{h}")?;
    }
    let mut printed = 0u64;
    for data in stream {
        if count.is_some_and(|c| printed >= c) {
            break;
        }
        let data = data?;
        let state: StatePayload =
            serde_json::from_str(&data).with_context(|| format!("{url}: not a Wattbar state"))?;
        if let Some(text) = printer.line(&state)? {
            writeln!(out, "{text}")?;
            out.flush()?;
            printed += 1;
        }
    }
    Ok(())
}

async fn watch_here(
    interval: Duration,
    count: Option<u64>,
    format: Format,
    batch: Duration,
    wall: crate::args::WallMeterArgs,
) -> Result<()> {
    let (prefs, notice) = crate::engine::load_prefs(|m| eprintln!("wattbar-cli: {m}"))?;
    let chain = crate::engine::open_sources(wall).await?;
    let mut config = EngineConfig::new(prefs).with_store(paths::database_path()?);
    config.notice = notice;
    config.batch_interval = batch;
    let prefs_notice = config.notice.clone();
    let engine = wattbar_engine::spawn(chain, config)?;
    let current = engine.current();
    if let Some(notice) = current
        .kept
        .notice
        .as_ref()
        .filter(|n| Some(*n) != prefs_notice.as_ref())
    {
        eprintln!("wattbar-cli: {notice}");
    }
    engine.send(Command::SetInterval(interval))?;
    let printed = print_states(&engine, count, format).await;
    // Whatever ended the printing (a count, a signal, a reader gone), what was measured is kept.
    let written = engine.shutdown().await;
    let printed = match printed {
        Err(e) if crate::is_broken_pipe(&e) => Ok(()),
        other => other,
    };
    written.context("the last batch could not be written")?;
    printed
}

async fn print_states(
    engine: &wattbar_engine::EngineHandle,
    count: Option<u64>,
    format: Format,
) -> Result<()> {
    let mut rx = engine.subscribe();
    let mut printer = Printer::new(format);
    let mut printed = 0u64;
    let mut out = std::io::stdout().lock();
    if let Some(h) = printer.header() {
        writeln!(out, "{h}")?;
    }
    let stop = crate::engine::terminated();
    tokio::pin!(stop);
    while count.is_none_or(|c| printed < c) {
        tokio::select! {
            changed = rx.changed() => changed.context("the engine stopped")?,
            _ = &mut stop => break,
        }
        let p = rx.borrow_and_update().clone();
        if let Some(line) = printer.line(&StatePayload::from(p.as_ref()))? {
            writeln!(out, "{line}")?;
            out.flush()?;
            printed += 1;
        }
    }
    Ok(())
}
