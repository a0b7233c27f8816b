//! `wattbar-cli profile`: a model over a set of prompts, one at a time, each measured as the
//! inference proxy measures a request.
//!
//! Rules:
//! - With no engine holding the data folder, the profile runs one of its own that records into
//!   the ledger, with the inference proxy in front of the model server: each prompt goes through
//!   the proxy and its record is the engine's, so it lands in the model ledger as any proxied
//!   request does.
//! - With a running engine (serve or the app), the prompts go to the model server directly and
//!   each is handed to that engine as a measured window (`POST /v1/inference`): one engine per
//!   ledger, the hardware read once.
//! - Net energy subtracts the idle draw measured before the first prompt (`--idle`), over each
//!   query's own time. Nothing measured is `null`, never 0 J.
//! - The prompts file is read whole first: a bad line stops the profile before anything is sent,
//!   and says which line.
//! - The graded run is kept in the ledger as a profile of its evaluation (`models --best` and
//!   `low_power_model: "auto"` choose from them), by the engine that measured it.

pub mod ask;
mod asked;
pub mod compare;
pub mod grading;
mod progress;
pub mod prompts;
mod summary;
pub mod sweep;
use progress::Progress;
use summary::{human, summary};

use ask::Api;
use asked::{Asked, GraderRecord, Route};
use grading::Graders;
pub use prompts::{parse_prompts, Format, Prompt};
use wattbar_core::eval::Grader;

use crate::cmd::run::meter::Meter;
use crate::cmd::run::summary::Stats;
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::eval::summary::{summarise, Query};
use wattbar_engine::unix_now;
use wattbar_serve::proxy;

/// What `profile` is asked to do.
pub struct Options {
    pub model: String,
    pub prompts: PathBuf,
    pub upstream: Option<String>,
    pub api: Api,
    pub max: Option<usize>,
    /// The evaluation's name in the ledger; `None`: from the prompts file ([`eval_name`]).
    pub eval: Option<String>,
    pub out: PathBuf,
    pub idle: Duration,
    pub interval: Duration,
    pub format: Format,
    /// `--grader`; none: `number` for GSM8K, else `contains`.
    pub grader: Option<String>,
    /// `--allow-cmd-grader`: a `cmd:` grader may run a shell command.
    pub allow_cmd_grader: bool,
    pub tolerance: f64,
    /// At most this many generated tokens an answer, where set.
    pub max_tokens: Option<u32>,
    /// A profile at each setting of a knob, where set.
    pub sweep: Option<sweep::SweepOptions>,
    /// `--report standards`: each run's figures by the leaderboards' definitions too.
    pub standards: bool,
}

/// One query's line of `records.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct QueryRecord {
    pub id: Value,
    pub model: String,
    pub start: f64,
    pub end: f64,
    pub wall_seconds: f64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Where the token counts come from: `server`, `counted` or `client`.
    pub tokens_source: Option<wattbar_core::inference::TokensSource>,
    pub ttft_seconds: Option<f64>,
    pub tokens_per_second: Option<f64>,
    /// Share of the window that was measured; below 0.9 the record is partial.
    pub covered: Option<f64>,
    pub energy_joules: Option<f64>,
    /// The energy is within this many joules of the truth over the measured part.
    pub energy_bound_joules: Option<f64>,
    /// Its energy's grams of CO₂e at the grid intensity in force (the carbon feed's slot, else
    /// `carbon_g_per_kwh`); `None` without one.
    pub carbon_g: Option<f64>,
    pub net_energy_joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    pub mean_watts: Option<f64>,
    pub peak_watts: Option<f64>,
    /// What of its energy came from the battery and what it wore; absent on a machine without
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub battery: Option<crate::cmd::run::summary::BatteryFigure>,
    pub quality: Option<wattbar_core::Quality>,
    /// What part of the machine the energy covers, and which parts where only some.
    pub scope: Option<wattbar_core::Scope>,
    pub covers: Vec<String>,
    pub sources: Vec<String>,
    /// The ledger's record id.
    pub record_id: u64,
    pub response: String,
    pub expected: Option<String>,
    /// Inter-token latency: the time after the first token over the tokens after it.
    pub itl_seconds: Option<f64>,
    /// Who graded the answer, what it read from it, its verdict and why.
    pub grader: String,
    pub extracted: Option<String>,
    pub verdict: wattbar_core::eval::Verdict,
    pub why: String,
    /// An `llm:` grader's own request: measured and recorded as its model's, never counted in
    /// this query's energy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grader_record: Option<GraderRecord>,
}

pub fn profile(runtime: &tokio::runtime::Runtime, o: Options) -> Result<()> {
    let text = wattbar_engine::home::paths::read_at_most(
        &o.prompts,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", o.prompts.display()))?;
    let mut prompts =
        parse_prompts(&text, o.format).with_context(|| format!("{}", o.prompts.display()))?;
    let in_file = prompts.len();
    if let Some(max) = o.max {
        prompts.truncate(max);
    }
    let mut o = o;
    if o.eval.is_none() {
        o.eval = Some(eval_name(&o.prompts, prompts.len(), in_file));
    }
    // Every grader is checked before anything is sent.
    let graders = Graders::new(
        o.grader.as_deref(),
        o.format == Format::Gsm8k,
        o.tolerance,
        o.allow_cmd_grader,
    )?;
    for p in &prompts {
        graders
            .check(p.grader.as_deref())
            .with_context(|| format!("prompt {}", p.id))?;
    }
    std::fs::create_dir_all(&o.out).with_context(|| format!("cannot make {}", o.out.display()))?;
    runtime.block_on(profile_async(o, prompts, graders))
}

async fn profile_async(o: Options, prompts: Vec<Prompt>, graders: Graders) -> Result<()> {
    let eval = o
        .eval
        .clone()
        .unwrap_or_else(|| eval_name(&o.prompts, prompts.len(), prompts.len()));
    let upstream_text = match &o.upstream {
        Some(u) if u.contains("://") => u.clone(),
        Some(u) => format!("http://{u}"),
        None => proxy::default_upstream(std::env::var("OLLAMA_HOST").ok().as_deref()),
    };
    let upstream = proxy::Upstream::parse(&upstream_text).map_err(anyhow::Error::msg)?;
    let prefs = crate::engine::read_prefs()?;
    let (meter, route, stop) = match crate::client::running()? {
        Some(client) => (
            Meter::engine(client.clone())?,
            Route::Engine { client },
            None,
        ),
        None => {
            let chain = crate::engine::open_sources(Default::default()).await?;
            let db = wattbar_engine::home::paths::database_path()?;
            let meter = Meter::here_recording(chain, prefs, o.interval, Some(db)).await?;
            let reader = meter
                .reader()
                .context("the profile's engine has no reader")?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let url = format!("http://{}", listener.local_addr()?);
            let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
            tokio::spawn(proxy::serve(
                listener,
                upstream,
                reader.clone(),
                &[],
                proxy::Origins::from_ollama_origins(None),
                async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                },
            ));
            (meter, Route::Proxy { url }, Some(stop_tx))
        }
    };
    let step = Step {
        o: &o,
        eval: &eval,
        prompts: &prompts,
        graders: &graders,
        meter: &meter,
        route: &route,
        upstream: &upstream_text,
    };
    let result = match &o.sweep {
        None => step.run(&o.out).await.map(|_| ()),
        Some(s) => sweep::sweep(&o.out, s, async |dir: &Path| step.run(dir).await).await,
    };
    if let Some(stop) = stop {
        let _ = stop.send(true);
    }
    meter.stop().await;
    result
}

/// One profile run over the prompts: what it needs, whatever it is part of.
struct Step<'a> {
    o: &'a Options,
    eval: &'a str,
    prompts: &'a [Prompt],
    graders: &'a Graders,
    meter: &'a Meter,
    route: &'a Route,
    upstream: &'a str,
}

impl Step<'_> {
    /// Measures the prompts into `out` and keeps the run as a profile; its summary.
    async fn run(&self, out: &Path) -> Result<Value> {
        std::fs::create_dir_all(out).with_context(|| format!("cannot make {}", out.display()))?;
        let (records, summary) = measure(
            self.o,
            out,
            self.prompts,
            self.graders,
            self.meter,
            self.route,
            self.upstream,
        )
        .await?;
        keep(self.eval, out, &summary, self.meter, self.route).await?;
        eprint!("{}", human(&summary));
        if self.o.standards {
            let figures = wattbar_core::eval::standards::standards(
                &wattbar_core::eval::standards::Inputs::from_summary(&summary),
            );
            let path = out.join("standards.json");
            std::fs::write(&path, serde_json::to_string_pretty(&figures)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprint!(
                "wattbar profile: by the standards' definitions\n{}",
                wattbar_core::eval::standards::table(&figures)
            );
        }
        eprintln!(
            "wattbar profile: wrote {} and {} ({} records added to the model ledger, the profile \
             kept as {:?})",
            out.join("records.jsonl").display(),
            out.join("summary.json").display(),
            records.len(),
            self.eval
        );
        Ok(summary)
    }
}

/// The evaluation a prompts file is: its name without the extension, and how many of its
/// `in_file` prompts were asked where fewer were (`gsm8k-test-first40 (first 10)`).
pub fn eval_name(prompts: &Path, asked: usize, in_file: usize) -> String {
    let stem = prompts
        .file_stem()
        .map_or_else(|| "prompts".into(), |s| s.to_string_lossy().into_owned());
    if asked < in_file {
        format!("{stem} (first {asked})")
    } else {
        stem
    }
}

/// Keeps the run as a profile, through the engine that measured it.
async fn keep(eval: &str, out: &Path, summary: &Value, meter: &Meter, route: &Route) -> Result<()> {
    let label = out.file_name().map(|n| n.to_string_lossy().into_owned());
    match route {
        Route::Engine { client } => {
            let body =
                json!({ "eval": eval, "label": label, "at": unix_now(), "summary": summary });
            let client = client.clone();
            tokio::task::spawn_blocking(move || client.post("/v1/profiles", Some(&body)))
                .await?
                .context("the running engine did not keep the profile")?;
        }
        Route::Proxy { .. } => {
            let stored = wattbar_engine::store::profiles::StoredProfile::from_summary(
                eval.to_string(),
                label,
                unix_now(),
                summary,
            )
            .map_err(anyhow::Error::msg)?;
            let reader = meter
                .reader()
                .context("the profile's engine has no reader")?;
            reader
                .record_profile(stored)
                .await
                .context("the profile could not be kept in the ledger")?;
        }
    }
    Ok(())
}

async fn measure(
    o: &Options,
    out_dir: &Path,
    prompts: &[Prompt],
    graders: &Graders,
    meter: &Meter,
    route: &Route,
    upstream: &str,
) -> Result<(Vec<QueryRecord>, Value)> {
    meter.wait_past(unix_now()).await?;
    let idle_watts = if o.idle.is_zero() {
        None
    } else {
        let from = unix_now();
        tokio::time::sleep(o.idle).await;
        let to = unix_now();
        meter.wait_past(to).await?;
        meter.energy(from, to)?.mean_watts
    };
    let records_path = out_dir.join("records.jsonl");
    let mut file = std::fs::File::create(&records_path)
        .with_context(|| format!("cannot write {}", records_path.display()))?;
    let mut seen: Vec<u64> = Vec::new();
    let mut out: Vec<QueryRecord> = Vec::new();
    let progress = Progress::new(prompts.len());
    for (i, p) in prompts.iter().enumerate() {
        progress.show(i, &o.model);
        let sampling = ask::Sampling {
            max_tokens: o.max_tokens,
            temperature: None,
        };
        let asked = Asked {
            route,
            meter,
            upstream,
            api: o.api,
        };
        let (answer, record) = asked
            .ask(&o.model, &p.prompt, sampling, &mut seen)
            .await
            .with_context(|| format!("prompt {}", p.id))?;
        let states = meter.states(answer.start, answer.end);
        let peak = states
            .iter()
            .filter_map(|s| s.watts)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))));
        // The engine's window: the request as the proxy saw it pass (or as handed to the API).
        let wall = record.wall_seconds;
        let ttft = record
            .ttft_seconds
            .or(answer.first_token.map(|t| t - answer.start));
        let completion = record
            .completion_tokens
            .or(answer.figures.completion_tokens);
        let mut q = QueryRecord {
            id: p.id.clone(),
            model: o.model.clone(),
            start: record.start,
            end: record.end,
            wall_seconds: wall,
            prompt_tokens: record.prompt_tokens.or(answer.figures.prompt_tokens),
            completion_tokens: completion,
            tokens_source: record.tokens_source.or(answer
                .figures
                .tokens_source
                .filter(|_| record.completion_tokens.is_none())),
            ttft_seconds: ttft,
            tokens_per_second: record.tokens_per_second,
            covered: record.covered,
            energy_joules: record.energy_joules,
            energy_bound_joules: record.energy_bound_joules,
            carbon_g: record.carbon_g,
            net_energy_joules: record
                .energy_joules
                .zip(idle_watts)
                .map(|(e, w)| e - w * wall),
            joules_per_token: record.joules_per_token,
            mean_watts: record
                .energy_joules
                .filter(|_| wall > 0.0)
                .map(|e| e / wall),
            peak_watts: peak,
            battery: record
                .energy_joules
                .and_then(|e| crate::cmd::run::summary::BatteryFigure::of(&states, e)),
            quality: record.quality,
            scope: record.scope,
            covers: record.covers.clone(),
            sources: record.sources.clone(),
            record_id: record.id,
            expected: p.answer.clone(),
            response: answer.text,
            itl_seconds: ttft
                .zip(completion.filter(|n| *n >= 2))
                .map(|(t, n)| (wall - t).max(0.0) / (n - 1) as f64),
            grader: String::new(),
            extracted: None,
            verdict: wattbar_core::eval::Verdict::Unevaluated,
            why: String::new(),
            grader_record: None,
        };
        // The record as the grader sees it: everything but its own grade.
        let mut seen_by_grader = serde_json::to_value(&q)?;
        if let Some(o) = seen_by_grader.as_object_mut() {
            for key in ["grader", "extracted", "verdict", "why"] {
                o.remove(key);
            }
        }
        let graded = match graders.grader(p.grader.as_deref())? {
            Grader::Llm(judge) => {
                let (graded, record) = grading::ask_judge(
                    &asked,
                    &judge,
                    &p.prompt,
                    &q.response,
                    q.expected.as_deref(),
                    o.tolerance,
                    &mut seen,
                )
                .await;
                q.grader_record = record;
                graded
            }
            _ => graders.grade(
                p.grader.as_deref(),
                &q.response,
                q.expected.as_deref(),
                &seen_by_grader,
            )?,
        };
        (q.grader, q.extracted, q.verdict, q.why) =
            (graded.grader, graded.extracted, graded.verdict, graded.why);
        writeln!(file, "{}", serde_json::to_string(&q)?)?;
        out.push(q);
    }
    progress.done(prompts.len());
    let summary = summary(o, &out, idle_watts, meter.describe());
    let path = out_dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((out, summary))
}

/// The folder a profile writes to when none is named.
pub fn default_out(model: &str) -> PathBuf {
    let name: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Path::new(".").join(format!("wattbar-profile-{name}"))
}

#[cfg(test)]
mod tests;
