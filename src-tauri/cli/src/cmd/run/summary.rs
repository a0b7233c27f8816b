//! A run's figures: per run, per command (mean, standard deviation, median, min and max, as
//! hyperfine gives them), and the summary people read on stderr.
//!
//! Rules:
//! - Gross energy is what the machine drew during the run; net subtracts the idle baseline's mean
//!   power over the same time. Both are kept, with how the baseline was measured.
//! - Nothing measured is `null`, never 0 J, and the summary says why.
//! - A run shorter than ten sampling periods is flagged as coarse. The period is the one the
//!   engine really samples at, never faster than half a counter's update period (NVML's), so a
//!   run shorter than a counter's update period is always coarse too.

use super::events::Phase;
use super::samples::State;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use wattbar_core::inference::WindowEnergy;
use wattbar_core::{Joules, Quality};

mod text;
pub use text::human;

/// Share of a window that must be measured before its figure is given without a warning.
const WELL_COVERED: f64 = 0.99;
/// Sampling periods a run must last for its figure not to be coarse.
const FINE_PERIODS: f64 = 10.0;

/// Price and carbon intensity from the preferences, and the feeds' slots where set.
pub struct Pricing {
    pub prices: wattbar_core::Pricing,
    pub currency: String,
}

/// The machine's draw before the first run.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub seconds: f64,
    pub mean_watts: Option<f64>,
    /// Mean watts per domain.
    pub by_domain: BTreeMap<String, f64>,
    pub how: String,
}

impl Baseline {
    pub fn of(window: &WindowEnergy, how: String) -> Baseline {
        let seconds = window.to - window.from;
        let covered = seconds * window.covered_fraction;
        Baseline {
            seconds,
            mean_watts: window.mean_watts,
            by_domain: window
                .by_domain
                .iter()
                .filter(|_| covered > 0.0)
                .map(|(d, j)| (d.clone(), j / covered))
                .collect(),
            how,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DomainFigure {
    pub domain: String,
    pub joules: f64,
    pub wh: f64,
    /// Over the measured part of the window; `None` when none of it was measured.
    pub mean_watts: Option<f64>,
    /// After the domain's idle draw over the same time; `None` without a baseline for it.
    pub net_joules: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseFigure {
    pub name: String,
    pub from: f64,
    pub to: f64,
    pub seconds: f64,
    pub joules: Option<f64>,
    pub mean_watts: Option<f64>,
    pub by_domain: BTreeMap<String, f64>,
}

/// One measured run of one command.
#[derive(Debug, Clone, Serialize)]
pub struct RunFigures {
    pub run: u32,
    pub command: String,
    pub exit_code: i32,
    pub outcome: String,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    /// The whole machine's energy over the run; `None` when nothing was measured.
    pub gross_joules: Option<f64>,
    pub gross_wh: Option<f64>,
    pub net_joules: Option<f64>,
    pub mean_watts: Option<f64>,
    pub peak_watts: Option<f64>,
    pub by_domain: Vec<DomainFigure>,
    pub cost: Option<f64>,
    pub currency: String,
    pub carbon_g: Option<f64>,
    /// What of the run's energy came from the battery and what it wore; `None` on a machine
    /// without one. `cost` is the grid's, of the rest.
    pub battery: Option<BatteryFigure>,
    /// Mean share of all CPUs busy during the run, 0–100.
    pub cpu_busy_percent: Option<f64>,
    /// The energy of the command's own process tree, per domain ([`super::tree`]).
    pub attributed_joules: std::collections::BTreeMap<String, f64>,
    /// What was not attributed, or why nothing was.
    pub attributed_note: Option<String>,
    /// Per GPU: utilisation mean and max, memory used at its peak.
    pub gpus: Vec<super::gpu::GpuFigure>,
    /// Why no GPU figures are given, when none are.
    pub gpus_not_reported: Option<String>,
    pub covered_fraction: f64,
    pub samples: usize,
    pub quality: Option<Quality>,
    pub sources: Vec<String>,
    pub phases: Vec<PhaseFigure>,
    pub coarse: bool,
    pub warnings: Vec<String>,
}

/// A run's energy drawn from the battery, and its wear.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryFigure {
    pub joules: f64,
    pub wh: f64,
    /// Of the run's energy, 0–100.
    pub share_percent: f64,
    /// `None` where some of it had no rate to price it (no `battery_price`, no design
    /// capacity): never a wear of 0.
    pub wear: Option<f64>,
    pub currency: String,
}

impl BatteryFigure {
    /// The battery's part of `gross` joules over `states` (in time order): the session's
    /// battery energy over the states' span as a share of the session's energy over it, applied
    /// to the window's energy; the wear at the rate the span wore at.
    pub fn of(states: &[State], gross: f64) -> Option<BatteryFigure> {
        let first = states.iter().find(|s| s.battery.is_some())?;
        let last = states.iter().rev().find(|s| s.battery.is_some())?;
        let (b0, b1) = (first.battery.as_ref()?, last.battery.as_ref()?);
        let session = last.session_joules - first.session_joules;
        let drawn = (b1.joules - b0.joules).max(0.0);
        let share = if session > 0.0 {
            (drawn / session).clamp(0.0, 1.0)
        } else if b1.on_battery {
            1.0
        } else {
            0.0
        };
        let joules = gross * share;
        let unpriced = b1.unpriced_joules > b0.unpriced_joules;
        let wear = match drawn > 0.0 {
            true if !unpriced => Some((b1.wear - b0.wear).max(0.0) / drawn * joules),
            true => None,
            false => Some(0.0),
        };
        Some(BatteryFigure {
            joules,
            wh: joules / 3600.0,
            share_percent: share * 100.0,
            wear,
            currency: b1.currency.clone(),
        })
    }
}

/// What a run needs besides its energy window.
pub struct RunContext<'a> {
    pub run: u32,
    pub command: String,
    pub exit_code: i32,
    pub outcome: String,
    pub interval: Duration,
    pub baseline: Option<&'a Baseline>,
    pub pricing: &'a Pricing,
    pub cpu_busy_percent: Option<f64>,
    pub attributed: super::tree::Attributed,
    pub gpus: (Vec<super::gpu::GpuFigure>, Option<String>),
    /// Why sources could not read, for a run with nothing measured.
    pub unavailable: String,
}

pub fn run_figures(
    cx: RunContext<'_>,
    window: &WindowEnergy,
    states: &[State],
    phases: Vec<(Phase, WindowEnergy)>,
) -> RunFigures {
    let seconds = window.to - window.from;
    let gross = window.joules;
    // The energy is of the measured part: its mean and the idle draw to subtract are over
    // that part's seconds, not the run's.
    let covered = seconds * window.covered_fraction;
    let idle_watts = cx.baseline.and_then(|b| b.mean_watts);
    let by_domain = window
        .by_domain
        .iter()
        .map(|(d, j)| DomainFigure {
            domain: d.clone(),
            joules: *j,
            wh: j / 3600.0,
            mean_watts: (covered > 0.0).then(|| j / covered),
            net_joules: cx
                .baseline
                .and_then(|b| b.by_domain.get(d))
                .map(|w| j - w * covered),
        })
        .collect();
    let peak = states
        .iter()
        .filter_map(|s| s.watts)
        .filter(|w| w.is_finite())
        .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))));
    let mut warnings = Vec::new();
    // The slowest period the run was sampled at: an engine samples faster only while it
    // measures an inference request, and the run must not be judged by that.
    let period = states
        .iter()
        .map(|s| std::time::Duration::from_millis(s.period()))
        .fold(cx.interval, std::time::Duration::max);
    let coarse = seconds < FINE_PERIODS * period.as_secs_f64();
    if coarse {
        warnings.push(format!(
            "the run lasted {seconds:.3} s, less than ten sampling periods of {}: its figure is coarse",
            super::meter::humantime_ms(period)
        ));
    }
    match gross {
        None => warnings.push(format!("nothing was measured: {}", cx.unavailable)),
        Some(_) if window.covered_fraction < WELL_COVERED => warnings.push(format!(
            "only {:.0} % of the run was measured: the energy is of that part",
            window.covered_fraction * 100.0
        )),
        Some(_) => {}
    }
    let week = wattbar_engine::accounting::local_week_seconds(window.from);
    let battery = gross.and_then(|g| BatteryFigure::of(states, g));
    // The battery's joules are not the grid's: the grid is priced for the rest.
    let from_grid = gross.map(|g| g - battery.as_ref().map_or(0.0, |b| b.joules));
    let priced = from_grid.map(|g| {
        cx.pricing
            .prices
            .price(window.from, week, covered, Joules(g))
    });
    RunFigures {
        run: cx.run,
        command: cx.command,
        exit_code: cx.exit_code,
        outcome: cx.outcome,
        start: window.from,
        end: window.to,
        seconds,
        gross_joules: gross,
        gross_wh: gross.map(|j| j / 3600.0),
        net_joules: gross.zip(idle_watts).map(|(g, w)| g - w * covered),
        mean_watts: window.mean_watts,
        peak_watts: peak,
        by_domain,
        cost: priced.as_ref().map(|p| p.cost),
        currency: cx.pricing.currency.clone(),
        carbon_g: priced.as_ref().and_then(|p| p.carbon_g),
        battery,
        cpu_busy_percent: cx.cpu_busy_percent,
        attributed_joules: cx.attributed.joules,
        attributed_note: cx.attributed.note,
        gpus: cx.gpus.0,
        gpus_not_reported: cx.gpus.1,
        covered_fraction: window.covered_fraction,
        samples: window.samples,
        quality: window.quality,
        sources: window.sources.clone(),
        phases: phases
            .into_iter()
            .map(|(p, w)| PhaseFigure {
                seconds: p.to - p.from,
                name: p.name,
                from: p.from,
                to: p.to,
                joules: w.joules,
                mean_watts: w.mean_watts,
                by_domain: w.by_domain.into_iter().collect(),
            })
            .collect(),
        coarse,
        warnings,
    }
}

/// Mean, standard deviation (of a sample, n − 1), median, min and max.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub mean: f64,
    pub stddev: Option<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let stddev = (v.len() > 1)
            .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
        let mid = v.len() / 2;
        let median = if v.len().is_multiple_of(2) {
            (v[mid - 1] + v[mid]) / 2.0
        } else {
            v[mid]
        };
        Some(Stats {
            mean,
            stddev,
            median,
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// Every measured run of one command.
#[derive(Debug, Clone, Serialize)]
pub struct CommandResult {
    pub command: String,
    pub exit_codes: Vec<i32>,
    pub seconds: Option<Stats>,
    pub gross_joules: Option<Stats>,
    pub net_joules: Option<Stats>,
    pub mean_watts: Option<Stats>,
    pub runs: Vec<RunFigures>,
}

impl CommandResult {
    pub fn of(command: String, runs: Vec<RunFigures>) -> CommandResult {
        // Statistics are of the runs that succeeded: a failed or interrupted run is listed
        // with its status but would skew them.
        let pick = |f: fn(&RunFigures) -> Option<f64>| {
            Stats::of(
                &runs
                    .iter()
                    .filter(|r| r.exit_code == 0)
                    .filter_map(f)
                    .collect::<Vec<_>>(),
            )
        };
        CommandResult {
            command,
            exit_codes: runs.iter().map(|r| r.exit_code).collect(),
            seconds: pick(|r| Some(r.seconds)),
            gross_joules: pick(|r| r.gross_joules),
            net_joules: pick(|r| r.net_joules),
            mean_watts: pick(|r| r.mean_watts),
            runs,
        }
    }
}

/// The whole of `run`'s answer: `--json`'s object and `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub wattbar: &'static str,
    /// How the energy was measured.
    pub measured: String,
    pub interval_seconds: f64,
    pub baseline: Option<Baseline>,
    pub results: Vec<CommandResult>,
    pub exit_code: i32,
}

#[cfg(test)]
mod tests;
