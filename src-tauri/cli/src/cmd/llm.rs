//! `models` and `inference`: the inference ledger, read-only beside a running engine.

use anyhow::Result;
use wattbar_core::inference::{ModelStats, Record};
use wattbar_engine::{paths, prefs_file, unix_now};

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.digits$}"))
}

fn csv_cell(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Per-model figures over every record ever stored, most recently used first.
pub fn models(format: crate::args::TableFormat) -> Result<()> {
    let (prefs, _) = prefs_file::load(&paths::preferences_path()?)?;
    let mut models: Vec<ModelStats> = match crate::ledger::open_read_only() {
        Ok(store) => store.inference_models(prefs.score_ceiling)?,
        Err(_) => Vec::new(),
    };
    models.sort_by(|a, b| b.last.total_cmp(&a.last));
    match format {
        crate::args::TableFormat::Json => {
            println!("{}", serde_json::json!({ "models": models }));
        }
        crate::args::TableFormat::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout());
            w.write_record([
                "model",
                "requests",
                "prompt_tokens",
                "completion_tokens",
                "energy_joules",
                "joules_per_token",
                "net_joules_per_token",
                "tokens_per_second",
                "tokens_per_second_per_watt",
                "score",
            ])?;
            for m in &models {
                w.write_record([
                    m.model.clone(),
                    m.requests.to_string(),
                    m.prompt_tokens.to_string(),
                    m.completion_tokens.to_string(),
                    m.energy_joules.to_string(),
                    csv_cell(m.joules_per_token),
                    csv_cell(m.net_joules_per_token),
                    csv_cell(m.tokens_per_second),
                    csv_cell(m.tokens_per_second_per_watt),
                    csv_cell(m.score),
                ])?;
            }
            w.flush()?;
        }
        crate::args::TableFormat::Human => {
            if models.is_empty() {
                println!(
                    "No inference measured yet: run `wattbar-cli serve --llm-proxy 127.0.0.1:11435` \
                     and point your client at it."
                );
                return Ok(());
            }
            println!(
                "{:<28} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>6}",
                "model", "requests", "tokens", "J/token", "net J/tok", "tok/s", "tok/s/W", "score"
            );
            for m in &models {
                println!(
                    "{:<28} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>6}",
                    m.model,
                    m.requests,
                    m.completion_tokens,
                    fmt(m.joules_per_token, 3),
                    fmt(m.net_joules_per_token, 3),
                    fmt(m.tokens_per_second, 1),
                    fmt(m.tokens_per_second_per_watt, 3),
                    fmt(m.score, 1),
                );
            }
        }
    }
    Ok(())
}

/// The records of the last `since`, newest first.
pub fn inference(since: &str, limit: usize, json: bool) -> Result<()> {
    let now = unix_now();
    let from = crate::args::parse_time(since, now)?;
    let records: Vec<Record> = match crate::ledger::open_read_only() {
        Ok(store) => store.inference(from, limit)?,
        Err(_) => Vec::new(),
    };
    if json {
        println!("{}", serde_json::json!({ "records": records }));
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
        println!(
            "{when}  {:<24} {:<9} {:>6} tok  {:>9} ± {:<6} J  {:>7} J/tok  {:>7} tok/s  {:>5}s  {}",
            r.model,
            r.status.as_str(),
            r.completion_tokens
                .map_or_else(|| "—".to_string(), |n| n.to_string()),
            fmt(r.energy_joules, 1),
            fmt(r.energy_bound_joules, 1),
            fmt(r.joules_per_token, 3),
            fmt(r.tokens_per_second, 1),
            format!("{:.2}", r.wall_seconds),
            r.route.as_str(),
        );
    }
    Ok(())
}
