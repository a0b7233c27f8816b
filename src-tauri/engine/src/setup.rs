//! Builds the chain for this machine from the environment.

use crate::error::Error;
use crate::home::paths::{read_at_most, MAX_GIVEN_FILE_BYTES};
use std::path::{Path, PathBuf};
use wattbar_core::prefs::WallMeterPref;
use wattbar_core::{Chain, Source};
use wattbar_sources::plugs::{Vendor, WallMeter, WallMeterSource};
use wattbar_sources::{replay, ReplaySource};

pub const REPLAY_ENV: &str = "WATTBAR_REPLAY";
pub const SYSFS_ROOT_ENV: &str = "WATTBAR_SYSFS_ROOT";
pub const CPU_TDP_ENV: &str = "WATTBAR_CPU_TDP_W";
/// The wall meter's address, as `--wall-meter` gives it.
pub const WALL_METER_ENV: &str = "WATTBAR_WALL_METER";

#[derive(Debug, Clone, Default)]
pub struct ChainOptions {
    /// A recorded trace that replaces every source.
    pub replay: Option<PathBuf>,
    /// Root under which Linux readers look for `sys/` and `proc/`.
    pub root: PathBuf,
    pub cpu_tdp_watts: Option<f64>,
    /// A smart plug the machine is plugged into: its reading is the `wall` domain, beside
    /// whatever else reads (a replayed trace too).
    pub wall_meter: Option<WallMeter>,
}

impl ChainOptions {
    /// `WATTBAR_REPLAY`, `WATTBAR_SYSFS_ROOT` (default `/`), `WATTBAR_CPU_TDP_W` and
    /// `WATTBAR_WALL_METER`.
    pub fn from_env() -> Self {
        ChainOptions {
            replay: std::env::var_os(REPLAY_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            root: std::env::var_os(SYSFS_ROOT_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/")),
            cpu_tdp_watts: std::env::var(CPU_TDP_ENV)
                .ok()
                .and_then(|v| v.trim().parse().ok()),
            wall_meter: std::env::var(WALL_METER_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|url| WallMeter {
                    url,
                    ..WallMeter::default()
                }),
        }
    }
}

pub fn load_trace(path: &Path) -> Result<replay::Trace, Error> {
    let text = read_at_most(path, MAX_GIVEN_FILE_BYTES).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    replay::parse_trace(&text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

pub fn build_chain(options: &ChainOptions) -> Result<Chain, Error> {
    let mut sources: Vec<Box<dyn Source>> = match &options.replay {
        Some(path) => vec![Box::new(ReplaySource::new(load_trace(path)?))],
        None => wattbar_sources::default_sources(&options.root, options.cpu_tdp_watts),
    };
    if let Some(meter) = &options.wall_meter {
        sources.push(wall_meter_source(meter));
    }
    Ok(Chain::new(sources))
}

/// The wall meter's source; one that cannot be set up stays listed with its reason.
pub fn wall_meter_source(meter: &WallMeter) -> Box<dyn Source> {
    match WallMeterSource::new(meter) {
        Ok(source) => Box::new(source),
        Err(e) => Box::new(wattbar_sources::Absent::new(
            wattbar_sources::plugs::SOURCE_ID,
            wattbar_core::Quality::Measured,
            e,
        )),
    }
}

/// `secret`, bound to `url`'s origin: given for no other address.
fn bound(url: &str, secret: Option<&String>) -> Option<wattbar_core::secret::Bound> {
    wattbar_core::secret::Bound::new(url, secret?.clone())
}

/// The wall meter the preference names.
pub fn wall_meter_of(pref: &WallMeterPref) -> WallMeter {
    WallMeter {
        url: pref.url.clone(),
        kind: pref.kind.as_deref().and_then(Vendor::named),
        password: bound(&pref.url, pref.password.as_ref()),
        token: bound(&pref.url, pref.token.as_ref()),
        channels: pref.channels.clone(),
        tls_pin: pref
            .tls_pin_sha256
            .as_deref()
            .and_then(|p| wattbar_core::pin::Pin::parse(p).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_trace_with_no_end_is_refused_at_its_limit() {
        let refused = load_trace(Path::new("/dev/zero"))
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("67108864 bytes it may hold")),
            "{refused:?}"
        );
    }
}
