//! Tokens per window from a model server's own counters (`/metrics`), with no proxy.
//!
//! Rules:
//! - A window's tokens for a model are the differences of the server's counters between the
//!   scrape that opens the window and the one that closes it. One scrape serves both windows it
//!   separates, so a server is read once per window.
//! - A counter lower than before means the server restarted: the window across the restart is
//!   not counted (its tokens are unknown, never guessed), and the later scrape is the next
//!   window's baseline. A counter seen at one end only is unknown for that window too.
//! - A window is `concurrent` when the server ran more than one request at either scrape, and
//!   `coarse` when its tokens land only when a request ends (llama.cpp, TGI) and a request was
//!   running at either end: part of the window's tokens belong to another.
//! - A window's energy is the headline's over the same span ([`window_energy`]), in one scope,
//!   which the record names with its parts, over the seconds measured in that scope (`covered`);
//!   and net of the idle baseline over those same seconds, where one was taken in that scope. A
//!   window covered below [`MIN_COVERED`] (a plug that dropped out within it) has no joules per
//!   token and adds to no sum: its tokens ran over seconds its energy did not. Where the server's own process is known to draw on GPUs that tell their use per
//!   process, it is that process's share of the GPUs' energy instead ([`on_process_gpus`]),
//!   covering those GPUs alone, with no net figure. Where several models of one server made tokens in the
//!   window, it is split by their completion tokens (by prompt tokens in a window that completed
//!   none) and each record says `shared`. A model whose counters did not move has no record: the
//!   window was idle for it. A window of prompt tokens alone (llama.cpp counts a prompt once it is
//!   read, the answer's tokens at its end) is a record too, with no J/token: its energy and
//!   prompt tokens count in the sums, and so in the J/token of the windows together.
//! - Joules per token are per completion token, as the proxy's records give them.
//! - Where the server times its GPU work by phase (SGLang's `gpu_execution_seconds_total`), a
//!   record's energy is split between prefill and decode by those seconds; elsewhere the split
//!   is unknown.
//! - Each model's sums over its windows are [`super::server_totals`]'s.

use super::attribution::Baseline;
use super::window::WindowEnergy;
use crate::programs::process_gpu::ProcessGpuShare;
use crate::reading::{Domain, Quality};
use crate::scope::{Coverage, Scope};
use serde::Serialize;
use std::collections::BTreeMap;

/// One model's counters at one scrape, as the server exposes them; `None` where it does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCounters {
    /// Prompt tokens processed since the server started.
    pub prompt_tokens: Option<f64>,
    /// Tokens generated since the server started.
    pub completion_tokens: Option<f64>,
    /// Requests running at the scrape.
    pub running: Option<f64>,
    /// GPU seconds spent on prefill and on decode since the server started (SGLang).
    pub prefill_gpu_seconds: Option<f64>,
    pub decode_gpu_seconds: Option<f64>,
}

/// When a server's token counters move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// During a request, each step (vLLM, SGLang).
    AsGenerated,
    /// When a request ends (llama.cpp, TGI).
    AtRequestEnd,
}

/// The share of a window its energy must cover for the window to give joules per token and
/// add to its model's sums.
pub const MIN_COVERED: f64 = 0.9;

/// One model's tokens over one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowTokens {
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    pub prefill_gpu_seconds: Option<f64>,
    pub decode_gpu_seconds: Option<f64>,
    /// More than one request ran at either end.
    pub concurrent: bool,
    /// Tokens land at request end and a request ran across an end of the window.
    pub coarse: bool,
}

/// Why a window has no tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncounted {
    /// A counter went back: the server restarted within the window.
    Restarted,
}

/// One model's window on one server: its tokens from the server's counters, its energy from
/// Wattbar's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerWindow {
    /// Where the counters were read, as messages show it.
    pub server: String,
    /// `None`: the one model of a server that does not name it (llama.cpp, TGI).
    pub model: Option<String>,
    /// Unix seconds of the two scrapes.
    pub from: f64,
    pub to: f64,
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    pub energy_joules: Option<f64>,
    pub net_energy_joules: Option<f64>,
    pub joules_per_token: Option<f64>,
    pub net_joules_per_token: Option<f64>,
    /// The energy's share spent on prefill and on decode, by the server's GPU seconds per
    /// phase; `None` where the server does not time them.
    pub prefill_energy_joules: Option<f64>,
    pub decode_energy_joules: Option<f64>,
    pub concurrent: bool,
    pub coarse: bool,
    /// Several models made tokens in the window; the energy was split by completion tokens.
    pub shared: bool,
    /// The proxy measured this window's requests itself: its records are the figures, and the
    /// window adds to no sum.
    pub proxied: bool,
    /// What the energy covers, as a record says it.
    pub scope: Option<Scope>,
    pub covers: Vec<String>,
    /// The share of the window measured in `scope`, 0–1; `None` for windows kept before it was.
    pub covered: Option<f64>,
    /// What priced it: `None`, the headline's energy; `Some(n)`, the GPU share of the server's
    /// process tree, `n` of whose processes drew on the GPUs (more than 1 where the server does
    /// its GPU work in child processes, as vLLM V1 and SGLang do).
    pub gpu_processes: Option<u32>,
}

impl ServerWindow {
    /// Whether the energy covers enough of the window to stand for its tokens. A window kept
    /// before coverage was (`None`) was added to the committed sums then, and counts as it did,
    /// so that a range's sums agree with them.
    pub fn well_covered(&self) -> bool {
        self.covered.is_none_or(|c| c >= MIN_COVERED)
    }
}

/// One scrape of one server: its counters per model, at Unix seconds `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    pub at: f64,
    pub models: BTreeMap<Option<String>, ServerCounters>,
}

/// The records of the window between two scrapes of `server`, with `energy` the headline's over
/// the same span. `Err` when the server restarted in it.
pub fn server_windows(
    server: &str,
    before: &Scrape,
    after: &Scrape,
    counting: Counting,
    energy: &WindowEnergy,
    baseline: Option<&Baseline>,
) -> Result<Vec<ServerWindow>, Uncounted> {
    let mut moved = Vec::new();
    for (model, now) in &after.models {
        let then = before.models.get(model).cloned().unwrap_or_default();
        let tokens = window_tokens(&then, now, counting)?;
        let made = |n: Option<f64>| n.is_some_and(|n| n > 0.0);
        if made(tokens.completion_tokens) || made(tokens.prompt_tokens) {
            moved.push((model.clone(), tokens));
        }
    }
    // Shared by completion tokens; in a window that completed none (prompts read, answers not
    // yet counted), by prompt tokens.
    let completed: f64 = moved.iter().filter_map(|(_, t)| t.completion_tokens).sum();
    let weight = |t: &WindowTokens| {
        if completed > 0.0 {
            t.completion_tokens.unwrap_or(0.0)
        } else {
            t.prompt_tokens.unwrap_or(0.0)
        }
    };
    let all: f64 = moved.iter().map(|(_, t)| weight(t)).sum();
    let covered = energy.covered_fraction.clamp(0.0, 1.0);
    let measured_seconds = covered * (after.at - before.at);
    let idle = baseline.and_then(|b| b.watts_for(energy.coverage.as_ref()));
    let net = match (energy.joules, idle) {
        (Some(j), Some(watts)) => Some((j - watts * measured_seconds).max(0.0)),
        _ => None,
    };
    let enough = covered >= MIN_COVERED;
    let shared = moved.len() > 1;
    Ok(moved
        .into_iter()
        .map(|(model, t)| {
            let n = t.completion_tokens.unwrap_or(0.0);
            let part = if all > 0.0 { weight(&t) / all } else { 0.0 };
            let per_token = |j: f64| (n > 0.0 && enough).then(|| j / n);
            let energy_joules = energy.joules.map(|j| j * part);
            let net_energy_joules = net.map(|j| j * part);
            let (prefill_energy_joules, decode_energy_joules) =
                by_phase(energy_joules, t.prefill_gpu_seconds, t.decode_gpu_seconds);
            ServerWindow {
                server: server.to_string(),
                model,
                from: before.at,
                to: after.at,
                prompt_tokens: t.prompt_tokens,
                completion_tokens: t.completion_tokens,
                joules_per_token: energy_joules.and_then(per_token),
                net_joules_per_token: net_energy_joules.and_then(per_token),
                energy_joules,
                net_energy_joules,
                prefill_energy_joules,
                decode_energy_joules,
                concurrent: t.concurrent,
                coarse: t.coarse,
                shared,
                proxied: false,
                scope: energy.coverage.as_ref().map(|c| c.scope),
                covers: energy
                    .coverage
                    .as_ref()
                    .map(|c| c.covers.clone())
                    .unwrap_or_default(),
                covered: Some(covered),
                gpu_processes: None,
            }
        })
        .collect())
}

/// `energy` as a server's own process drew it on the GPUs: the GPU domain's energy over the
/// window times the process's `share` of it ([`crate::programs::process_gpu`]), covering those
/// GPUs alone; `None` where the window has no GPU energy. A share is an estimate, and the GPUs'
/// idle draw is not known apart: the figure is at best `estimated`, and has no bound.
pub fn on_process_gpus(energy: &WindowEnergy, share: &ProcessGpuShare) -> Option<WindowEnergy> {
    let gpu = energy
        .by_domain
        .iter()
        .find(|(d, _)| d == Domain::Gpu.as_str())
        .map(|(_, j)| *j)
        .filter(|j| j.is_finite() && *j >= 0.0)?;
    let joules = gpu * share.share;
    let covered = energy.covered_fraction * (energy.to - energy.from);
    Some(WindowEnergy {
        joules: Some(joules),
        bound_joules: None,
        by_domain: vec![(Domain::Gpu.as_str().to_string(), joules)],
        mean_watts: (covered > 0.0).then(|| joules / covered),
        quality: energy.quality.max(Some(Quality::Estimated)),
        coverage: Some(Coverage {
            scope: Scope::Components,
            covers: share.covers.clone(),
        }),
        ..energy.clone()
    })
}

/// `joules` split by the GPU seconds spent on prefill and on decode; unknown without both, or
/// when neither phase ran.
fn by_phase(
    joules: Option<f64>,
    prefill_seconds: Option<f64>,
    decode_seconds: Option<f64>,
) -> (Option<f64>, Option<f64>) {
    match (joules, prefill_seconds, decode_seconds) {
        (Some(j), Some(p), Some(d)) if p + d > 0.0 => {
            let prefill = j * p / (p + d);
            (Some(prefill), Some(j - prefill))
        }
        _ => (None, None),
    }
}

/// The change of one counter over a window: `Err` when it went back.
fn change(before: Option<f64>, after: Option<f64>) -> Result<Option<f64>, Uncounted> {
    match (before, after) {
        (Some(b), Some(a)) if a < b => Err(Uncounted::Restarted),
        (Some(b), Some(a)) => Ok(Some(a - b)),
        _ => Ok(None),
    }
}

/// A model's tokens between the scrapes `before` and `after`.
pub fn window_tokens(
    before: &ServerCounters,
    after: &ServerCounters,
    counting: Counting,
) -> Result<WindowTokens, Uncounted> {
    let running = [before.running, after.running];
    let most = running.iter().flatten().fold(0.0_f64, |m, r| m.max(*r));
    let any_running = running.iter().flatten().any(|r| *r > 0.0);
    Ok(WindowTokens {
        prompt_tokens: change(before.prompt_tokens, after.prompt_tokens)?,
        completion_tokens: change(before.completion_tokens, after.completion_tokens)?,
        prefill_gpu_seconds: change(before.prefill_gpu_seconds, after.prefill_gpu_seconds)?,
        decode_gpu_seconds: change(before.decode_gpu_seconds, after.decode_gpu_seconds)?,
        concurrent: most > 1.0,
        coarse: counting == Counting::AtRequestEnd && any_running,
    })
}

#[cfg(test)]
mod tests;
