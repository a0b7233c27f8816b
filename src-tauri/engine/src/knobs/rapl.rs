//! RAPL's package power limit as a sweep's knob: the long-term limit of the first package zone
//! (`intel-rapl:0/constraint_0_power_limit_uw`, named `long_term`), under the sysfs root
//! (`WATTBAR_SYSFS_ROOT`, default `/`).
//!
//! Rules:
//! - Values are watts as the sweep names them (`95W`, `71.25W`); the file holds microwatts.
//! - The steps: the limit as it is, then the zone's rated maximum (`constraint_0_max_power_uw`,
//!   its TDP) where lower, then 75 % and 50 % of that maximum (of the limit as it is, where the
//!   zone gives no maximum); most power first, each once.
//! - Writing the limit needs root: the powercap files are root's to write, and the udev rule of
//!   the `wattbar` group grants reading only. Where it cannot write, the sweep is refused before
//!   any change, saying so.
//! - Limits on what is read: an attribute at most 64 KiB (`sources::linux::sysfs`), a limit a
//!   whole number of microwatts of at most [`MAX_LIMIT_UW`].

use crate::error::Error;
use std::path::{Path, PathBuf};
use wattbar_sources::linux::sysfs::read_attr;

/// The most a package limit may be: 10 kW. Firmware writes 4,090 W for "no limit".
pub const MAX_LIMIT_UW: u64 = 10_000_000_000;

/// The package's long-term limit, reachable.
#[derive(Debug, Clone)]
pub struct RaplLimit {
    zone: PathBuf,
}

fn said(what: String) -> Error {
    Error::Setting(what)
}

/// Microwatts as a sysfs attribute holds them, checked.
fn parse_uw(text: &str, file: &Path) -> Result<u64, Error> {
    let uw: u64 = text.trim().parse().map_err(|_| {
        said(format!(
            "{} holds {text:?}, not a whole number of microwatts",
            file.display()
        ))
    })?;
    if uw > MAX_LIMIT_UW {
        return Err(said(format!(
            "{} holds {uw} µW, more than {MAX_LIMIT_UW}",
            file.display()
        )));
    }
    Ok(uw)
}

/// Watts as the sweep names them: `95W`, `71.25W`.
fn watts_of(uw: u64) -> String {
    super::values::named(uw as f64 / 1e6, "W")
}

/// The microwatts a value names.
fn uw_of(value: &str) -> Result<u64, Error> {
    let w = super::values::number_named(value, "W")
        .ok_or_else(|| said(format!("{value:?} is not a power limit such as 95W")))?;
    let uw = (w * 1e6).round() as u64;
    if uw > MAX_LIMIT_UW {
        return Err(said(format!("{value} is more than a package may be given")));
    }
    Ok(uw)
}

/// The steps from the limit as it is and the zone's maximum, most power first.
fn steps_from(now_uw: u64, max_uw: Option<u64>) -> Vec<String> {
    let rated = max_uw.filter(|m| *m > 0).unwrap_or(now_uw);
    let mut uws = vec![now_uw, rated.min(now_uw), rated * 3 / 4, rated / 2];
    uws.retain(|u| *u > 0);
    uws.sort_unstable_by(|a, b| b.cmp(a));
    uws.dedup();
    uws.into_iter().map(watts_of).collect()
}

impl RaplLimit {
    /// The first package zone under `root`, its long-term limit readable and writable.
    pub fn open(root: &Path) -> Result<RaplLimit, Error> {
        let zone = root
            .join(wattbar_sources::linux::rapl::POWERCAP)
            .join("intel-rapl:0");
        let name = read_attr(&zone.join("constraint_0_name"));
        if name.as_deref() != Some("long_term") {
            return Err(said(format!(
                "no RAPL package limit here: {} names no long_term constraint ({})",
                zone.display(),
                name.as_deref().unwrap_or("unreadable")
            )));
        }
        let limit = RaplLimit { zone };
        limit.current_uw()?;
        let file = limit.file();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map_err(|e| {
                said(format!(
                    "RAPL's package limit cannot be changed here ({}: {e}): writing it needs root; \
                     the wattbar group may only read it",
                    file.display()
                ))
            })?;
        Ok(limit)
    }

    fn file(&self) -> PathBuf {
        self.zone.join("constraint_0_power_limit_uw")
    }

    fn current_uw(&self) -> Result<u64, Error> {
        let file = self.file();
        let text =
            read_attr(&file).ok_or_else(|| said(format!("cannot read {}", file.display())))?;
        parse_uw(&text, &file)
    }

    pub fn current(&self) -> Result<String, Error> {
        self.current_uw().map(watts_of)
    }

    pub fn steps(&self) -> Result<Vec<String>, Error> {
        let max_file = self.zone.join("constraint_0_max_power_uw");
        let max = read_attr(&max_file)
            .map(|t| parse_uw(&t, &max_file))
            .transpose()?;
        Ok(steps_from(self.current_uw()?, max))
    }

    pub fn set(&self, value: &str) -> Result<(), Error> {
        let uw = uw_of(value)?;
        let file = self.file();
        std::fs::write(&file, uw.to_string())
            .map_err(|e| said(format!("cannot write {}: {e}", file.display())))?;
        let now = self.current_uw()?;
        if now == uw {
            Ok(())
        } else {
            Err(said(format!(
                "RAPL was given {value} and kept {}",
                watts_of(now)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_in_watts_and_read_back_exactly() {
        assert_eq!(watts_of(95_000_000), "95W");
        assert_eq!(watts_of(71_250_000), "71.25W");
        assert_eq!(uw_of("71.25W").ok(), Some(71_250_000));
        for bad in ["95", "-5W", "W", "1e20W", "NaNW"] {
            assert!(uw_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_steps_run_from_the_limit_in_force_down_to_half_the_rated_power() {
        // Firmware's 4,090 W "no limit" on a 95 W package: 4090, 95, 71.25, 47.5 W.
        assert_eq!(
            steps_from(4_090_000_000, Some(95_000_000)),
            ["4090W", "95W", "71.25W", "47.5W"]
        );
        // A limit of 95 W already, no maximum given: 95, 71.25, 47.5 W.
        assert_eq!(steps_from(95_000_000, None), ["95W", "71.25W", "47.5W"]);
    }
}
