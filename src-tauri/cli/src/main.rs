//! wattbar-cli: the Wattbar engine without a desktop.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde::Serialize;
use std::io::Write;
use std::time::Duration;
use wattbar_core::prefs::parse_duration;
use wattbar_core::Preferences;
use wattbar_engine::{
    build_chain, paths, prefs_file, ChainOptions, Command, EngineConfig, Published,
};

#[derive(Parser)]
#[command(
    name = "wattbar-cli",
    version,
    about = "Wattbar's power engine, headless"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print one line per sample: watts, quality, source and session energy.
    Watch {
        /// Sampling interval, e.g. 1s, 500ms (100 ms – 60 s).
        #[arg(long, default_value = "1s", value_parser = parse_interval)]
        interval: Duration,
        /// Stop after this many samples.
        #[arg(long)]
        count: Option<u64>,
        /// One JSON object per line.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Record a replay trace: `t,watts,domain,quality`, t in seconds from the first sample.
        #[arg(long)]
        csv: bool,
    },
    /// Each source on this machine, in priority order: available or not, why, and its quality (JSON).
    Sources,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text).map_err(|e| e.to_string())?;
    Preferences::validate_interval(d.as_millis() as u64).map_err(|e| e.to_string())
}

/// One `watch --json` line.
#[derive(Serialize)]
struct WatchLine<'a> {
    t: f64,
    watts: Option<f64>,
    quality: Option<&'a str>,
    source: Option<&'a str>,
    domain: Option<&'a str>,
    session_joules: f64,
}

fn watch_line(p: &Published) -> Option<WatchLine<'_>> {
    let snap = p.snapshot.as_ref()?;
    let head = snap.headline.as_ref();
    Some(WatchLine {
        t: snap.at.unix_seconds,
        watts: head.and_then(|h| h.watts).map(|w| w.0),
        quality: head.map(|h| h.quality.as_str()),
        source: head.map(|h| h.source.as_str()),
        domain: head.map(|h| h.domain.as_str()),
        session_joules: p.session.joules.0,
    })
}

fn human_line(p: &Published) -> Option<String> {
    let snap = p.snapshot.as_ref()?;
    let watts = match snap.headline.as_ref().and_then(|h| h.watts.map(|w| (h, w))) {
        Some((h, w)) => format!("{:>8.1} W  {:<9}  {}", w.0, h.quality, h.source),
        None => {
            let why: Vec<String> = snap
                .unavailable
                .iter()
                .map(|u| format!("{}: {}", u.source, u.reason))
                .collect();
            format!("     -- W  no reading ({})", why.join("; "))
        }
    };
    Some(format!(
        "{watts}  session {:.6} kWh  {:.4} {}",
        p.session.kwh, p.session.cost, p.session.currency
    ))
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Human,
    Json,
    Csv,
}

/// One row of a replay trace (see `wattbar_sources::replay`).
fn csv_line(p: &Published, origin: Duration) -> Option<String> {
    let snap = p.snapshot.as_ref()?;
    let t = snap.at.monotonic.saturating_sub(origin).as_secs_f64();
    Some(match snap.headline.as_ref() {
        Some(h) => format!(
            "{t:.3},{},{},{}",
            h.watts.map(|w| w.0.to_string()).unwrap_or_default(),
            h.domain,
            h.quality
        ),
        None => format!("{t:.3},,system,measured"),
    })
}

async fn watch(interval: Duration, count: Option<u64>, format: Format) -> Result<()> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems) = prefs_file::load(&prefs_path)?;
    for problem in problems {
        eprintln!(
            "wattbar-cli: {}: {problem}; using the default",
            prefs_path.display()
        );
    }
    let chain = build_chain(&ChainOptions::from_env())?;
    let engine = wattbar_engine::spawn(chain, EngineConfig::new(prefs));
    engine.send(Command::SetInterval(interval))?;
    let mut rx = engine.subscribe();
    let mut last_sample = None;
    let mut printed = 0u64;
    let mut out = std::io::stdout().lock();
    let mut origin = None;
    if format == Format::Csv {
        writeln!(out, "t,watts,domain,quality")?;
    }
    while count.is_none_or(|c| printed < c) {
        rx.changed().await.context("the engine stopped")?;
        let p = rx.borrow_and_update().clone();
        let at = p.snapshot.as_ref().map(|s| s.at.monotonic);
        if at.is_none() || at == last_sample {
            continue;
        }
        last_sample = at;
        let line = match format {
            Format::Json => watch_line(&p)
                .map(|l| serde_json::to_string(&l))
                .transpose()?,
            Format::Human => human_line(&p),
            Format::Csv => {
                let origin = *origin.get_or_insert(at.unwrap_or_default());
                csv_line(&p, origin)
            }
        };
        if let Some(line) = line {
            writeln!(out, "{line}")?;
            out.flush()?;
            printed += 1;
        }
    }
    engine.stop();
    Ok(())
}

/// Samples twice (counters and utilisation need two reads) and prints every source's status.
fn sources() -> Result<()> {
    let mut chain = build_chain(&ChainOptions::from_env())?;
    let origin = std::time::Instant::now();
    let stamp = || {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        wattbar_core::Stamp::new(origin.elapsed(), unix)
    };
    chain.sample(stamp());
    std::thread::sleep(Duration::from_millis(250));
    let snapshot = chain.sample(stamp());
    let report = serde_json::json!({
        "sources": chain.status(&snapshot),
        "headline": snapshot.headline,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    match cli.command {
        Cmd::Watch {
            interval,
            count,
            json,
            csv,
        } => {
            let format = match (json, csv) {
                (true, _) => Format::Json,
                (_, true) => Format::Csv,
                _ => Format::Human,
            };
            runtime.block_on(watch(interval, count, format))
        }
        Cmd::Sources => sources(),
    }
}
