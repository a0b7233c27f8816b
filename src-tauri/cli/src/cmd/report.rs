//! `wattbar-cli report`: the ledger's report (power over the period, energy and cost per day,
//! energy per token per model) as an SVG or a PNG, read-only beside a running engine.

use crate::args::parse_time;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use wattbar_engine::unix_now;

/// The longest period one report covers.
const MAX_SECONDS: f64 = 400.0 * 86_400.0;

/// Where to write: a file by its extension, or both kinds into a folder.
fn targets(out: &Path) -> Result<Vec<PathBuf>> {
    if out.is_dir() || out.as_os_str().to_string_lossy().ends_with('/') {
        return Ok(vec![
            out.join("wattbar-report.svg"),
            out.join("wattbar-report.png"),
        ]);
    }
    match out.extension().and_then(|e| e.to_str()) {
        Some("svg" | "png") => Ok(vec![out.to_path_buf()]),
        _ => bail!(
            "{}: name a .svg or .png file, or a folder (for both)",
            out.display()
        ),
    }
}

pub fn report(from: &str, to: &str, out: &Path) -> Result<()> {
    let now = unix_now();
    let from = parse_time(from, now)?;
    let to = parse_time(to, now)?;
    if from >= to {
        bail!("--from must be before --to");
    }
    if to - from > MAX_SECONDS {
        bail!("a report covers at most 400 days");
    }
    let targets = targets(out)?;
    let prefs = crate::engine::read_prefs()?;
    let store = crate::ledger::open_read_only()?;
    let report = wattbar_engine::report::local(&store, &prefs, from, to)?;
    let size = report.default_size();
    for path in targets {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot make {}", dir.display()))?;
        }
        if path.extension().and_then(|e| e.to_str()) == Some("png") {
            wattbar_report::png(&report, size, &path)?;
        } else {
            let svg = wattbar_report::svg(&report, size)?;
            std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        eprintln!("wrote {} ({}×{})", path.display(), size.0, size.1);
    }
    Ok(())
}
