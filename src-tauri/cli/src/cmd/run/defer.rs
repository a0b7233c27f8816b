//! `run --defer cheapest|greenest`: wait for the start whose window of the job's length has the
//! lowest running mean price (or grid intensity), then run.
//!
//! Rules:
//! - The mean over the whole job decides, not the cheapest single slot (the CATS project's
//!   fix, its issue #42): [`Series::lowest_window`].
//! - The slots are the feed's: asked now, and where it cannot be reached the slots the ledger
//!   kept. A window must lie wholly within the slots known and within `--within`; where none
//!   does, nothing runs, and the reason is said.
//! - The wait follows the wall clock in short steps (a suspend does not stretch it), and Ctrl+C
//!   ends it cleanly, with nothing run.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::time::Duration;
use wattbar_core::prefs::FeedPref;
use wattbar_core::slots::{Quantity, Series, Window};
use wattbar_core::Preferences;
use wattbar_engine::unix_now;
use wattbar_sources::prices::fetch::FeedClient;

/// What a deferral chose, as `--dry-run --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// `cheapest` or `greenest`.
    pub by: &'static str,
    pub start: f64,
    pub end: f64,
    /// The mean over the window chosen: a price per kWh, or gCO₂/kWh for `greenest`.
    pub expected_price_per_kwh: Option<f64>,
    pub now_price_per_kwh: Option<f64>,
    pub expected_g_per_kwh: Option<f64>,
    pub now_g_per_kwh: Option<f64>,
    /// `1 − expected ÷ now`; `None` where starting now costs nothing or less.
    pub saving_fraction: Option<f64>,
    /// The currency of the prices; `None` for carbon.
    pub currency: Option<String>,
    /// Where the slots came from: `feed` or `ledger`.
    pub slots_from: &'static str,
    /// The slots it was chosen from (retail prices, or intensities), which then price the run:
    /// the feed is not asked twice.
    #[serde(skip)]
    pub slots: Series,
}

/// The slots of `pref` (retail for prices) to price a run by: what the ledger kept where it
/// covers `now` (no request at each run), else the feed's answer.
fn pricing_slots(pref: &FeedPref, carbon: bool, now: f64) -> Option<Series> {
    match kept(pref, carbon, now) {
        Some(s) if s.at(now).is_some() => Some(pref.retail(&s)),
        _ => slots_of(pref, carbon, now).ok().map(|(s, _)| s),
    }
}

/// The slots the ledger kept of `pref`'s feed that end after `now`.
fn kept(pref: &FeedPref, carbon: bool, now: f64) -> Option<Series> {
    let quantity = if carbon {
        Quantity::GramsPerKwh
    } else {
        Quantity::PricePerKwh
    };
    let store = wattbar_engine::home::paths::database_path()
        .ok()
        .and_then(|p| wattbar_engine::store::Store::open_read_only(&p).ok())?;
    store.feed_slots(&pref.key(), quantity, now).ok().flatten()
}

/// The slots of `pref` (retail for prices): the feed's answer now, else what the ledger kept.
pub fn slots_of(pref: &FeedPref, carbon: bool, now: f64) -> Result<(Series, &'static str)> {
    let retail = |s: Series| pref.retail(&s);
    let fetched = FeedClient::new(pref).and_then(|c| c.fetch(now, carbon));
    match fetched {
        Ok(s) if !s.slots.is_empty() => Ok((retail(s), "feed")),
        other => {
            let why = match other {
                Err(e) => e.to_string(),
                Ok(_) => "it answered no slots".into(),
            };
            match kept(pref, carbon, now) {
                Some(s) => {
                    eprintln!("wattbar run: the feed gave nothing ({why}); choosing from the slots the ledger kept");
                    Ok((retail(s), "ledger"))
                }
                None => bail!(
                    "the feed gave nothing ({why}), and the ledger keeps no slots of {}",
                    pref.key()
                ),
            }
        }
    }
}

/// The start to wait for: by price (`greenest`: by grid intensity) within `within` of now, for
/// a job of `duration`.
pub fn choose(
    prefs: &Preferences,
    greenest: bool,
    within: Duration,
    duration: Duration,
    now: f64,
) -> Result<Choice> {
    let pref = if greenest {
        prefs.carbon_feed.as_ref().context(
            "--defer greenest needs a carbon feed: set carbon_feed (gb-carbon-intensity, energy-charts or electricity-maps)",
        )?
    } else {
        prefs.price_feed.as_ref().context(
            "--defer cheapest needs a price feed: set price_feed (energy-charts, awattar, octopus-agile, entsoe, tibber or homeassistant)",
        )?
    };
    let (series, from) = slots_of(pref, greenest, now)?;
    let known_to = series.span().map_or(now, |(_, end)| end);
    let latest_end = known_to.min(now + within.as_secs_f64());
    let window: Window = series
        .lowest_window(now, latest_end, duration.as_secs_f64())
        .with_context(|| {
            format!(
                "no window of {} lies within the slots known (to {}) and --within {}",
                minutes(duration),
                local(known_to),
                minutes(within)
            )
        })?;
    let (price, carbon) = if greenest {
        ((None, None), (Some(window.mean), window.now_mean))
    } else {
        ((Some(window.mean), window.now_mean), (None, None))
    };
    Ok(Choice {
        by: if greenest { "greenest" } else { "cheapest" },
        start: window.start,
        end: window.end,
        expected_price_per_kwh: price.0,
        now_price_per_kwh: price.1,
        expected_g_per_kwh: carbon.0,
        now_g_per_kwh: carbon.1,
        saving_fraction: window.saving_fraction,
        currency: series.currency.clone().filter(|_| !greenest),
        slots_from: from,
        slots: series,
    })
}

/// A line for a person: when, and what it saves against starting now.
pub fn said(c: &Choice) -> String {
    let (mean, now, unit) = match (c.expected_price_per_kwh, c.expected_g_per_kwh) {
        (Some(p), _) => (
            p,
            c.now_price_per_kwh,
            format!("{}/kWh", c.currency.as_deref().unwrap_or("")),
        ),
        (None, Some(g)) => (g, c.now_g_per_kwh, "gCO₂/kWh".to_string()),
        (None, None) => (0.0, None, String::new()),
    };
    let saving = c
        .saving_fraction
        .map_or(String::new(), |f| format!(", {:.0} % less", f * 100.0));
    let now = now.map_or("nothing known for starting now".to_string(), |n| {
        format!("{n:.4} now")
    });
    format!(
        "wattbar run: {} start {}–{}: {mean:.4} {unit} on average, against {now}{saving}",
        c.by,
        local(c.start),
        local(c.end)
    )
}

/// What `run` does about `--defer`.
pub(super) enum Deferred {
    /// No `--defer`: run now.
    Now,
    /// The window chosen has come: run.
    After(Box<Choice>),
    /// End with this status and run nothing: a dry run, or Ctrl+C while waiting.
    Exit(i32),
}

/// Chooses the start `args` ask for, says it, and waits for it.
pub(super) async fn deferred(args: &crate::args::RunArgs, prefs: &Preferences) -> Result<Deferred> {
    let Some(by) = args.defer else {
        return Ok(Deferred::Now);
    };
    let duration = match (&args.duration, &args.estimate_from) {
        (Some(d), _) => *d,
        (None, Some(path)) => estimate_from(path)?,
        (None, None) => {
            bail!("--defer needs the job's length: --duration 30m or --estimate-from SUMMARY")
        }
    };
    let greenest = by == crate::args::DeferArg::Greenest;
    let c = choose(prefs, greenest, args.within, duration, unix_now())?;
    let interrupted = crate::engine::terminated();
    eprintln!("{}", said(&c));
    if args.dry_run {
        if args.json {
            use std::io::Write;
            writeln!(std::io::stdout(), "{}", serde_json::to_string(&c)?)?;
        }
        return Ok(Deferred::Exit(0));
    }
    if !wait_until(c.start, interrupted).await {
        eprintln!("wattbar run: interrupted while waiting; nothing ran");
        return Ok(Deferred::Exit(130));
    }
    Ok(Deferred::After(Box::new(c)))
}

/// What prices a run at `now`: the feeds' slots (the price feed's in the preferences'
/// currency only) over the tariffs and the fixed intensity; `chosen`'s slots where a deferral
/// read them already.
pub(super) fn pricing(
    prefs: &Preferences,
    now: f64,
    chosen: Option<&Choice>,
) -> wattbar_core::Pricing {
    let known = |quantity: Quantity| {
        chosen
            .map(|c| &c.slots)
            .filter(|s| s.quantity == quantity)
            .cloned()
    };
    let tariffs = prefs
        .tariff_schedule()
        .unwrap_or_else(|_| wattbar_core::tariff::Tariffs::flat(prefs.price_per_kwh));
    let ours = prefs.currency.as_str();
    wattbar_core::Pricing {
        feed: prefs
            .price_feed
            .as_ref()
            .and_then(|f| known(Quantity::PricePerKwh).or_else(|| pricing_slots(f, false, now)))
            .filter(|s| s.currency.as_deref().is_none_or(|c| c == ours)),
        carbon: prefs
            .carbon_feed
            .as_ref()
            .and_then(|f| known(Quantity::GramsPerKwh).or_else(|| pricing_slots(f, true, now))),
        ..wattbar_core::Pricing::fixed(tariffs, prefs.carbon_g_per_kwh)
    }
}

/// How long a job runs, from an earlier run's summary: the mean of its runs' seconds.
fn estimate_from(path: &std::path::Path) -> Result<Duration> {
    let text = wattbar_engine::home::paths::read_at_most(
        path,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a run's summary: {e}", path.display()))?;
    let seconds: Vec<f64> = v["results"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["runs"].as_array().into_iter().flatten())
        .filter_map(|r| r["seconds"].as_f64())
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    if seconds.is_empty() {
        bail!("{} holds no run with a length", path.display());
    }
    let mean = seconds.iter().sum::<f64>() / seconds.len() as f64;
    Ok(Duration::from_secs_f64(mean))
}

/// What the deferred run paid per kWh beside what was expected.
pub(super) fn outcome(c: &Choice, s: &super::summary::Summary) -> String {
    let runs: Vec<&super::summary::RunFigures> =
        s.results.iter().flat_map(|r| r.runs.iter()).collect();
    let kwh: f64 =
        runs.iter().filter_map(|r| r.gross_joules).sum::<f64>() / wattbar_core::JOULES_PER_KWH;
    let cost: f64 = runs.iter().filter_map(|r| r.cost).sum();
    match c.expected_price_per_kwh {
        Some(expected) if kwh > 0.0 => format!(
            "wattbar run: deferred: paid {:.4} per kWh ({cost:.4} for {kwh:.4} kWh), expected {expected:.4}; starting at once would have been {:.4}",
            cost / kwh,
            c.now_price_per_kwh.unwrap_or(expected)
        ),
        Some(expected) => format!("wattbar run: deferred: expected {expected:.4} per kWh; no energy was measured"),
        None => format!(
            "wattbar run: deferred to the greenest start: expected {:.1} gCO₂/kWh",
            c.expected_g_per_kwh.unwrap_or_default()
        ),
    }
}

/// Waits until `start` (Unix seconds); false when `interrupted` (Ctrl+C or SIGTERM) came first.
pub async fn wait_until(start: f64, interrupted: impl std::future::Future<Output = ()>) -> bool {
    let wait = async {
        loop {
            let left = start - unix_now();
            if left <= 0.0 {
                return;
            }
            tokio::time::sleep(Duration::from_secs_f64(left.min(30.0))).await;
        }
    };
    tokio::select! {
        _ = wait => true,
        _ = interrupted => false,
    }
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 120.0 {
        format!("{s:.0} s")
    } else {
        format!("{:.0} min", s / 60.0)
    }
}

/// Local time, with its date.
fn local(unix: f64) -> String {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_opt(unix.round() as i64, 0)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| format!("{unix}"))
}
