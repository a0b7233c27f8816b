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
    let priced = gross.map(|g| {
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

fn joules_text(j: f64) -> String {
    if j.abs() >= 10_000.0 {
        format!("{:.1} kJ ({:.3} Wh)", j / 1000.0, j / 3600.0)
    } else {
        format!("{j:.1} J ({:.4} Wh)", j / 3600.0)
    }
}

fn stat_line(name: &str, s: &Stats, unit: &str) -> String {
    format!(
        "  {name:<13}{:.3} {unit} ± {} (median {:.3}, min {:.3}, max {:.3})\n",
        s.mean,
        s.stddev.map_or("—".to_string(), |d| format!("{d:.3}")),
        s.median,
        s.min,
        s.max
    )
}

fn run_text(r: &RunFigures, baseline: Option<&Baseline>) -> String {
    let mut t = String::new();
    t.push_str(&format!("  duration     {:.3} s\n", r.seconds));
    match r.gross_joules {
        Some(g) => {
            t.push_str(&format!("  energy       {} gross", joules_text(g)));
            if let (Some(n), Some(b)) = (r.net_joules, baseline) {
                t.push_str(&format!(
                    ", {} net of {:.1} W idle",
                    joules_text(n),
                    b.mean_watts.unwrap_or(0.0)
                ));
            }
            t.push('\n');
        }
        None => t.push_str("  energy       not measured\n"),
    }
    if let Some(m) = r.mean_watts {
        t.push_str(&format!("  power        mean {m:.1} W"));
        if let Some(p) = r.peak_watts {
            t.push_str(&format!(", peak {p:.1} W"));
        }
        t.push('\n');
    }
    // `system` is the total above.
    for d in r.by_domain.iter().filter(|d| d.domain != "system") {
        t.push_str(&format!(
            "  {:<13}{}{}{}\n",
            d.domain,
            joules_text(d.joules),
            d.mean_watts
                .map(|w| format!(", mean {w:.1} W"))
                .unwrap_or_default(),
            d.net_joules
                .map(|n| format!(", {n:.1} J net"))
                .unwrap_or_default()
        ));
    }
    if let Some(c) = r.cost {
        t.push_str(&format!("  cost         {c:.6} {}", r.currency));
        if let Some(g) = r.carbon_g {
            t.push_str(&format!(", CO₂ {g:.3} g"));
        }
        t.push('\n');
    }
    match r.cpu_busy_percent {
        Some(c) => t.push_str(&format!("  cpu busy     {c:.1} % (mean)\n")),
        None => t.push_str("  cpu busy     not reported\n"),
    }
    for (domain, j) in &r.attributed_joules {
        t.push_str(&format!("  its own      {domain} {j:.1} J\n"));
    }
    for g in &r.gpus {
        let util = match (g.utilisation_mean_percent, g.utilisation_max_percent) {
            (Some(mean), Some(max)) => format!("busy {mean:.0} % mean, {max} % max"),
            _ => "utilisation not reported".into(),
        };
        let memory = match (g.memory_used_peak_bytes, g.memory_total_bytes) {
            (Some(used), Some(total)) => format!(
                ", memory peak {:.1} of {:.1} GiB",
                used as f64 / f64::from(1u32 << 30),
                total as f64 / f64::from(1u32 << 30)
            ),
            _ => String::new(),
        };
        t.push_str(&format!(
            "  gpu {:<9}{util}{memory}{}\n",
            g.index,
            g.name
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ));
    }
    if let Some(why) = &r.gpus_not_reported {
        t.push_str(&format!("  gpu          not reported: {why}\n"));
    }
    if !r.sources.is_empty() {
        t.push_str(&format!(
            "  sources      {} ({}), {:.0} % of the run covered by {} samples\n",
            r.sources.join(", "),
            r.quality.map_or("—", |q| q.as_str()),
            r.covered_fraction * 100.0,
            r.samples
        ));
    }
    for p in &r.phases {
        t.push_str(&format!(
            "  phase        {}: {:.3} s, {}\n",
            p.name,
            p.seconds,
            p.joules.map_or("not measured".into(), joules_text)
        ));
    }
    for w in &r.warnings {
        t.push_str(&format!("  warning: {w}\n"));
    }
    t
}

/// The summary people read, on stderr.
pub fn human(s: &Summary) -> String {
    let mut t = String::new();
    match &s.baseline {
        Some(b) => t.push_str(&format!(
            "wattbar run: idle baseline {} over {:.1} s ({})\n",
            b.mean_watts
                .map_or("not measured".to_string(), |w| format!("{w:.1} W")),
            b.seconds,
            b.how
        )),
        None => t.push_str(&format!("wattbar run: no idle baseline; {}\n", s.measured)),
    }
    for c in &s.results {
        if let [r] = c.runs.as_slice() {
            t.push_str(&format!("\n{}: {}\n", c.command, r.outcome));
            t.push_str(&run_text(r, s.baseline.as_ref()));
        }
        if c.runs.len() > 1 {
            t.push_str(&format!("\n{}: {} runs\n", c.command, c.runs.len()));
            for r in &c.runs {
                t.push_str(&format!(
                    "  run {:<9}{:.3} s, {}, {}\n",
                    r.run,
                    r.seconds,
                    r.gross_joules.map_or("not measured".into(), joules_text),
                    r.outcome
                ));
            }
            let mut warned: Vec<&String> = Vec::new();
            for w in c.runs.iter().flat_map(|r| r.warnings.iter()) {
                if !warned.contains(&w) {
                    warned.push(w);
                }
            }
            if let Some(st) = &c.seconds {
                t.push_str(&stat_line("duration", st, "s"));
            }
            if let Some(st) = &c.gross_joules {
                t.push_str(&stat_line("gross energy", st, "J"));
            }
            if let Some(st) = &c.net_joules {
                t.push_str(&stat_line("net energy", st, "J"));
            }
            if let Some(st) = &c.mean_watts {
                t.push_str(&stat_line("mean power", st, "W"));
            }
            for w in warned {
                t.push_str(&format!("  warning: {w}\n"));
            }
        }
    }
    if s.results.len() > 1 {
        t.push_str("\nside by side (mean gross energy):\n");
        let best = s
            .results
            .iter()
            .filter_map(|c| c.gross_joules.as_ref().map(|g| g.mean))
            .fold(f64::INFINITY, f64::min);
        for c in &s.results {
            match &c.gross_joules {
                Some(g) => t.push_str(&format!(
                    "  {:<40} {}  ×{:.2}\n",
                    c.command,
                    joules_text(g.mean),
                    g.mean / best
                )),
                None => t.push_str(&format!("  {:<40} not measured\n", c.command)),
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::tariff::Tariffs;

    #[test]
    fn stats_are_hyperfines_with_a_sample_standard_deviation() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, 32/7 → sd 2.138.
        let s = Stats::of(&[9.0, 2.0, 4.0, 4.0, 5.0, 4.0, 5.0, 7.0]).unwrap_or_else(|| panic!());
        assert_eq!((s.mean, s.median, s.min, s.max), (5.0, 4.5, 2.0, 9.0));
        let sd = s.stddev.unwrap_or_else(|| panic!());
        assert!((sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{sd}");
        assert_eq!(Stats::of(&[3.0]).and_then(|s| s.stddev), None);
        assert_eq!(Stats::of(&[]), None);
    }

    fn window(from: f64, to: f64, joules: Option<f64>, covered: f64) -> WindowEnergy {
        WindowEnergy {
            from,
            to,
            joules,
            bound_joules: None,
            by_domain: joules
                .map(|j| vec![("cpu".into(), j / 2.0)])
                .unwrap_or_default(),
            mean_watts: joules.map(|j| j / ((to - from) * covered)),
            samples: 10,
            covered_fraction: covered,
            quality: Some(Quality::Measured),
            sources: vec!["rapl".into()],
            coverage: None,
        }
    }

    fn pricing() -> Pricing {
        Pricing {
            prices: wattbar_core::Pricing::fixed(
                Tariffs::flat(wattbar_core::Price::new(0.36).unwrap_or_else(|e| panic!("{e}"))),
                Some(400.0),
            ),
            currency: "EUR".into(),
        }
    }

    fn cx<'a>(
        baseline: Option<&'a Baseline>,
        pricing: &'a Pricing,
        interval_ms: u64,
    ) -> RunContext<'a> {
        RunContext {
            run: 1,
            command: "sleep 2".into(),
            exit_code: 0,
            outcome: "exited with 0".into(),
            interval: Duration::from_millis(interval_ms),
            baseline,
            pricing,
            cpu_busy_percent: None,
            attributed: Default::default(),
            gpus: (Vec::new(), Some("no NVML".into())),
            unavailable: "rapl: no permission".into(),
        }
    }

    #[test]
    fn net_energy_takes_the_idle_draw_over_the_runs_own_length() {
        // Idle 40 W (cpu 15 W) for 5 s; the run: 300 W for 600 s = 180 kJ = 0.05 kWh,
        // net 180 kJ − 40 W × 600 s = 156 kJ; cpu 90 kJ − 15 W × 600 s = 81 kJ.
        let base = Baseline::of(
            &WindowEnergy {
                by_domain: vec![("cpu".into(), 75.0)],
                ..window(0.0, 5.0, Some(200.0), 1.0)
            },
            "5 s before the first run".into(),
        );
        assert_eq!(base.mean_watts, Some(40.0));
        let p = pricing();
        let r = run_figures(
            cx(Some(&base), &p, 100),
            &window(100.0, 700.0, Some(180_000.0), 1.0),
            &[],
            vec![],
        );
        assert_eq!(r.net_joules, Some(156_000.0));
        assert_eq!(r.by_domain[0].net_joules, Some(81_000.0));
        assert_eq!(r.mean_watts, Some(300.0));
        // 0.05 kWh at 0.36 EUR/kWh = 0.018 EUR; at 400 g/kWh = 20 g.
        assert!((r.cost.unwrap_or_default() - 0.018).abs() < 1e-12);
        assert!((r.carbon_g.unwrap_or_default() - 20.0).abs() < 1e-9);
        assert!(!r.coarse && r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn nothing_measured_is_null_with_the_reason_not_zero() {
        let p = pricing();
        let r = run_figures(cx(None, &p, 100), &window(0.0, 5.0, None, 0.0), &[], vec![]);
        assert_eq!((r.gross_joules, r.cost, r.mean_watts), (None, None, None));
        assert!(
            r.warnings.iter().any(|w| w.contains("rapl: no permission")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn a_run_shorter_than_ten_periods_is_coarse() {
        let p = pricing();
        // 2 s at a 1 s interval: two periods.
        let r = run_figures(
            cx(None, &p, 1000),
            &window(0.0, 2.0, Some(200.0), 1.0),
            &[],
            vec![],
        );
        assert!(r.coarse);
        // 2 s at 100 ms: twenty periods.
        let r = run_figures(
            cx(None, &p, 100),
            &window(0.0, 2.0, Some(200.0), 1.0),
            &[],
            vec![],
        );
        assert!(!r.coarse);
    }
}
