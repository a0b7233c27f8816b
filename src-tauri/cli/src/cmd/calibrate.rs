//! `wattbar-cli calibrate`: the line from the machine's parts (its sensors' sum) to a
//! whole-machine reference (a plug at the wall, a discharging battery).
//!
//! - `--from-csv FILE` fits a recorded trace with the columns `t,reference_watts,
//!   components_watts` (t in seconds) with the engine's own maths, so anyone can check them.
//! - Without it, what the running engine learned (`/v1/calibration`).
//!
//! JSON: `{"offset_watts", "slope", "r2", "heldout_mape", "windows", …}`. A refusal (too few
//! windows, too narrow a load range, a poor fit) exits 1 with its reason.

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use wattbar_core::calibration::{self, Fit, Pair};
use wattbar_core::{Watts, MAX_POWER_WATTS};

pub fn calibrate(from_csv: Option<&Path>, json: bool) -> Result<()> {
    match from_csv {
        Some(file) => from_file(file, json),
        None => from_engine(json),
    }
}

fn from_file(file: &Path, json: bool) -> Result<()> {
    let text = wattbar_engine::home::paths::read_at_most(
        file,
        wattbar_engine::home::paths::MAX_GIVEN_FILE_BYTES,
    )
    .with_context(|| format!("cannot read {}", file.display()))?;
    let pairs = parse_trace(&text).with_context(|| format!("{}", file.display()))?;
    let windows = calibration::windows(&pairs);
    let fit = calibration::fit(&windows).map_err(|r| anyhow!("calibration refused: {r}"))?;
    let before = wattbar_engine::stages::calibration::before_mape(&windows);
    let mid = (fit.components_min_watts + fit.components_max_watts) / 2.0;
    if json {
        let mut v = serde_json::to_value(fit)?;
        v["before_mape"] = serde_json::json!(before);
        crate::out!("{v}")?;
    } else {
        print_fit(&fit, before, Some(mid), "the reference")?;
    }
    Ok(())
}

/// `t,reference_watts,components_watts` rows, in any column order, in time order; a bad row (not
/// a number, a power no machine draws, a time that goes back) is an error that names its line.
pub fn parse_trace(text: &str) -> Result<Vec<Pair>> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader.headers()?.clone();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| {
            anyhow!("no column {name:?}: the columns are t,reference_watts,components_watts")
        })
    };
    let (t, reference, components) = (
        column("t")?,
        column("reference_watts")?,
        column("components_watts")?,
    );
    let mut pairs = Vec::new();
    for record in reader.records() {
        let record = record?;
        let line = record.position().map_or(0, csv::Position::line);
        let number = |i: usize, name: &str| -> Result<f64> {
            let field = record.get(i).unwrap_or_default();
            field
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| anyhow!("line {line}: {name} {field:?} is not a number"))
        };
        let watts = |i: usize, name: &str| -> Result<Watts> {
            let w = number(i, name)?;
            if !(0.0..=MAX_POWER_WATTS).contains(&w) {
                let field: String = record.get(i).unwrap_or_default().chars().take(24).collect();
                bail!(
                    "line {line}: {name} {field} is not a power a machine draws (0 to {} kW)",
                    MAX_POWER_WATTS / 1000.0
                );
            }
            Ok(Watts(w))
        };
        let at = number(t, "t")?;
        if let Some(before) = pairs.last().map(|p: &Pair| p.t).filter(|b| at <= *b) {
            bail!("line {line}: t {at} does not come after {before}: rows must be in time order");
        }
        pairs.push(Pair {
            t: at,
            reference: watts(reference, "reference_watts")?,
            components: watts(components, "components_watts")?,
        });
    }
    if pairs.is_empty() {
        bail!("no rows");
    }
    Ok(pairs)
}

fn from_engine(json: bool) -> Result<()> {
    let client = match crate::client::running()? {
        Some(client) => client,
        None => bail!("no engine runs for this data folder: start `wattbar-cli serve`, or fit a recorded trace with --from-csv"),
    };
    let v = client.get("/v1/calibration")?;
    let fit: Option<Fit> = serde_json::from_value(v["learned"]["fit"].clone()).ok();
    let Some(fit) = fit else {
        let why = v["refusal"].as_str().map(String::from).unwrap_or_else(|| {
            format!(
                "no fit yet: {} of {} windows of at least 30 s with a whole-machine reference and the parts both reading",
                v["windows"], v["windows_needed"]
            )
        });
        bail!("calibration refused: {why}");
    };
    if json {
        crate::out!("{v}")?;
        return Ok(());
    }
    let reference = match v["learned"]["reference"].as_str() {
        Some("wall") => "the wall",
        _ => "the whole machine",
    };
    print_fit(
        &fit,
        v["before_mape"].as_f64(),
        v["components_watts"].as_f64(),
        reference,
    )?;
    if let Some(why) = v["refusal"].as_str() {
        crate::out!("The newest try was refused ({why}); the fit above stays in use.")?;
    }
    if v["standing_in"].as_bool() == Some(true) {
        crate::out!("The reference is gone: the headline is this calibrated figure now.")?;
    }
    Ok(())
}

fn print_fit(fit: &Fit, before: Option<f64>, parts: Option<f64>, reference: &str) -> Result<()> {
    crate::out!(
        "{reference} ≈ {:.2} W + {:.3} × the parts (R² {:.3}, {} windows, parts {:.1}–{:.1} W)",
        fit.offset_watts,
        fit.slope,
        fit.r2,
        fit.windows,
        fit.components_min_watts,
        fit.components_max_watts
    )?;
    let before = before.map_or(String::new(), |b| {
        format!("; the parts alone were off by {:.1} %", b * 100.0)
    });
    crate::out!(
        "Held-out error {:.2} % (largest {:.2} %){before}",
        fit.heldout_mape * 100.0,
        fit.heldout_max_ape * 100.0
    )?;
    if let Some(w) = parts {
        let predicted = fit.predict(Watts(w));
        crate::out!(
            "At {w:.1} W of parts: {:.1} ± {:.1} W at {reference}, {:+.1} W the parts do not see",
            predicted.0,
            fit.bound(Watts(w)).0,
            predicted.0 - w
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        parse_trace(text)
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_else(|| panic!("taken: {text}"))
    }

    #[test]
    fn a_power_no_machine_draws_is_refused_by_its_line_not_fitted() {
        // Before, 1e308 W was taken as a sample, and the fit's largest error came from it.
        let why = refusal("t,reference_watts,components_watts\n0,100,60\n1,1e308,60\n");
        assert!(why.contains("line 3") && why.contains("1e308"), "{why}");
        let why = refusal("t,reference_watts,components_watts\n0,100,-5\n");
        assert!(why.contains("components_watts -5"), "{why}");
    }

    #[test]
    fn rows_that_go_back_in_time_are_refused_with_why() {
        // Before: "0 windows so far", with no word of why.
        let why = refusal("t,reference_watts,components_watts\n10,100,60\n11,100,60\n5,100,60\n");
        assert!(
            why.contains("line 4") && why.contains("time order"),
            "{why}"
        );
        let taken = parse_trace("t,reference_watts,components_watts\n0,100,60\n1,120,70\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(taken.len(), 2);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn cell() -> impl Strategy<Value = String> {
            prop_oneof![
                Just("1e308".to_string()),
                Just("-5".to_string()),
                Just("NaN".to_string()),
                Just("inf".to_string()),
                Just(String::new()),
                (0u32..200).prop_map(|n| n.to_string()),
                "[0-9.e+-]{1,8}",
                "\\PC{0,6}",
            ]
        }

        proptest! {

            /// Any table: refused with its line, or rows in time order with powers a machine
            /// draws.
            #[test]
            fn any_trace_is_refused_or_fit_to_calibrate(
                rows in prop::collection::vec((cell(), cell(), cell()), 0..12),
                header in prop_oneof![
                    Just("t,reference_watts,components_watts".to_string()),
                    Just("components_watts,t,reference_watts".to_string()),
                    "[a-z_,]{0,30}",
                ],
            ) {
                let mut text = header;
                for (a, b, c) in &rows {
                    text.push_str(&format!("\n{a},{b},{c}"));
                }
                if let Ok(pairs) = parse_trace(&text) {
                    prop_assert!(!pairs.is_empty());
                    for w in pairs.windows(2) {
                        prop_assert!(w[1].t > w[0].t);
                    }
                    for p in &pairs {
                        for watts in [p.reference.0, p.components.0] {
                            prop_assert!((0.0..=MAX_POWER_WATTS).contains(&watts));
                        }
                    }
                }
            }
        }
    }
}
