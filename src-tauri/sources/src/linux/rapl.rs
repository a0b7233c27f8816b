//! RAPL through powercap: `root/sys/class/powercap/intel-rapl:*` (Intel, and AMD since Linux 5.8).
//!
//! Rules:
//! - Zones are told apart by their `name`, never by their index: `package-N` is CPU package N
//!   (the CPU figure is the sum of the packages), `dram` is memory, `psys` is the whole platform
//!   (domain `platform`, never added to the packages), `core`/`uncore` are parts of a package and
//!   are left out so nothing is counted twice. `intel-rapl-mmio:*` zones repeat the MSR ones and are
//!   skipped. A top-level zone with no readable `name` is taken as a package (names exist on every
//!   kernel with powercap; a missing one is a capture that kept only `energy_uj`).
//! - Watts = Δ`energy_uj` / Δt / 10⁶ between two reads on the monotonic clock. A counter that went
//!   down wrapped: Δ = cur + `max_energy_range_uj` − prev. When `max_energy_range_uj` cannot be
//!   read the wrap cannot be sized and the interval is dropped (absent, not negative).
//! - A result above [`MAX_ZONE_WATTS`] is a broken counter or a bogus unit and is rejected.
//! - `energy_uj` has been root-only since 2020 (CVE-2020-8694): EACCES makes the source
//!   unavailable with the fix (`packaging/linux/60-wattbar-powercap.rules`).
//!
//! The first read has no watts yet: its readings carry only the energy counter.

use super::read_attr;
use crate::error::Error;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp, Watts};

pub const SOURCE_ID: &str = "rapl";
const POWERCAP: &str = "sys/class/powercap";
/// No RAPL zone of any CPU made draws more than this; more means the counter lies.
pub const MAX_ZONE_WATTS: f64 = 1000.0;

pub const UDEV_HINT: &str = "RAPL energy counters are readable by root only: install packaging/linux/60-wattbar-powercap.rules into /etc/udev/rules.d/ (sudo udevadm control --reload && sudo udevadm trigger --subsystem-match=powercap)";

/// What a zone is, from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneKind {
    Package(String),
    Dram(String),
    Psys,
    /// `core`, `uncore`: inside a package.
    Part(String),
}

pub fn classify(name: Option<&str>, top_level: bool) -> Option<ZoneKind> {
    match name {
        Some(n) if n.starts_with("package-") => Some(ZoneKind::Package(n.to_string())),
        Some("dram") => Some(ZoneKind::Dram("dram".to_string())),
        Some("psys") => Some(ZoneKind::Psys),
        Some(n @ ("core" | "uncore")) => Some(ZoneKind::Part(n.to_string())),
        Some(_) => None,
        None if top_level => Some(ZoneKind::Package("package".to_string())),
        None => None,
    }
}

/// One zone as read from sysfs.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// Directory name, e.g. `intel-rapl:0:1`.
    pub dir: String,
    pub kind: ZoneKind,
    pub energy_uj: u64,
    pub max_energy_range_uj: Option<u64>,
}

/// Parses a whole-number µJ file such as `energy_uj`.
pub fn parse_uj(text: &str) -> Result<u64, Error> {
    let t = text.trim();
    t.parse().map_err(|_| Error::Parse {
        what: "powercap counter",
        line: None,
        message: format!("{t:?} is not a whole number of µJ"),
    })
}

/// Energy between two counter values, in µJ, or `None` when it cannot be known.
pub fn delta_uj(prev: u64, cur: u64, max_energy_range_uj: Option<u64>) -> Option<u64> {
    if cur >= prev {
        Some(cur - prev)
    } else {
        let range = max_energy_range_uj.filter(|r| *r > prev)?;
        Some(cur + (range - prev))
    }
}

/// Watts over `seconds` from two counter values, rejecting what cannot be real.
pub fn watts_between(
    prev: u64,
    cur: u64,
    max_energy_range_uj: Option<u64>,
    seconds: f64,
) -> Option<Watts> {
    if seconds <= 0.0 || !seconds.is_finite() {
        return None;
    }
    let w = delta_uj(prev, cur, max_energy_range_uj)? as f64 / 1e6 / seconds;
    (w <= MAX_ZONE_WATTS).then_some(Watts(w))
}

/// Reads every RAPL zone under `root`.
pub fn read_zones(root: &Path) -> Result<Vec<Zone>, Error> {
    let base = root.join(POWERCAP);
    let entries = std::fs::read_dir(&base)
        .map_err(|e| Error::Unavailable(format!("no powercap under {}: {e}", base.display())))?;
    let mut dirs: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(n, _)| n.starts_with("intel-rapl:"))
        .collect();
    dirs.sort();
    let mut zones = Vec::new();
    for (dir, path) in dirs {
        let top_level = dir.matches(':').count() == 1;
        let name = read_attr(&path.join("name"));
        let Some(kind) = classify(name.as_deref(), top_level) else {
            continue;
        };
        let energy_uj = match std::fs::read(path.join("energy_uj")) {
            Ok(bytes) => parse_uj(&String::from_utf8_lossy(&bytes))?,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::Unavailable(UDEV_HINT.to_string()))
            }
            Err(e) => return Err(Error::Transient(format!("{dir}/energy_uj: {e}"))),
        };
        let max_energy_range_uj =
            read_attr(&path.join("max_energy_range_uj")).and_then(|t| parse_uj(&t).ok());
        zones.push(Zone {
            dir,
            kind,
            energy_uj,
            max_energy_range_uj,
        });
    }
    if zones.is_empty() {
        return Err(Error::Unavailable(format!(
            "no RAPL zones under {}",
            base.display()
        )));
    }
    Ok(zones)
}

/// Readings from two reads of the same zones `seconds` apart (`prev` may be empty: first read).
pub fn readings(
    prev: &HashMap<String, u64>,
    zones: &[Zone],
    seconds: f64,
    at: Stamp,
) -> Vec<Reading> {
    zones
        .iter()
        .filter_map(|z| {
            let (domain, device) = match &z.kind {
                ZoneKind::Package(name) => (Domain::Cpu, name.clone()),
                ZoneKind::Dram(name) => (Domain::Dram, name.clone()),
                ZoneKind::Psys => (Domain::Platform, "psys".to_string()),
                ZoneKind::Part(_) => return None,
            };
            let watts = prev
                .get(&z.dir)
                .and_then(|p| watts_between(*p, z.energy_uj, z.max_energy_range_uj, seconds));
            Some(Reading {
                domain,
                device: Some(device),
                watts,
                energy_counter: Some(Joules::from_microjoules(z.energy_uj as f64)),
                source: SOURCE_ID.to_string(),
                quality: Quality::Measured,
                at,
            })
        })
        .collect()
}

/// Where the zones that give readings keep their counters: found once, then read directly, so a
/// tick costs one file read per zone.
#[derive(Debug, Clone)]
struct Layout {
    root: PathBuf,
    zones: Vec<(PathBuf, Zone)>,
}

impl Layout {
    fn discover(root: &Path) -> Result<(Layout, Vec<Zone>), Error> {
        let zones = read_zones(root)?;
        let base = root.join(POWERCAP);
        let layout = Layout {
            root: root.to_path_buf(),
            zones: zones
                .iter()
                .filter(|z| !matches!(z.kind, ZoneKind::Part(_)))
                .map(|z| (base.join(&z.dir).join("energy_uj"), z.clone()))
                .collect(),
        };
        Ok((layout, zones))
    }

    fn read(&self) -> Result<Vec<Zone>, Error> {
        self.zones
            .iter()
            .map(|(path, zone)| {
                let bytes = std::fs::read(path).map_err(|e| Error::Transient(e.to_string()))?;
                Ok(Zone {
                    energy_uj: parse_uj(&String::from_utf8_lossy(&bytes))?,
                    ..zone.clone()
                })
            })
            .collect()
    }
}

/// The RAPL source: remembers the last counters to turn them into watts.
pub struct Rapl {
    root: PathBuf,
    layout: Option<Layout>,
    prev: HashMap<String, u64>,
    prev_at: Option<Duration>,
}

impl Rapl {
    pub fn new(root: &Path) -> Self {
        Rapl {
            root: root.to_path_buf(),
            layout: None,
            prev: HashMap::new(),
            prev_at: None,
        }
    }

    /// Reads from `root` (the source's own, or another for `probe --then`).
    pub fn read_root(&mut self, root: &Path, at: Stamp) -> Result<Vec<Reading>, Error> {
        let cached = self
            .layout
            .as_ref()
            .filter(|l| l.root == root)
            .and_then(|l| l.read().ok());
        let zones = match cached {
            Some(zones) => zones,
            None => {
                let (layout, zones) = Layout::discover(root)?;
                self.layout = Some(layout);
                zones
            }
        };
        let seconds = self
            .prev_at
            .map(|p| at.monotonic.saturating_sub(p).as_secs_f64())
            .unwrap_or(0.0);
        let out = readings(&self.prev, &zones, seconds, at);
        self.prev = zones.iter().map(|z| (z.dir.clone(), z.energy_uj)).collect();
        self.prev_at = Some(at.monotonic);
        Ok(out)
    }
}

impl Source for Rapl {
    fn id(&self) -> &str {
        SOURCE_ID
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, wattbar_core::Error> {
        let root = self.root.clone();
        self.read_root(&root, at).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrap_with_a_known_range_is_not_a_negative_sample() {
        // procfs fixture range; prev 262143000000 → cur 500000 µJ over 1 s = 0.82885 W.
        let w = watts_between(262_143_000_000, 500_000, Some(262_143_328_850), 1.0);
        assert_eq!(w.map(|w| (w.0 * 1e6).round() / 1e6), Some(0.82885));
    }

    #[test]
    fn a_wrap_with_an_unknown_range_drops_the_interval() {
        assert_eq!(watts_between(134_258_672_512, 582_493_184, None, 1.0), None);
    }

    #[test]
    fn kilowatts_are_rejected_not_integrated() {
        assert_eq!(watts_between(0, 2_227_000_000, None, 1.0), None);
        assert!(watts_between(0, 999_000_000, None, 1.0).is_some());
    }

    #[test]
    fn zones_are_classified_by_name_not_index() {
        assert_eq!(
            classify(Some("package-1"), true),
            Some(ZoneKind::Package("package-1".into()))
        );
        assert_eq!(classify(Some("psys"), true), Some(ZoneKind::Psys));
        assert_eq!(
            classify(Some("core"), false),
            Some(ZoneKind::Part("core".into()))
        );
        assert_eq!(
            classify(Some("dram"), false),
            Some(ZoneKind::Dram("dram".into()))
        );
        assert_eq!(classify(None, false), None);
    }
}
