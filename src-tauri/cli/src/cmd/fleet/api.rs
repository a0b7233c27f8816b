//! `--hosts`: each machine's own `GET /v1/summary`, one task per host on its own pace, at most
//! [`MAX_IN_FLIGHT`] requests at once.

use super::http::{printable, Http};
use super::view::{FleetView, HostRow, MAX_BACKOFF, MAX_IN_FLIGHT};
use anyhow::{bail, Context, Result};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use wattbar_core::energy::MAX_POWER_WATTS;
use wattbar_serve::summary::Summary;

/// The port a host is asked on when none is given: the API's.
pub const DEFAULT_PORT: u16 = wattbar_serve::api::DEFAULT_PORT;

/// One host: the name it is shown by and where its summary is.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub shown: String,
    pub uri: hyper::Uri,
}

impl Target {
    /// `host`, `host:port`, `[v6]:port` or `http://host:port[/]`.
    pub fn parse(text: &str) -> Result<Target> {
        let t = text.trim().trim_end_matches('/');
        if t.starts_with("https://") {
            bail!(
                "{t}: https is not supported; reach the API over plain HTTP (a VPN, an SSH tunnel)"
            );
        }
        let authority = t.strip_prefix("http://").unwrap_or(t);
        if authority.contains('@') {
            bail!(
                "{}: a host is given without a user or password (its API's reads need none, and \
                 ps and logs would show them)",
                wattbar_outbound::shown(&format!("http://{authority}"))
            );
        }
        if authority.is_empty() || authority.contains('/') {
            bail!("{text:?} is not a host, host:port or http://host:port");
        }
        let parsed: hyper::http::uri::Authority = authority
            .parse()
            .with_context(|| format!("{text:?} is not a host or host:port"))?;
        let with_port = match parsed.port_u16() {
            Some(_) => authority.to_string(),
            None => format!("{authority}:{DEFAULT_PORT}"),
        };
        let uri: hyper::Uri = format!("http://{with_port}/v1/summary")
            .parse()
            .with_context(|| format!("{text:?} is not a host or host:port"))?;
        Ok(Target {
            shown: with_port,
            uri,
        })
    }
}

/// What one host said: its row, judged.
type Report = (usize, HostRow);

/// Polls every target until `show` says stop (it returns false) and calls `show` with the view
/// every `interval`: the first time once every host answered or failed once.
pub async fn run(
    targets: Vec<Target>,
    interval: Duration,
    timeout: Duration,
    stale: Duration,
    show: &mut impl FnMut(&FleetView) -> Result<bool>,
) -> Result<()> {
    if targets.is_empty() {
        bail!("no hosts to watch");
    }
    let http = Http::new(timeout);
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let (tx, mut rx) = mpsc::channel::<Report>(targets.len().max(16));
    let mut rows: Vec<HostRow> = targets.iter().map(|t| HostRow::pending(&t.shown)).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, target) in targets.into_iter().enumerate() {
        tasks.spawn(poll_host(
            i,
            target,
            http.clone(),
            permits.clone(),
            tx.clone(),
            interval,
            stale,
        ));
    }
    drop(tx);

    let mut answered = vec![false; rows.len()];
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // The first view waits for every host once (a down one fails within the timeout).
    let first = tokio::time::Instant::now() + timeout + Duration::from_secs(1);
    while !answered.iter().all(|a| *a) && tokio::time::Instant::now() < first {
        match tokio::time::timeout_at(first, rx.recv()).await {
            Ok(Some((i, row))) => {
                answered[i] = true;
                rows[i] = row;
            }
            Ok(None) => bail!("every host's poller stopped"),
            Err(_) => break,
        }
    }
    if !show(&FleetView::new(rows.clone(), wattbar_engine::unix_now()))? {
        return Ok(());
    }
    tick.reset();
    loop {
        tokio::select! {
            report = rx.recv() => match report {
                Some((i, row)) => rows[i] = row,
                None => bail!("every host's poller stopped"),
            },
            _ = tick.tick() => {
                if !show(&FleetView::new(rows.clone(), wattbar_engine::unix_now()))? {
                    return Ok(());
                }
            }
        }
    }
}

/// One host, forever: ask, report, wait its interval (doubled per failure in a row, up to
/// [`MAX_BACKOFF`]), measured from the start of the ask.
async fn poll_host(
    i: usize,
    target: Target,
    http: Http,
    permits: Arc<Semaphore>,
    tx: mpsc::Sender<Report>,
    interval: Duration,
    stale: Duration,
) {
    let mut failures = 0u32;
    let mut last = HostRow::pending(&target.shown);
    loop {
        let started = tokio::time::Instant::now();
        let answer = match permits.acquire().await {
            Ok(_permit) => http.get(&target.uri).await,
            Err(_) => return,
        };
        let row = match answer.and_then(|body| {
            serde_json::from_slice::<Summary>(&body)
                .context("not a Wattbar summary (is this Wattbar's API, 0.1 or newer?)")
        }) {
            Ok(summary) => {
                failures = 0;
                row_of(&target.shown, summary).judged(stale)
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                last.clone().down(format!("{e:#}"))
            }
        };
        last = row.clone();
        if tx.send((i, row)).await.is_err() {
            return;
        }
        let wait = interval
            .saturating_mul(1 << failures.saturating_sub(1).min(16))
            .min(MAX_BACKOFF.max(interval));
        tokio::time::sleep_until(started + wait).await;
    }
}

/// What a host's summary says, as far as it can be believed: its words without control
/// characters (a name with escape sequences would be written to the operator's terminal) and at
/// most [`MAX_SAID_CHARS`] long; its figures where a machine could draw them. A watts figure no
/// machine draws makes the host down, with what it said.
pub(super) fn row_of(shown: &str, s: Summary) -> HostRow {
    let top = s.top_program;
    let row = HostRow {
        host: shown.to_string(),
        name: s.host.map(|n| printable(&n)),
        health: super::view::Health::Up,
        reason: s.unavailable.map(|r| printable(&r)),
        watts: s.watts.filter(|w| w.is_finite()),
        scope: s.scope,
        quality: s.quality,
        source: s.source.map(|n| printable(&n)),
        age_seconds: s.age_seconds.filter(|a| a.is_finite()),
        period_seconds: Some(s.period_seconds).filter(|p| p.is_finite() && *p > 0.0),
        today_kwh: s
            .today
            .as_ref()
            .map(|t| t.kwh)
            .filter(|k| k.is_finite() && *k >= 0.0),
        today_cost: s.today.as_ref().map(|t| t.cost).filter(|c| c.is_finite()),
        currency: s.today.map(|t| printable(&t.currency)),
        low_power: Some(s.low_power),
        top_program_watts: top.as_ref().and_then(|t| t.watts).filter(|w| drawable(*w)),
        top_program: top.map(|t| printable(&t.name)),
    };
    match row.watts {
        Some(w) if !drawable(w) => {
            let said = format!("{w:.0}");
            let said = said.chars().take(24).collect::<String>();
            row.down(format!(
                "it says it draws {said} W, which no machine draws (0 to {} kW): not believed",
                MAX_POWER_WATTS / 1000.0
            ))
        }
        _ => row,
    }
}

/// Whether a machine could draw `watts`: 0 to the engine's own ceiling.
fn drawable(watts: f64) -> bool {
    (0.0..=MAX_POWER_WATTS).contains(&watts)
}
