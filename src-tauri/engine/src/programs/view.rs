//! What readers see of the energy per program: each program's figures, the top programs for
//! `/v1/processes` and `wattbar-cli top`, the bounded `/metrics` series, and the model server
//! named with the models it serves.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wattbar_core::programs::Split;
use wattbar_core::Quality;
use wattbar_ledger::store::programs::{IDLE, UNATTRIBUTED};

/// The label of the programs without a series of their own in `/metrics`.
pub const OTHER: &str = "(other)";
/// Programs with a `/metrics` series of their own at most, so that cardinality stays bounded.
pub const MAX_PROGRAM_SERIES: usize = 20;

/// Programs kept by name at most, beside those that drew power in the last window: the rest,
/// those with the least energy first, are added into [`OTHER`], so that what is kept stays
/// bounded however many programs come and go.
pub const MAX_PROGRAMS: usize = 64;

/// One program's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramFigure {
    pub program: String,
    /// Mean watts over the last window; `None` where that window had no measured power (or
    /// before the first).
    pub watts: Option<f64>,
    /// The part of `watts` that came from GPUs.
    #[serde(default)]
    pub gpu_watts: Option<f64>,
    /// Energy since the engine started.
    pub joules: f64,
    /// Energy today (local day), what the ledger kept from before a restart included.
    pub today_joules: f64,
    /// The worst quality of the energy it was given (a share of an estimate is an estimate).
    pub quality: Option<Quality>,
    /// For a model server, the models it serves ([`name_servers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serving: Vec<String>,
}

impl ProgramFigure {
    /// `ollama (llama3.1:8b)`: the program, with the models it serves.
    pub fn shown_name(&self) -> String {
        if self.serving.is_empty() {
            self.program.clone()
        } else {
            format!("{} ({})", self.program, self.serving.join(", "))
        }
    }
}

/// Names of model servers' programs: for when the upstream's process cannot be told, and whose
/// processes' listening ports are asked for their counters. `vllm serve` and `python -m`
/// launches alike; TGI's router, whose name the kernel cuts to 15 characters.
pub const MODEL_SERVERS: [&str; 8] = [
    "ollama",
    "llama-server",
    "vllm",
    "vllm.entrypoints.openai.api_server",
    "llama_cpp.server",
    "sglang.launch_server",
    "text-generation",
    "text-generation-router",
];

/// Names the models the model server serves: those the proxy's upstream holds (`/api/ps`),
/// else those its recent answers came from. The server is the program listening on the
/// upstream's port where known, else each program named in [`MODEL_SERVERS`].
pub fn name_servers(view: &mut ProgramsView, loaded: Option<&[String]>, answered: &[String]) {
    let models = match loaded {
        Some(l) if !l.is_empty() => l,
        _ => answered,
    };
    let upstream = view.upstream_program.clone();
    for p in &mut view.programs {
        let serves = match &upstream {
            Some(name) => &p.program == name,
            None => MODEL_SERVERS.contains(&p.program.as_str()),
        };
        if serves {
            p.serving = models.to_vec();
        }
    }
}

/// What readers see.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramsView {
    /// Wall-clock end of the last window, and its length.
    pub at: Option<f64>,
    pub window_seconds: f64,
    /// Every program with energy, most watts first; at most [`MAX_PROGRAMS`] beside those of
    /// the last window, the rest in [`OTHER`].
    pub programs: Vec<ProgramFigure>,
    /// Over the last window; `None` where it had no measured power.
    pub idle_watts: Option<f64>,
    pub unattributed_watts: Option<f64>,
    pub idle_joules: f64,
    pub unattributed_joules: f64,
    pub idle_joules_today: f64,
    pub unattributed_joules_today: f64,
    /// Wattbar's own process (this engine's) since it started.
    pub self_joules: f64,
    /// How the split is made.
    pub method: String,
    /// Why a GPU's energy was left unattributed in the last window, where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_note: Option<String>,
    /// The CPU domain's idle draw, where known ([`wattbar_core::programs::idle`]).
    #[serde(default)]
    pub idle_draw_watts: Option<f64>,
    /// Why nothing is attributed, where processes cannot be read.
    pub unavailable: Option<String>,
    /// The program listening on the proxy's upstream port: the model server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_program: Option<String>,
    /// The programs with a `/metrics` series of their own (the [`MAX_PROGRAM_SERIES`] with the
    /// most energy), each with its energy when it got one: its series counts from there, and
    /// `(other)` keeps what it had, so no counter goes down when programs change places.
    #[serde(skip)]
    pub series: BTreeMap<String, f64>,
}

/// How [`Top`] orders the programs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    /// Watts over the last window.
    #[default]
    Watts,
    /// Energy since the engine started.
    Energy,
}

/// The top programs, as `GET /v1/processes` and `wattbar-cli top --json` give them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Top {
    pub at: Option<f64>,
    /// Where the energies count from: `None`, the engine's start; else the start of the UTC
    /// hour `since=` fell in (the ledger keeps energy per hour), before a restart included.
    #[serde(default)]
    pub since: Option<f64>,
    pub window_seconds: f64,
    pub sort: Sort,
    pub programs: Vec<ProgramFigure>,
    /// Programs left out by the limit, and their energy.
    pub others: usize,
    pub others_joules: f64,
    pub idle_watts: Option<f64>,
    pub unattributed_watts: Option<f64>,
    pub idle_joules: f64,
    pub unattributed_joules: f64,
    pub self_joules: f64,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_note: Option<String>,
    pub idle_draw_watts: Option<f64>,
    pub unavailable: Option<String>,
}

/// Most watts first, those without a figure last, then most energy.
pub fn most_watts_first(a: &ProgramFigure, b: &ProgramFigure) -> std::cmp::Ordering {
    let w = |f: &ProgramFigure| {
        f.watts
            .filter(|w| w.is_finite())
            .unwrap_or(f64::NEG_INFINITY)
    };
    w(b).total_cmp(&w(a)).then(b.joules.total_cmp(&a.joules))
}

/// Adds into [`OTHER`] the programs of `kept` beyond [`MAX_PROGRAMS`] that are not `active`,
/// those with the least `joules` first, with `merge`: what is kept stays bounded and never loses
/// a joule.
pub fn fold_into_other<V: Default>(
    kept: &mut BTreeMap<String, V>,
    joules: impl Fn(&V) -> f64,
    active: impl Fn(&str) -> bool,
    merge: impl Fn(&mut V, V),
) {
    let named = kept.keys().filter(|k| k.as_str() != OTHER).count();
    if named <= MAX_PROGRAMS {
        return;
    }
    let mut quiet: Vec<(String, f64)> = kept
        .iter()
        .filter(|(k, _)| k.as_str() != OTHER && !active(k))
        .map(|(k, v)| (k.clone(), joules(v)))
        .collect();
    quiet.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    for (name, _) in quiet.into_iter().take(named - MAX_PROGRAMS) {
        if let Some(v) = kept.remove(&name) {
            merge(kept.entry(OTHER.to_string()).or_default(), v);
        }
    }
}

impl ProgramsView {
    /// The `/metrics` series: each program with a series of its own, counted from when it got
    /// one, then `(other)`, which keeps what each had then and takes back all of a program that
    /// loses its series (so neither goes down), `(idle)` and `(unattributed)`.
    pub fn metric_series(&self) -> Vec<(String, f64)> {
        let mut other = 0.0;
        let mut out = Vec::new();
        for f in &self.programs {
            match self.series.get(&f.program) {
                Some(from) => {
                    out.push((f.program.clone(), f.joules - from));
                    other += from;
                }
                None => other += f.joules,
            }
        }
        out.extend([
            (OTHER.to_string(), other),
            (IDLE.to_string(), self.idle_joules),
            (UNATTRIBUTED.to_string(), self.unattributed_joules),
        ]);
        out
    }

    /// The first `limit` programs by `sort`, with the energy of each since `from` (the start of
    /// an hour) as the ledger kept it: `stored`, per program and part. Watts and quality are the
    /// last window's.
    pub fn top_since(
        &self,
        limit: usize,
        sort: Sort,
        from: f64,
        stored: &BTreeMap<String, f64>,
    ) -> Top {
        let part = |name: &str| stored.get(name).copied().unwrap_or(0.0);
        let mut view = self.clone();
        for p in &mut view.programs {
            p.joules = part(&p.program);
        }
        for (name, joules) in stored {
            let known = view.programs.iter().any(|p| &p.program == name);
            if !known && name != IDLE && name != UNATTRIBUTED {
                // Not among the last window's programs: it drew nothing then, where that
                // window was measured.
                let none = (view.at.is_some() && view.unavailable.is_none()).then_some(0.0);
                view.programs.push(ProgramFigure {
                    program: name.clone(),
                    watts: none,
                    gpu_watts: none,
                    joules: *joules,
                    today_joules: 0.0,
                    quality: None,
                    serving: Vec::new(),
                });
            }
        }
        view.programs.sort_by(most_watts_first);
        view.idle_joules = part(IDLE);
        view.unattributed_joules = part(UNATTRIBUTED);
        let mut top = view.top(limit, sort);
        top.since = Some(from);
        top
    }

    /// The first `limit` programs by `sort`.
    pub fn top(&self, limit: usize, sort: Sort) -> Top {
        let mut programs = self.programs.clone();
        if sort == Sort::Energy {
            programs.sort_by(|a, b| b.joules.total_cmp(&a.joules));
        }
        let rest = programs.split_off(limit.min(programs.len()));
        Top {
            at: self.at,
            since: None,
            window_seconds: self.window_seconds,
            sort,
            programs,
            others: rest.len(),
            others_joules: rest.iter().map(|p| p.joules).sum(),
            idle_watts: self.idle_watts,
            unattributed_watts: self.unattributed_watts,
            idle_joules: self.idle_joules,
            unattributed_joules: self.unattributed_joules,
            self_joules: self.self_joules,
            method: self.method.clone(),
            gpu_note: self.gpu_note.clone(),
            idle_draw_watts: self.idle_draw_watts,
            unavailable: self.unavailable.clone(),
        }
    }
}

/// Each program kept, after a window of `seconds` split as `window`: its watts over the window,
/// its joules since the start and today (`totals`, `today`), most watts first.
pub(super) fn figures(
    totals: &BTreeMap<String, (f64, Option<Quality>)>,
    today: &BTreeMap<String, f64>,
    window: &Split,
    seconds: f64,
) -> Vec<ProgramFigure> {
    let per_second = |j: f64| if seconds > 0.0 { j / seconds } else { 0.0 };
    let names: std::collections::BTreeSet<&String> = totals
        .keys()
        .chain(today.keys().filter(|k| *k != IDLE && *k != UNATTRIBUTED))
        .collect();
    let mut programs: Vec<ProgramFigure> = names
        .into_iter()
        .map(|name| {
            let (joules, quality) = totals.get(name).copied().unwrap_or((0.0, None));
            ProgramFigure {
                program: name.clone(),
                watts: Some(per_second(
                    window.programs.get(name).copied().unwrap_or(0.0),
                )),
                gpu_watts: Some(per_second(window.gpu.get(name).copied().unwrap_or(0.0))),
                joules,
                today_joules: today.get(name).copied().unwrap_or(0.0),
                quality,
                serving: Vec::new(),
            }
        })
        .collect();
    programs.sort_by(most_watts_first);
    programs
}

/// Keeps a series for the [`MAX_PROGRAM_SERIES`] programs with the most energy (never
/// [`OTHER`]), each from the joules it had when it joined.
pub(super) fn keep_series(series: &mut BTreeMap<String, f64>, programs: &[ProgramFigure]) {
    let mut by_energy: Vec<&ProgramFigure> = programs
        .iter()
        .filter(|p| p.joules > 0.0 && p.program != OTHER)
        .collect();
    by_energy.sort_by(|a, b| b.joules.total_cmp(&a.joules));
    by_energy.truncate(MAX_PROGRAM_SERIES);
    series.retain(|name, _| by_energy.iter().any(|p| &p.program == name));
    for p in by_energy {
        series.entry(p.program.clone()).or_insert(p.joules);
    }
}
