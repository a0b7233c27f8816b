//! Where a prompt goes and how its record is had: through the profile's own proxy, or straight
//! to the model server with the record handed to the running engine. The profiled model's
//! prompts and a grader model's go the same way, each its own record.

use super::ask::{self, Api};
use crate::cmd::run::meter::Meter;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;
use std::time::Duration;
use wattbar_core::inference::Record;

/// Where the prompts go and where their records come from.
pub(crate) enum Route {
    /// Through the proxy of the profile's own engine.
    Proxy { url: String },
    /// Straight to the model server, records handed to the running engine's API.
    Engine { client: crate::client::Client },
}

/// What grading one answer with a grader model cost, from its own record.
#[derive(Debug, Clone, Serialize)]
pub struct GraderRecord {
    pub model: String,
    pub record_id: u64,
    pub energy_joules: Option<f64>,
    pub completion_tokens: Option<u64>,
    pub wall_seconds: f64,
}

/// Where a prompt goes, and how its record is had: through the profile's proxy, or straight to
/// the server and handed to the running engine.
pub(crate) struct Asked<'a> {
    pub route: &'a Route,
    pub meter: &'a Meter,
    pub upstream: &'a str,
    pub api: Api,
}

impl Asked<'_> {
    /// Asks `model` for `prompt`, and waits for the engine's record of it (one not in `seen`,
    /// which it joins).
    pub(crate) async fn ask(
        &self,
        model: &str,
        prompt: &str,
        sampling: ask::Sampling,
        seen: &mut Vec<u64>,
    ) -> Result<(ask::Answer, Record)> {
        let base = match self.route {
            Route::Proxy { url } => url.clone(),
            Route::Engine { .. } => self.upstream.to_string(),
        };
        let (api, m, p) = (self.api, model.to_string(), prompt.to_string());
        let answer =
            tokio::task::spawn_blocking(move || ask::ask(&base, api, &m, &p, sampling)).await??;
        self.meter.wait_past(answer.end).await?;
        let record = match self.route {
            Route::Proxy { .. } => proxied_record(self.meter, model, &answer, seen).await?,
            Route::Engine { client } => {
                let (client, m, a) = (client.clone(), model.to_string(), answer.clone());
                tokio::task::spawn_blocking(move || post_record(&client, &m, &a)).await??
            }
        };
        seen.push(record.id);
        Ok((answer, record))
    }
}

/// The engine's record of the request just answered: made once the engine has sampled past its
/// end.
async fn proxied_record(
    meter: &Meter,
    model: &str,
    answer: &ask::Answer,
    seen: &[u64],
) -> Result<Record> {
    let reader = meter.reader().context("no engine")?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let published = reader.current();
        if let Some(r) = published.inference.view.recent.iter().find(|r| {
            !seen.contains(&r.id)
                && r.model == model
                && r.start >= answer.start - 1.0
                && r.end <= answer.end + 1.0
        }) {
            return Ok(r.clone());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("the engine made no record of the request within 15 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Hands a query measured here to the running engine, which records it with its energy.
fn post_record(client: &crate::client::Client, model: &str, a: &ask::Answer) -> Result<Record> {
    let body = json!({
        "model": model,
        "prompt_tokens": a.figures.prompt_tokens,
        "completion_tokens": a.figures.completion_tokens.unwrap_or(0),
        "start": a.start,
        "end": a.end,
        "tokens_per_second": a.figures.decode_rate,
    });
    Ok(serde_json::from_value(
        client.post("/v1/inference", Some(&body))?,
    )?)
}
