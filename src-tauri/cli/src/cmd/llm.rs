//! `models` and `inference`: the inference ledger, read-only beside a running engine.

use crate::cmd::cell::cell;
use anyhow::Result;
use wattbar_core::inference::resident::{Residency, ResidentCost};
use wattbar_core::inference::server_totals::{ServerTotal, Sourced, SOURCE_PROXY};
use wattbar_core::inference::{ModelStats, Record};
use wattbar_core::Preferences;
use wattbar_engine::accounting::local_week_seconds;
use wattbar_engine::inference::book::{BASELINE_EVERY, BASELINE_SPAN};
use wattbar_engine::store::Store;
use wattbar_engine::unix_now;

fn csv_cell(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// What each model costs by staying loaded, from the ledger as of its last batch: the idle
/// draw measured per loaded set, and today's resident idle time. Which models are loaded now
/// only a running engine knows (`/v1/models`).
fn resident(store: &Store, prefs: &Preferences) -> Result<Vec<ResidentCost>> {
    let now = unix_now();
    let kept = store.resident_kept(now)?;
    let price = prefs
        .tariff_schedule()
        .map_or(prefs.price_per_kwh, |t| t.price_at(local_week_seconds(now)))
        .per_kwh();
    let residency = Residency::new(
        BASELINE_SPAN.as_secs_f64(),
        BASELINE_EVERY.as_secs_f64(),
        kept,
    );
    Ok(residency.costs(price))
}

/// Per-model figures over every record ever stored, most recently used first, and what each
/// model costs by staying loaded.
pub fn models(format: crate::args::TableFormat) -> Result<()> {
    let prefs = crate::engine::read_prefs()?;
    let (mut models, servers, resident, classes) = match crate::ledger::open_if_any()? {
        Some(store) => (
            store.inference_models(prefs.score_ceiling)?,
            store
                .server_totals()?
                .iter()
                .map(ServerTotal::listed)
                .collect::<Vec<_>>(),
            // A ledger an older Wattbar wrote has no such tables yet: the models still list.
            resident(&store, &prefs).unwrap_or_else(|e| {
                eprintln!("what resident models cost could not be read: {e}");
                Vec::new()
            }),
            wattbar_core::eval::class::classes(
                &store
                    .profiles()?
                    .into_iter()
                    .map(|p| p.profile)
                    .collect::<Vec<_>>(),
            ),
        ),
        None => (Vec::new(), Vec::new(), Vec::new(), Vec::new()),
    };
    models.sort_by(|a, b| b.last.total_cmp(&a.last));
    let proxied: Vec<Sourced<&ModelStats>> = models
        .iter()
        .map(|m| Sourced {
            source: SOURCE_PROXY.into(),
            figures: m,
        })
        .collect();
    match format {
        crate::args::TableFormat::Json => {
            crate::out!(
                "{}",
                serde_json::json!({
                    "models": proxied, "server_models": servers, "resident": resident,
                    "energy_classes": classes
                })
            )?;
        }
        crate::args::TableFormat::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout());
            w.write_record([
                "source",
                "server",
                "model",
                "scope",
                "requests",
                "prompt_tokens",
                "completion_tokens",
                "energy_joules",
                "joules_per_token",
                "net_joules_per_token",
                "tokens_per_second",
                "tokens_per_second_per_watt",
                "score",
                "covers",
            ])?;
            for m in &models {
                w.write_record([
                    SOURCE_PROXY.to_string(),
                    String::new(),
                    m.model.clone(),
                    wattbar_core::Scope::shown(m.scope).to_string(),
                    m.requests.to_string(),
                    m.prompt_tokens.to_string(),
                    m.completion_tokens.to_string(),
                    m.energy_joules.to_string(),
                    csv_cell(m.joules_per_token),
                    csv_cell(m.net_joules_per_token),
                    csv_cell(m.tokens_per_second),
                    csv_cell(m.tokens_per_second_per_watt),
                    csv_cell(m.score),
                    String::new(),
                ])?;
            }
            for Sourced { source, figures: m } in &servers {
                w.write_record([
                    source.to_string(),
                    m.server.clone(),
                    m.model.clone(),
                    wattbar_core::Scope::shown(m.scope).to_string(),
                    String::new(),
                    m.prompt_tokens.to_string(),
                    m.completion_tokens.to_string(),
                    m.energy_joules.to_string(),
                    csv_cell(m.joules_per_token),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    m.covers.join(","),
                ])?;
            }
            w.flush()?;
        }
        crate::args::TableFormat::Human => {
            print_resident(&resident, prefs.currency.as_str())?;
            // Each profiled model's class, measured through a proxy or not.
            for c in &classes {
                crate::out!("energy class of {}: {}", c.model, c.in_words())?;
            }
            if models.is_empty() && servers.is_empty() {
                crate::out!(
                    "No inference measured yet: run `wattbar-cli serve --llm-proxy 127.0.0.1:11435` \
                     and point your client at it, or `--server-metrics URL` to read a model \
                     server's own counters."
                )?;
                return Ok(());
            }
            crate::out!(
                "{:<28} {:<14} {:<10} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>6}",
                "model",
                "source",
                "scope",
                "requests",
                "tokens",
                "J/token",
                "net J/tok",
                "tok/s",
                "tok/s/W",
                "score"
            )?;
            for m in &models {
                crate::out!(
                    "{:<28} {:<14} {:<10} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>6}",
                    m.model,
                    SOURCE_PROXY,
                    wattbar_core::Scope::shown(m.scope),
                    m.requests,
                    m.completion_tokens,
                    cell(m.joules_per_token, 3),
                    cell(m.net_joules_per_token, 3),
                    cell(m.tokens_per_second, 1),
                    cell(m.tokens_per_second_per_watt, 3),
                    cell(m.score, 1),
                )?;
            }
            for Sourced { source, figures: m } in &servers {
                crate::out!(
                    "{:<28} {:<14} {:<10} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>6}",
                    m.model,
                    source,
                    scoped(m.scope, &m.covers),
                    "—",
                    m.completion_tokens,
                    cell(m.joules_per_token, 3),
                    "—",
                    "—",
                    "—",
                    "—",
                )?;
            }
            if !servers.is_empty() {
                crate::out!(
                    "server-metrics: read from each server's own /metrics per 10 s window \
                     ({}); requests are not counted there.",
                    servers
                        .iter()
                        .map(|s| s.figures.server.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )?;
            }
        }
    }
    Ok(())
}

/// A server row's scope with the parts it covers, where it names them (`components:gpu:0`): its
/// share of a GPU is another quantity than the CPU package's.
fn scoped(scope: Option<wattbar_core::Scope>, covers: &[String]) -> String {
    match covers {
        [] => wattbar_core::Scope::shown(scope).to_string(),
        parts => format!("{}:{}", wattbar_core::Scope::shown(scope), parts.join(",")),
    }
}

/// "Keeping gemma3 loaded costs about 0.14 EUR/day", one line per model, before the table.
fn print_resident(resident: &[ResidentCost], currency: &str) -> Result<()> {
    for r in resident {
        match (r.idle_watts, r.cost_per_day) {
            (Some(w), Some(cost)) => {
                let within = r
                    .uncertainty_watts
                    .map_or(String::new(), |u| format!(" ± {u:.1}"));
                let today = r.idle_joules_today.map_or_else(
                    || "not yet priced".to_string(),
                    |j| format!("{:.3} kWh", j / 3.6e6),
                );
                crate::out!(
                    "Keeping {} loaded costs about {cost:.2} {currency}/day ({w:.1}{within} W \
                     at idle; today {:.0} s resident and idle, {today}).",
                    r.model,
                    r.idle_seconds_today
                )?;
            }
            _ => crate::out!("{}: what keeping it loaded costs is {}.", r.model, r.method)?,
        }
    }
    if !resident.is_empty() {
        crate::out!()?;
    }
    Ok(())
}

/// The records of the last `since`, newest first.
pub fn inference(since: &str, limit: usize, json: bool) -> Result<()> {
    let now = unix_now();
    let from = crate::args::parse_time(since, now)?;
    let records: Vec<Record> = match crate::ledger::open_if_any()? {
        Some(store) => store.inference(from, limit)?,
        None => Vec::new(),
    };
    if json {
        crate::out!("{}", serde_json::json!({ "records": records }))?;
        return Ok(());
    }
    for r in &records {
        let when = chrono::DateTime::from_timestamp(r.start.floor() as i64, 0)
            .map(|t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        crate::out!(
            "{when}  {:<24} {:<9} {:>6} tok  {:>9} ± {:<6} J  {:>7} J/tok  {:>7} tok/s  {:>5}s  {}",
            r.model,
            r.status.as_str(),
            r.completion_tokens
                .map_or_else(|| "—".to_string(), |n| n.to_string()),
            cell(r.energy_joules, 1),
            cell(r.energy_bound_joules, 1),
            cell(r.joules_per_token, 3),
            cell(r.tokens_per_second, 1),
            format!("{:.2}", r.wall_seconds),
            r.route.as_str(),
        )?;
    }
    Ok(())
}
