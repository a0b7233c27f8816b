//! wattbar-cli: the Wattbar engine without a desktop.

mod integrate;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde::Serialize;
use std::io::Write;
use std::time::Duration;
use wattbar_core::prefs::parse_duration;
use wattbar_core::Preferences;
use wattbar_engine::{
    build_chain, paths, prefs_file, unix_now, ChainOptions, Command, EngineConfig, Published,
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
        /// How often samples are written to the store, e.g. 5s.
        #[arg(long, default_value = "5s", value_parser = parse_batch)]
        batch: Duration,
    },
    /// Each source on this machine, in priority order: available or not, why, and its quality (JSON).
    Sources,
    /// Energy of a CSV with `t,watts` or `t,joules` (t in seconds), optionally a `domain` column (JSON).
    Integrate { file: std::path::PathBuf },
    /// Session, today, this month and lifetime from the store, as kWh, cost and currency.
    Totals {
        #[arg(long)]
        json: bool,
    },
    /// Read every Linux source once from a sysfs root; with --then, again from a second root as
    /// if --after seconds had passed, which turns energy counters into watts (JSON).
    Probe {
        #[arg(long)]
        sysfs_root: std::path::PathBuf,
        #[arg(long, requires = "after")]
        then: Option<std::path::PathBuf>,
        #[arg(long, requires = "then")]
        after: Option<f64>,
    },
    /// Parse a macOS capture (JSON): ioreg (text or plist), powermetrics (text or a plist
    /// stream), pmset-batt, pmset-g, top, macmon (pipe JSON lines).
    Parse {
        kind: String,
        file: std::path::PathBuf,
    },
    /// End the running session; a running Wattbar starts a new one at its next batch (≤ 5 s).
    ResetSession,
    /// Run the engine with the local HTTP API: Prometheus /metrics, /v1/… JSON and SSE, and the
    /// dashboard at /. Loopback only unless --allow-remote. SIGTERM writes the store and exits 0.
    Serve {
        /// Address and port to listen on.
        #[arg(long, default_value = wattbar_engine::api::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Allow a --listen address other than loopback (anyone who reaches it can read).
        #[arg(long)]
        allow_remote: bool,
        /// Sampling interval, e.g. 1s, 100ms; default: the preference.
        #[arg(long, value_parser = parse_interval)]
        interval: Option<Duration>,
        /// How often samples are written to the store, e.g. 5s.
        #[arg(long, default_value = "5s", value_parser = parse_batch)]
        batch: Duration,
        /// The dashboard's files (default: found beside the binary or in the source tree).
        #[arg(long)]
        ui: Option<std::path::PathBuf>,
    },
    /// Print the bearer token the API's writes need (made on first use, mode 0600).
    Token,
    /// Ask a running `serve` (or the tray app) to turn low-power mode on or off, or show it.
    LowPower {
        #[arg(value_parser = ["on", "off", "status"], default_value = "status")]
        state: String,
        /// The API's address.
        #[arg(long, default_value = wattbar_engine::api::DEFAULT_LISTEN)]
        api: std::net::SocketAddr,
    },
    /// History from the store: one row per minute or hour with mean and max watts and joules.
    Export {
        /// Start: Unix seconds, or a duration back from now such as 24h or 30m.
        #[arg(long, default_value = "24h")]
        from: String,
        /// End: Unix seconds, or `now`.
        #[arg(long, default_value = "now")]
        to: String,
        /// 1m or 1h.
        #[arg(long, default_value = "1m")]
        step: String,
        /// csv or json.
        #[arg(long, default_value = "csv")]
        format: String,
    },
}

fn parse_batch(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
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

async fn watch(
    interval: Duration,
    count: Option<u64>,
    format: Format,
    batch: Duration,
) -> Result<()> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems) = prefs_file::load(&prefs_path)?;
    for problem in problems {
        eprintln!(
            "wattbar-cli: {}: {problem}; using the default",
            prefs_path.display()
        );
    }
    let chain = build_chain(&ChainOptions::from_env())?;
    let mut config = EngineConfig::new(prefs).with_store(paths::database_path()?);
    config.batch_interval = batch;
    let engine = wattbar_engine::spawn(chain, config);
    if let Some(notice) = &engine.current().notice {
        eprintln!("wattbar-cli: {notice}");
    }
    engine.send(Command::SetInterval(interval))?;
    let mut rx = engine.subscribe();
    let mut last_sample = None;
    let mut printed = 0u64;
    let mut out = std::io::stdout().lock();
    let mut origin = None;
    if format == Format::Csv {
        writeln!(out, "t,watts,domain,quality")?;
    }
    let stop = terminated();
    tokio::pin!(stop);
    while count.is_none_or(|c| printed < c) {
        tokio::select! {
            changed = rx.changed() => changed.context("the engine stopped")?,
            _ = &mut stop => break,
        }
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
    engine.shutdown().await;
    Ok(())
}

/// Resolves on Ctrl+C or SIGTERM, so that the last batch is written before exit.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Samples twice (counters and utilisation need two reads) and prints every source's status.
fn sources() -> Result<()> {
    let mut chain = build_chain(&ChainOptions::from_env())?;
    let origin = std::time::Instant::now();
    let stamp = || wattbar_core::Stamp::new(origin.elapsed(), unix_now());
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

fn integrate_file(file: &std::path::Path) -> Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    match integrate::integrate(&text) {
        Ok(report) => {
            println!("{}", serde_json::to_string(&report)?);
            Ok(())
        }
        Err(e) => bail!("{}: {e}", file.display()),
    }
}

fn totals(json: bool) -> Result<()> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, _) = prefs_file::load(&prefs_path)?;
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    let (store, moved) = wattbar_engine::store::Store::open(&db, unix_now())?;
    if let Some(m) = moved {
        eprintln!(
            "wattbar-cli: the database was damaged ({}); moved to {}",
            m.reason,
            m.to.display()
        );
    }
    let now = unix_now();
    let session = store.latest_session()?;
    let currency = session
        .as_ref()
        .map(|s| s.currency.clone())
        .unwrap_or_else(|| prefs.currency.to_string());
    let row = |joules: f64, cost: f64| serde_json::json!({"kwh": joules / wattbar_core::JOULES_PER_KWH, "cost": cost, "currency": currency});
    let today = store.day(now)?;
    let month = store.month(now)?;
    let lifetime = store.lifetime()?;
    let report = serde_json::json!({
        "session": session.as_ref().map(|s| row(s.joules, s.cost)),
        "today": row(today.joules, today.cost),
        "month": row(month.joules, month.cost),
        "lifetime": row(lifetime.joules, lifetime.cost),
    });
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for key in ["session", "today", "month", "lifetime"] {
            let v = &report[key];
            println!(
                "{key:<9} {:>12.6} kWh  {:>10.4} {}",
                v["kwh"].as_f64().unwrap_or(0.0),
                v["cost"].as_f64().unwrap_or(0.0),
                currency
            );
        }
    }
    Ok(())
}

/// `now`, Unix seconds, or a duration back from now (`24h`, `30m`, `7d`).
fn parse_time(text: &str, now: f64) -> Result<f64> {
    let t = text.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Ok(v) = t.parse::<f64>() {
        if v.is_finite() && v >= 0.0 {
            return Ok(v);
        }
    }
    let back = match t.strip_suffix('d') {
        Some(days) => days
            .parse::<f64>()
            .ok()
            .filter(|d| d.is_finite() && *d > 0.0)
            .map(|d| d * 86_400.0),
        None => t
            .strip_suffix('h')
            .and_then(|h| h.parse::<f64>().ok())
            .filter(|h| h.is_finite() && *h > 0.0)
            .map(|h| h * 3600.0)
            .or_else(|| parse_duration(t).ok().map(|d| d.as_secs_f64())),
    };
    match back {
        Some(secs) => Ok(now - secs),
        None => bail!("{t:?} is not `now`, Unix seconds, or a duration such as 24h"),
    }
}

fn export(from: &str, to: &str, step: &str, format: &str) -> Result<()> {
    let now = unix_now();
    let (from, to) = (parse_time(from, now)?, parse_time(to, now)?);
    if from >= to {
        bail!("--from must be before --to");
    }
    let step = match step {
        "1m" => wattbar_engine::store::Step::Minute,
        "1h" => wattbar_engine::store::Step::Hour,
        other => bail!("--step {other:?}: use 1m or 1h"),
    };
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    let (store, _) = wattbar_engine::store::Store::open(&db, now)?;
    let points = store.history(from, to, step)?;
    let mut out = std::io::stdout().lock();
    match format {
        "json" => writeln!(out, "{}", serde_json::to_string(&points)?)?,
        "csv" => {
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
        other => bail!("--format {other:?}: use csv or json"),
    }
    Ok(())
}

/// The `probe`/`parse` output shape: `{"samples": [{"readings": [...], "state": {...}}]}`.
fn samples_json(samples: &[wattbar_sources::Sample]) -> serde_json::Value {
    let samples: Vec<serde_json::Value> = samples
        .iter()
        .map(|s| {
            let readings: Vec<serde_json::Value> = s
                .readings
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "domain": r.domain,
                        "device": r.device,
                        "watts": r.watts.map(|w| w.0),
                        "source": r.source,
                        "quality": r.quality,
                    })
                })
                .collect();
            serde_json::json!({"readings": readings, "state": s.state})
        })
        .collect();
    serde_json::json!({ "samples": samples })
}

fn probe(root: &std::path::Path, then: Option<&std::path::Path>, after: Option<f64>) -> Result<()> {
    if !root.is_dir() {
        bail!("{} is not a directory", root.display());
    }
    let then = match (then, after) {
        (Some(dir), Some(secs)) => {
            if !dir.is_dir() {
                bail!("{} is not a directory", dir.display());
            }
            if !secs.is_finite() || secs <= 0.0 {
                bail!("--after must be a positive number of seconds");
            }
            Some((dir, Duration::from_secs_f64(secs)))
        }
        _ => None,
    };
    let options = ChainOptions::from_env();
    let model = wattbar_sources::CpuPowerModel::detect(root, options.cpu_tdp_watts);
    let sample = wattbar_sources::linux::probe(root, then, model);
    println!("{}", serde_json::to_string(&samples_json(&[sample]))?);
    Ok(())
}

fn parse(kind: &str, file: &std::path::Path) -> Result<()> {
    use wattbar_sources::macos::{ioreg, macmon, pmset, powermetrics, top};
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let at = wattbar_core::Stamp::default();
    let fail = |e: wattbar_sources::Error| anyhow::anyhow!("{}: {e}", file.display());
    let samples: Vec<wattbar_sources::Sample> = match kind {
        "ioreg" => vec![ioreg::parse_ioreg(&text).map_err(fail)?.to_sample(at)],
        "powermetrics" => powermetrics::parse_powermetrics(&text)
            .map_err(fail)?
            .iter()
            .map(|r| r.to_sample(at))
            .collect(),
        "pmset-batt" => vec![pmset::parse_pmset_batt(&text).map_err(fail)?.to_sample(at)],
        "pmset-g" => vec![pmset::parse_pmset_g(&text).map_err(fail)?.to_sample(at)],
        "top" => {
            let model = wattbar_sources::CpuPowerModel::detect(
                std::path::Path::new("/"),
                ChainOptions::from_env().cpu_tdp_watts,
            );
            vec![top::parse_top(&text)
                .map_err(fail)?
                .to_sample_with_model(&model, at)]
        }
        "macmon" => {
            let mut channels = macmon::MacmonChannels::default();
            macmon::parse_macmon_json(&text)
                .map_err(fail)?
                .iter()
                .map(|s| channels.to_sample(s, at))
                .collect()
        }
        other => bail!(
            "unknown kind {other:?}: use ioreg, powermetrics, pmset-batt, pmset-g, top or macmon"
        ),
    };
    println!("{}", serde_json::to_string(&samples_json(&samples))?);
    Ok(())
}

async fn serve(
    listen: std::net::SocketAddr,
    allow_remote: bool,
    interval: Option<Duration>,
    batch: Duration,
    ui: Option<std::path::PathBuf>,
) -> Result<()> {
    use wattbar_engine::api;
    let mut extra_hosts = Vec::new();
    if !api::is_loopback(&listen) {
        if !allow_remote {
            bail!(
                "{listen} is not a loopback address: anyone who can reach it could read this \
                 machine's power data. Pass --allow-remote to serve it anyway"
            );
        }
        tracing::warn!(
            "serving on {listen}, beyond this machine: reads need no token, writes need the token"
        );
        extra_hosts.push(match listen.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        });
    }
    let token = wattbar_engine::token::load_or_create(&paths::data_dir()?)?;
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems) = prefs_file::load(&prefs_path)?;
    for problem in problems {
        tracing::warn!("{}: {problem}; using the default", prefs_path.display());
    }
    let db = paths::database_path()?;
    let chain = build_chain(&ChainOptions::from_env())?;
    let mut config = EngineConfig::new(prefs).with_store(db.clone());
    config.batch_interval = batch;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let engine = wattbar_engine::spawn(chain, config);
    if let Some(notice) = &engine.current().notice {
        tracing::warn!("{notice}");
    }
    if let Some(interval) = interval {
        engine.send(Command::SetInterval(interval))?;
    }
    let ui_dir = api::find_ui_dir(ui);
    if ui_dir.is_none() {
        tracing::warn!("the dashboard's files were not found: / answers 404 (pass --ui DIR)");
    }
    let addr = listener.local_addr()?;
    tracing::info!("serving on http://{addr}/ (metrics at /metrics)");
    let config = api::ApiConfig {
        token,
        extra_hosts,
        db_path: Some(db),
        ui_dir,
    };
    let served = api::serve(listener, engine.reader(), config, terminated()).await;
    engine.shutdown().await;
    tracing::info!("stopped; the store is written");
    served.context("the API server failed")
}

fn token() -> Result<()> {
    let token = wattbar_engine::token::load_or_create(&paths::data_dir()?)?;
    println!("{token}");
    Ok(())
}

fn low_power(state: &str, api: std::net::SocketAddr) -> Result<()> {
    let url = format!("http://{api}/v1/low-power");
    let reply = match state {
        "status" => ureq::get(&url).call(),
        on_off => {
            let token = wattbar_engine::token::load_or_create(&paths::data_dir()?)?;
            ureq::put(&url)
                .set("Authorization", &format!("Bearer {token}"))
                .send_json(serde_json::json!({ "enabled": on_off == "on" }))
        }
    };
    match reply {
        Ok(r) => {
            let body: serde_json::Value = r.into_json()?;
            println!("{body}");
            Ok(())
        }
        Err(ureq::Error::Status(code, r)) => {
            let body = r.into_string().unwrap_or_default();
            bail!("{url}: {code} {body}")
        }
        Err(e) => bail!("is Wattbar running with its API on {api}? {e}"),
    }
}

fn reset_session() -> Result<()> {
    let db = paths::database_path()?;
    if !db.exists() {
        bail!("no energy recorded yet: {} does not exist", db.display());
    }
    let (mut store, _) = wattbar_engine::store::Store::open(&db, unix_now())?;
    let ended = store.end_running_sessions(unix_now())?;
    println!("{}", serde_json::json!({"ended_sessions": ended}));
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // The daemon logs what it does; one-shot commands only what went wrong. RUST_LOG overrides.
    let default_level = match cli.command {
        Cmd::Serve { .. } => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
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
            batch,
        } => {
            let format = match (json, csv) {
                (true, _) => Format::Json,
                (_, true) => Format::Csv,
                _ => Format::Human,
            };
            runtime.block_on(watch(interval, count, format, batch))
        }
        Cmd::Sources => sources(),
        Cmd::Integrate { file } => integrate_file(&file),
        Cmd::Totals { json } => totals(json),
        Cmd::ResetSession => reset_session(),
        Cmd::Serve {
            listen,
            allow_remote,
            interval,
            batch,
            ui,
        } => runtime.block_on(serve(listen, allow_remote, interval, batch, ui)),
        Cmd::Token => token(),
        Cmd::LowPower { state, api } => low_power(&state, api),
        Cmd::Parse { kind, file } => parse(&kind, &file),
        Cmd::Probe {
            sysfs_root,
            then,
            after,
        } => probe(&sysfs_root, then.as_deref(), after),
        Cmd::Export {
            from,
            to,
            step,
            format,
        } => export(&from, &to, &step, &format),
    }
}
