//! The commands that run an engine: `watch` and `serve`. One engine per data folder: when one
//! already records, `watch` follows it through its API, and `serve` refuses to start a second.

use crate::args::Cmd;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;
use wattbar_engine::inference::proxy;
use wattbar_engine::view::StatePayload;
use wattbar_engine::{api, build_chain, paths, prefs_file, ChainOptions, Command, EngineConfig};

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
                "session_joules": s.session_joules,
                "energy_method": s.energy_method,
            }))?,
            Format::Human => {
                let watts = match (s.watts, s.quality, &s.source) {
                    (Some(w), Some(q), Some(src)) => {
                        format!("{w:>8.1} W  {:<9}  {src}", q.as_str())
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

/// Opens the sources off the async worker: NVML measures its counter's update period at start
/// (up to a second).
pub async fn open_sources() -> Result<wattbar_core::Chain> {
    Ok(tokio::task::spawn_blocking(|| build_chain(&ChainOptions::from_env())).await??)
}

pub fn load_prefs(warn: impl Fn(String)) -> Result<wattbar_core::Preferences> {
    let prefs_path = paths::preferences_path()?;
    let (prefs, problems) = prefs_file::load(&prefs_path)?;
    for problem in problems {
        warn(format!(
            "{}: {problem}; using the default",
            prefs_path.display()
        ));
    }
    Ok(prefs)
}

pub fn watch(
    runtime: &tokio::runtime::Runtime,
    interval: Duration,
    count: Option<u64>,
    format: Format,
    batch: Duration,
) -> Result<()> {
    if let Some(holder) = crate::client::running()? {
        let api = crate::client::api_of(&holder).context("cannot watch")?;
        eprintln!(
            "wattbar-cli: another Wattbar engine{} records into this data folder; following it at http://{api}/",
            holder.pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
        );
        return follow(&api, count, format);
    }
    runtime.block_on(watch_here(interval, count, format, batch))
}

/// Prints the states of the engine at `api` from its event stream.
fn follow(api: &str, count: Option<u64>, format: Format) -> Result<()> {
    let url = format!("http://{api}/v1/stream");
    let reply = ureq::get(&url)
        .call()
        .with_context(|| format!("cannot follow {url}"))?;
    let mut printer = Printer::new(format);
    let mut out = std::io::stdout().lock();
    if let Some(h) = printer.header() {
        writeln!(out, "{h}")?;
    }
    let mut printed = 0u64;
    for line in BufReader::new(reply.into_reader()).lines() {
        if count.is_some_and(|c| printed >= c) {
            break;
        }
        let line = line.with_context(|| format!("{url}: the stream broke"))?;
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let state: StatePayload = serde_json::from_str(data.trim())
            .with_context(|| format!("{url}: not a Wattbar state"))?;
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
) -> Result<()> {
    let prefs = load_prefs(|m| eprintln!("wattbar-cli: {m}"))?;
    let chain = open_sources().await?;
    let mut config = EngineConfig::new(prefs).with_store(paths::database_path()?);
    config.batch_interval = batch;
    let engine = wattbar_engine::spawn(chain, config)?;
    if let Some(notice) = &engine.current().notice {
        eprintln!("wattbar-cli: {notice}");
    }
    engine.send(Command::SetInterval(interval))?;
    let mut rx = engine.subscribe();
    let mut printer = Printer::new(format);
    let mut printed = 0u64;
    let mut out = std::io::stdout().lock();
    if let Some(h) = printer.header() {
        writeln!(out, "{h}")?;
    }
    let stop = terminated();
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
    engine.shutdown().await;
    Ok(())
}

/// Resolves on Ctrl+C or SIGTERM, so that the last batch is written before exit.
pub async fn terminated() {
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

pub async fn serve(command: Cmd) -> Result<()> {
    let Cmd::Serve {
        listen,
        allow_remote,
        allow_host,
        interval,
        batch,
        ui,
        llm_proxy,
        llm_upstream,
    } = command
    else {
        bail!("not a serve command");
    };
    let upstream = match llm_proxy {
        Some(_) => {
            let text = match llm_upstream {
                Some(u) if u.contains("://") => u,
                Some(u) => format!("http://{u}"),
                None => proxy::default_upstream(std::env::var("OLLAMA_HOST").ok().as_deref()),
            };
            Some(proxy::Upstream::parse(&text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    if let Some(at) = llm_proxy.filter(|a| !api::is_loopback(a) && !allow_remote) {
        bail!(
            "{at} is not a loopback address: anyone who can reach it could use the model server \
             through the proxy. Pass --allow-remote to serve it anyway"
        );
    }
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
    }
    let token = wattbar_engine::token::load_or_create(&paths::data_dir()?)?;
    let prefs = load_prefs(|m| tracing::warn!("{m}"))?;
    let db = paths::database_path()?;
    let chain = open_sources().await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let mut config = EngineConfig::new(prefs).with_store(db.clone());
    config.batch_interval = batch;
    config.api = Some(addr.to_string());
    config.advice_file = paths::advice_path().ok();
    config.preferences_file = Some(paths::preferences_path()?);
    let engine = wattbar_engine::spawn(chain, config)?;
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
    tracing::info!("serving on http://{addr}/ (metrics at /metrics)");
    let config = api::ApiConfig {
        token,
        extra_hosts: api::remote_hosts(&addr, &allow_host),
        db_path: Some(db),
        ui_dir,
        ..api::ApiConfig::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        terminated().await;
        let _ = stop_tx.send(true);
    });
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let proxied = match (llm_proxy, upstream) {
        (Some(at), Some(upstream)) => {
            let proxy_listener = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("the inference proxy cannot listen on {at}"))?;
            tracing::info!(
                "inference proxy on http://{} → {upstream}: point clients at it \
                 (OLLAMA_HOST={})",
                proxy_listener.local_addr()?,
                proxy_listener.local_addr()?
            );
            let proxy_hosts = api::remote_hosts(&proxy_listener.local_addr()?, &allow_host);
            let tracker = engine.reader().tracker();
            let stop = stopped();
            Some(tokio::spawn(async move {
                proxy::serve(proxy_listener, upstream, tracker, &proxy_hosts, stop).await
            }))
        }
        _ => None,
    };
    let served = api::serve(listener, engine.reader(), config, stopped()).await;
    if let Some(proxied) = proxied {
        let _ = proxied.await;
    }
    engine.shutdown().await;
    tracing::info!("stopped; the store is written");
    served.context("the API server failed")
}
