//! Commands that read sources or files once and print JSON: `sources`, `integrate`, `probe`,
//! `parse`. They never touch the ledger.

use crate::args::CaptureKind;
use anyhow::{bail, Context, Result};
use std::time::Duration;
use wattbar_core::Coverage;
use wattbar_engine::{build_chain, unix_now, ChainOptions};

/// Samples twice (counters and utilisation need two reads) and prints every source's status.
pub fn sources() -> Result<()> {
    let mut chain = build_chain(&ChainOptions::from_env())?;
    let origin = std::time::Instant::now();
    let stamp = || wattbar_core::Stamp::new(origin.elapsed(), unix_now());
    chain.sample_every_source(stamp());
    std::thread::sleep(Duration::from_millis(250));
    let snapshot = chain.sample_every_source(stamp());
    // Each source with what its readings cover, and the headline with what it covers.
    let sources: Vec<serde_json::Value> = chain
        .status(&snapshot)
        .into_iter()
        .map(|status| {
            let mut covers: Vec<Coverage> = snapshot
                .breakdown
                .iter()
                .filter(|r| r.source == status.id)
                .map(|r| Coverage::of_domain(r.domain, r.device.as_deref()))
                .collect();
            covers.dedup();
            let mut v = serde_json::to_value(&status).unwrap_or_default();
            v["covers"] = serde_json::to_value(&covers).unwrap_or_default();
            v
        })
        .collect();
    let coverage = snapshot.coverage();
    let report = serde_json::json!({
        "sources": sources,
        "feeds": feeds(),
        "headline": snapshot.headline,
        "scope": coverage.as_ref().map(|c| c.scope),
        "covers": coverage.as_ref().map(|c| c.covers.clone()).unwrap_or_default(),
        "scope_text": coverage.as_ref().map(Coverage::describe),
    });
    crate::out!("{}", serde_json::to_string_pretty(&report)?)?;
    Ok(())
}

/// The price and carbon feeds the preferences name, each asked once: the slots it gave, or why
/// it gave none.
fn feeds() -> Vec<serde_json::Value> {
    let Ok(prefs) = crate::engine::read_prefs() else {
        return Vec::new();
    };
    let now = unix_now();
    [(prefs.price_feed, false), (prefs.carbon_feed, true)]
        .into_iter()
        .filter_map(|(pref, carbon)| Some((pref?, carbon)))
        .map(|(pref, carbon)| {
            let asked = wattbar_sources::prices::fetch::FeedClient::new(&pref)
                .and_then(|c| c.fetch(now, carbon));
            match asked {
                Ok(spot) => {
                    let series = pref.retail(&spot);
                    serde_json::json!({
                        "feed": pref.key(),
                        "quantity": series.quantity,
                        "currency": series.currency,
                        "slots": series.slots.len(),
                        "span": series.span(),
                        "now": series.at(now),
                    })
                }
                Err(e) => serde_json::json!({
                    "feed": pref.key(),
                    "slots": 0,
                    "error": e.to_string(),
                }),
            }
        })
        .collect()
}

pub fn integrate_file(file: &std::path::Path) -> Result<()> {
    let text = wattbar_engine::home::paths::read_at_most(
        file,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", file.display()))?;
    match crate::integrate::integrate(&text) {
        Ok(report) => {
            crate::out!("{}", serde_json::to_string(&report)?)?;
            Ok(())
        }
        Err(e) => bail!("{}: {e}", file.display()),
    }
}

/// The `probe`/`parse` output shape: `{"samples": [{"readings": [...], "state": {...}}]}`.
fn samples_json(samples: &[wattbar_sources::Sample]) -> serde_json::Value {
    let samples: Vec<serde_json::Value> = samples
        .iter()
        .map(|s| {
            let readings: Vec<serde_json::Value> = s
                .readings
                .iter()
                .map(|r| {
                    let coverage = Coverage::of_domain(r.domain, r.device.as_deref());
                    serde_json::json!({
                        "domain": r.domain,
                        "device": r.device,
                        "watts": r.watts.map(|w| w.0),
                        "source": r.source,
                        "quality": r.quality,
                        "scope": coverage.scope,
                        "covers": coverage.covers,
                    })
                })
                .collect();
            serde_json::json!({"readings": readings, "state": s.state})
        })
        .collect();
    serde_json::json!({ "samples": samples })
}

pub fn probe(
    root: &std::path::Path,
    then: Option<&std::path::Path>,
    after: Option<f64>,
) -> Result<()> {
    if !root.is_dir() {
        bail!("{} is not a directory", root.display());
    }
    let then = match (then, after) {
        (Some(dir), Some(secs)) => {
            if !dir.is_dir() {
                bail!("{} is not a directory", dir.display());
            }
            match Duration::try_from_secs_f64(secs) {
                Ok(after) if secs > 0.0 => Some((dir, after)),
                _ => bail!("--after must be a positive number of seconds, {secs} is not one"),
            }
        }
        _ => None,
    };
    let options = ChainOptions::from_env();
    let model = wattbar_sources::CpuPowerModel::detect(root, options.cpu_tdp_watts);
    let sample = wattbar_sources::linux::probe(root, then, model);
    crate::out!("{}", serde_json::to_string(&samples_json(&[sample]))?)?;
    Ok(())
}

pub fn parse(kind: CaptureKind, file: &std::path::Path) -> Result<()> {
    use wattbar_sources::macos::{ioreg, macmon, pmset, powermetrics, top};
    let bytes = wattbar_engine::home::paths::read_bytes_at_most(
        file,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", file.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let at = wattbar_core::Stamp::default();
    let fail = |e: wattbar_sources::Error| anyhow::anyhow!("{}: {e}", file.display());
    let samples: Vec<wattbar_sources::Sample> = match kind {
        CaptureKind::Ioreg => vec![ioreg::parse_ioreg(&text).map_err(fail)?.to_sample(at)],
        CaptureKind::Powermetrics => powermetrics::parse_powermetrics(&text)
            .map_err(fail)?
            .iter()
            .map(|r| r.to_sample(at))
            .collect(),
        CaptureKind::PmsetBatt => vec![pmset::parse_pmset_batt(&text).map_err(fail)?.to_sample(at)],
        CaptureKind::PmsetG => vec![pmset::parse_pmset_g(&text).map_err(fail)?.to_sample(at)],
        CaptureKind::Top => {
            let model = wattbar_sources::CpuPowerModel::detect(
                std::path::Path::new("/"),
                ChainOptions::from_env().cpu_tdp_watts,
            );
            vec![top::parse_top(&text)
                .map_err(fail)?
                .to_sample_with_model(&model, at)]
        }
        CaptureKind::Plug => {
            // What a plug says is not a sample of this machine: printed as read.
            let reading = wattbar_sources::plugs::parse_plug(&text).map_err(fail)?;
            crate::out!("{}", serde_json::to_string(&reading)?)?;
            return Ok(());
        }
        CaptureKind::Macmon => {
            let mut channels = macmon::MacmonChannels::default();
            macmon::parse_macmon_json(&text)
                .map_err(fail)?
                .iter()
                .map(|s| channels.to_sample(s, at))
                .collect()
        }
    };
    crate::out!("{}", serde_json::to_string(&samples_json(&samples))?)?;
    Ok(())
}
