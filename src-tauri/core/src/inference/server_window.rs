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
mod tests {
    use super::*;

    fn at(prompt: f64, completion: f64, running: f64) -> ServerCounters {
        ServerCounters {
            prompt_tokens: Some(prompt),
            completion_tokens: Some(completion),
            running: Some(running),
            ..ServerCounters::default()
        }
    }

    #[test]
    fn a_window_counts_the_differences_of_its_two_scrapes() {
        // 5 prompt and 7 generated tokens at the first scrape; 25 and 107 at the next.
        let w = window_tokens(
            &at(5.0, 7.0, 0.0),
            &at(25.0, 107.0, 1.0),
            Counting::AsGenerated,
        );
        assert_eq!(
            w,
            Ok(WindowTokens {
                prompt_tokens: Some(20.0),
                completion_tokens: Some(100.0),
                ..WindowTokens::default()
            })
        );
    }

    #[test]
    fn a_counter_that_goes_back_is_a_restart_and_the_window_is_not_counted() {
        let restarted = window_tokens(
            &at(6886.0, 3469.0, 0.0),
            &at(12.0, 40.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(restarted, Err(Uncounted::Restarted));
        // The later scrape is the next baseline: the window after it counts again.
        let next = window_tokens(
            &at(12.0, 40.0, 0.0),
            &at(30.0, 90.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(next.map(|w| w.completion_tokens), Ok(Some(50.0)));
    }

    #[test]
    fn a_counter_seen_at_one_end_only_is_unknown_never_the_whole_total() {
        let appeared = ServerCounters::default();
        let w = window_tokens(
            &appeared,
            &at(8_128_902.0, 7_557_572.0, 162.0),
            Counting::AsGenerated,
        );
        assert_eq!(w.as_ref().map(|w| w.completion_tokens), Ok(None));
        assert_eq!(w.map(|w| w.concurrent), Ok(true));
    }

    fn energy(joules: f64, from: f64, to: f64) -> WindowEnergy {
        WindowEnergy {
            from,
            to,
            joules: Some(joules),
            bound_joules: None,
            by_domain: Vec::new(),
            mean_watts: Some(joules / (to - from)),
            samples: 10,
            covered_fraction: 1.0,
            quality: None,
            sources: Vec::new(),
            coverage: Some(system()),
        }
    }

    fn system() -> Coverage {
        Coverage::of_domain(Domain::System, None)
    }

    fn scrape(at: f64, models: &[(Option<&str>, ServerCounters)]) -> Scrape {
        Scrape {
            at,
            models: models
                .iter()
                .map(|(m, c)| (m.map(str::to_string), c.clone()))
                .collect(),
        }
    }

    /// An idle draw of `watts` over 30 s, in `coverage`.
    fn idle(watts: f64, coverage: Coverage) -> Baseline {
        Baseline {
            watts,
            spread_watts: None,
            samples: 30,
            from: 0.0,
            to: 30.0,
            method: "test".into(),
            coverage: Some(coverage),
        }
    }

    /// llama.cpp's window from 1,000 to 1,010 s: 40 prompt and 150 predicted tokens.
    fn llama_window(energy: &WindowEnergy, baseline: &Baseline) -> Vec<ServerWindow> {
        server_windows(
            "http://127.0.0.1:8080/metrics",
            &scrape(1000.0, &[(None, at(6886.0, 3469.0, 0.0))]),
            &scrape(1010.0, &[(None, at(6926.0, 3619.0, 0.0))]),
            Counting::AtRequestEnd,
            energy,
            Some(baseline),
        )
        .unwrap_or_default()
    }

    /// 300 W for 10 s = 3,000 J over 150 generated tokens = 20 J a token; over an idle draw of
    /// 100 W, 2,000 J net = 13.3 J a token.
    #[test]
    fn a_windows_energy_over_its_tokens_is_its_joules_per_token() {
        let baseline = idle(100.0, system());
        let w = llama_window(&energy(3000.0, 1000.0, 1010.0), &baseline);
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].prompt_tokens, w[0].completion_tokens),
            (Some(40.0), Some(150.0))
        );
        assert_eq!(w[0].joules_per_token, Some(20.0));
        assert_eq!(w[0].net_energy_joules, Some(2000.0));
        let net = w[0].net_joules_per_token.unwrap_or(f64::NAN);
        assert!((net - 2000.0 / 150.0).abs() < 1e-9, "{net}");
        assert!(!w[0].shared && !w[0].coarse);
        assert_eq!(w[0].scope, Some(Scope::System));

        // The same window measured on the CPU package alone, with the idle draw taken at the
        // wall: 100 W of the wall is no part of the package's 3,000 J, so nothing is netted.
        let package = WindowEnergy {
            coverage: Some(Coverage::of_domain(Domain::Cpu, None)),
            ..energy(3000.0, 1000.0, 1010.0)
        };
        let at_the_wall = Baseline {
            coverage: Some(Coverage::of_domain(Domain::Wall, None)),
            ..baseline
        };
        let w = llama_window(&package, &at_the_wall);
        assert_eq!(w[0].joules_per_token, Some(20.0));
        assert_eq!(w[0].net_energy_joules, None);
        assert_eq!(w[0].scope, Some(Scope::Components));
        assert_eq!(w[0].covers, vec!["cpu-package".to_string()]);
    }

    /// The plug dropped out 5 s into the 10 s window: 300 W × 5 s = 1,500 J measured, net of
    /// the 100 W idle draw over those same 5 s = 1,000 J (over all 10 s it would be 500 J). Its
    /// 150 tokens ran over seconds the energy does not cover: no joules per token.
    #[test]
    fn a_half_covered_window_nets_its_measured_seconds_and_gives_no_joules_per_token() {
        let half = WindowEnergy {
            covered_fraction: 0.5,
            ..energy(1500.0, 1000.0, 1010.0)
        };
        let w = llama_window(&half, &idle(100.0, system()));
        assert_eq!(w[0].covered, Some(0.5));
        assert_eq!(w[0].energy_joules, Some(1500.0));
        assert_eq!(w[0].net_energy_joules, Some(1000.0));
        assert_eq!(
            (w[0].joules_per_token, w[0].net_joules_per_token),
            (None, None)
        );
        assert!(!w[0].well_covered());
        // Covered 95 %: 2,850 J net of 100 W × 9.5 s = 1,900 J, 19 J and 12.7 J a token.
        let most = WindowEnergy {
            covered_fraction: 0.95,
            ..energy(2850.0, 1000.0, 1010.0)
        };
        let w = llama_window(&most, &idle(100.0, system()));
        assert!(w[0].well_covered());
        let net = w[0].net_energy_joules.unwrap_or(f64::NAN);
        assert!((net - 1900.0).abs() < 1e-9, "{net}");
        assert_eq!(w[0].joules_per_token, Some(19.0));
    }

    /// A plug measured 3,000 J at the wall over the window, 2,000 J of it on the GPU, and the
    /// server's process had 0.75 of the GPU's use: its window is 1,500 J over 150 tokens, 10 J
    /// a token, covering GPU 0 alone, with no net figure (the GPU's idle draw is not known
    /// apart), never the wall's 20 J a token.
    #[test]
    fn a_server_drawing_on_a_gpu_has_its_own_share_of_the_gpus_energy() {
        let wall = WindowEnergy {
            by_domain: vec![("gpu".into(), 2000.0)],
            coverage: Some(Coverage::of_domain(Domain::Wall, None)),
            quality: Some(Quality::Measured),
            ..energy(3000.0, 1000.0, 1010.0)
        };
        let share = ProcessGpuShare {
            share: 0.75,
            covers: vec!["gpu:0".into()],
            processes: 1,
        };
        let own = on_process_gpus(&wall, &share).unwrap_or_else(|| panic!("a GPU's energy"));
        assert_eq!(own.quality, Some(Quality::Estimated));
        let baseline = idle(100.0, Coverage::of_domain(Domain::Wall, None));
        let w = llama_window(&own, &baseline);
        assert_eq!(w[0].energy_joules, Some(1500.0));
        assert_eq!(w[0].joules_per_token, Some(10.0));
        assert_eq!(w[0].net_energy_joules, None);
        assert_eq!(
            (w[0].scope, w[0].covers.clone()),
            (Some(Scope::Components), vec!["gpu:0".to_string()])
        );
        // A window with no GPU energy has no such figure: the headline's stays.
        assert_eq!(
            on_process_gpus(&energy(3000.0, 1000.0, 1010.0), &share),
            None
        );
    }

    /// Two models on one vLLM: 3,000 J split 1:2 by their 50 and 100 generated tokens; a model
    /// that generated nothing has no record.
    #[test]
    fn models_that_made_tokens_share_the_window_by_their_tokens() {
        let w = server_windows(
            "vllm",
            &scrape(
                0.0,
                &[
                    (Some("a"), at(0.0, 0.0, 0.0)),
                    (Some("b"), at(0.0, 0.0, 0.0)),
                    (Some("idle"), at(5.0, 7.0, 0.0)),
                ],
            ),
            &scrape(
                10.0,
                &[
                    (Some("a"), at(10.0, 50.0, 1.0)),
                    (Some("b"), at(20.0, 100.0, 1.0)),
                    (Some("idle"), at(5.0, 7.0, 0.0)),
                ],
            ),
            Counting::AsGenerated,
            &energy(3000.0, 0.0, 10.0),
            None,
        )
        .unwrap_or_default();
        let got: Vec<_> = w
            .iter()
            .map(|r| {
                (
                    r.model.clone(),
                    r.energy_joules,
                    r.joules_per_token,
                    r.shared,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("a".to_string()), Some(1000.0), Some(20.0), true),
                (Some("b".to_string()), Some(2000.0), Some(20.0), true)
            ]
        );
        assert_eq!(w[0].net_energy_joules, None, "no baseline: net unknown");
    }

    /// SGLang spent 2 s of GPU time on prefill and 6 s on decode in a window of 4,000 J:
    /// 1,000 J prefill, 3,000 J decode.
    #[test]
    fn sglang_windows_split_their_energy_by_the_gpu_seconds_of_each_phase() {
        let gpu = |prefill: f64, decode: f64, completion: f64| ServerCounters {
            prefill_gpu_seconds: Some(prefill),
            decode_gpu_seconds: Some(decode),
            ..at(0.0, completion, 1.0)
        };
        let w = server_windows(
            "sglang",
            &scrape(0.0, &[(Some("m"), gpu(10.0, 30.0, 100.0))]),
            &scrape(10.0, &[(Some("m"), gpu(12.0, 36.0, 300.0))]),
            Counting::AsGenerated,
            &energy(4000.0, 0.0, 10.0),
            None,
        )
        .unwrap_or_default();
        assert_eq!(
            w.iter()
                .map(|r| (r.prefill_energy_joules, r.decode_energy_joules))
                .collect::<Vec<_>>(),
            [(Some(1000.0), Some(3000.0))]
        );
        // A server that does not time its phases leaves the split unknown.
        let plain = server_windows(
            "vllm",
            &scrape(0.0, &[(Some("m"), at(0.0, 100.0, 1.0))]),
            &scrape(10.0, &[(Some("m"), at(0.0, 300.0, 1.0))]),
            Counting::AsGenerated,
            &energy(4000.0, 0.0, 10.0),
            None,
        )
        .unwrap_or_default();
        assert_eq!(plain[0].prefill_energy_joules, None);
    }

    /// llama.cpp read a prompt of 300 tokens in this window and will count the answer in the
    /// next: the window is kept with its energy and prompt tokens, and no J/token.
    #[test]
    fn a_window_that_only_read_prompts_keeps_its_prompt_tokens_and_energy() {
        let w = server_windows(
            "llama",
            &scrape(0.0, &[(None, at(100.0, 50.0, 1.0))]),
            &scrape(1.0, &[(None, at(400.0, 50.0, 1.0))]),
            Counting::AtRequestEnd,
            &energy(100.0, 0.0, 1.0),
            None,
        )
        .unwrap_or_default();
        assert_eq!(
            w.iter()
                .map(|r| (
                    r.prompt_tokens,
                    r.completion_tokens,
                    r.energy_joules,
                    r.joules_per_token
                ))
                .collect::<Vec<_>>(),
            [(Some(300.0), Some(0.0), Some(100.0), None)]
        );
    }

    #[test]
    fn tokens_counted_at_request_end_with_a_request_running_are_coarse() {
        let w = window_tokens(
            &at(0.0, 0.0, 1.0),
            &at(10.0, 20.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(w.map(|w| (w.coarse, w.concurrent)), Ok((true, false)));
        let w = window_tokens(
            &at(0.0, 0.0, 1.0),
            &at(10.0, 20.0, 1.0),
            Counting::AsGenerated,
        );
        assert_eq!(w.map(|w| w.coarse), Ok(false));
    }
}
