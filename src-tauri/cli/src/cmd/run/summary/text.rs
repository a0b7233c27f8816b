//! The run's summary as a person reads it: the figures, their bounds and what they leave out.

use super::*;

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

pub(super) fn run_text(r: &RunFigures, baseline: Option<&Baseline>) -> String {
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
    if let Some(b) = &r.battery {
        let wear = match b.wear {
            Some(w) => format!("wear {w:.6} {}", b.currency),
            None => "wear not priced".to_string(),
        };
        t.push_str(&format!(
            "  on battery   {} ({:.0} %), {wear}\n",
            joules_text(b.joules),
            b.share_percent
        ));
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
