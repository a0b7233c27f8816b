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
//! - Each reading's `energy_counter` is the zone's energy over the intervals kept by the rules
//!   above ([`CounterTotal`]): unwrapped, validated and monotonic, never the raw register.
//! - `energy_uj` has been root-only since 2020 (CVE-2020-8694): EACCES makes the source
//!   unavailable with the fix (`packaging/linux/60-wattbar-powercap.rules`).
//!
//! The first read has no watts yet: its readings carry only the energy counter.

use super::sysfs::{read_attr, read_attr_bytes};
use crate::error::Error;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use wattbar_core::counter::CounterTotal;
use wattbar_core::{Domain, Joules, Quality, Reading, Source, Stamp};

pub const SOURCE_ID: &str = "rapl";
/// Where powercap zones are, under a sysfs root.
pub const POWERCAP: &str = "sys/class/powercap";
/// No RAPL zone of any CPU made draws more than this; more means the counter lies.
pub const MAX_ZONE_WATTS: f64 = 1000.0;

pub const UDEV_HINT: &str = "RAPL energy counters are readable by root and the group wattbar only: join it (sudo usermod -aG wattbar $USER, then log in again); from a source build, install packaging/linux/60-wattbar-powercap.rules into /etc/udev/rules.d/ first (sudo groupadd -f wattbar && sudo udevadm control --reload && sudo udevadm trigger --subsystem-match=powercap)";

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
        let energy_uj = match read_attr_bytes(&path.join("energy_uj")) {
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

/// The reading of one zone; `counter` is that zone's running total, updated here.
fn reading(zone: &Zone, counter: &mut CounterTotal, at: Stamp) -> Option<Reading> {
    let (domain, device) = match &zone.kind {
        ZoneKind::Package(name) => (Domain::Cpu, name.clone()),
        ZoneKind::Dram(name) => (Domain::Dram, name.clone()),
        ZoneKind::Psys => (Domain::Platform, "psys".to_string()),
        ZoneKind::Part(_) => return None,
    };
    let uj = |v: u64| Joules::from_microjoules(v as f64);
    let watts = counter.update(
        at.monotonic,
        uj(zone.energy_uj),
        zone.max_energy_range_uj.map(uj),
        MAX_ZONE_WATTS,
    );
    Some(Reading {
        domain,
        device: Some(device),
        watts,
        energy_counter: counter.total(),
        source: SOURCE_ID.to_string(),
        quality: Quality::Measured,
        at,
    })
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
                let bytes = read_attr_bytes(path).map_err(|e| Error::Transient(e.to_string()))?;
                Ok(Zone {
                    energy_uj: parse_uj(&String::from_utf8_lossy(&bytes))?,
                    ..zone.clone()
                })
            })
            .collect()
    }
}

/// The RAPL source: keeps each zone's counter to turn it into watts and a monotonic total.
pub struct Rapl {
    root: PathBuf,
    layout: Option<Layout>,
    counters: HashMap<String, CounterTotal>,
}

impl Rapl {
    pub fn new(root: &Path) -> Self {
        Rapl {
            root: root.to_path_buf(),
            layout: None,
            counters: HashMap::new(),
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
        Ok(zones
            .iter()
            .filter_map(|z| reading(z, self.counters.entry(z.dir.clone()).or_default(), at))
            .collect())
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

    /// A powercap tree with one package zone whose counter the test sets.
    fn tree(range_uj: Option<u64>) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let zone = root.path().join(POWERCAP).join("intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(zone.join("name"), "package-0\n").unwrap_or_else(|e| panic!("{e}"));
        if let Some(r) = range_uj {
            std::fs::write(zone.join("max_energy_range_uj"), format!("{r}\n"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        (root, zone.join("energy_uj"))
    }

    fn read_at(rapl: &mut Rapl, counter: &Path, uj: u64, s: u64) -> Reading {
        std::fs::write(counter, format!("{uj}\n")).unwrap_or_else(|e| panic!("{e}"));
        let at = Stamp::new(std::time::Duration::from_secs(s), s as f64);
        let root = rapl.root.clone();
        let mut out = rapl.read_root(&root, at).unwrap_or_else(|e| panic!("{e}"));
        out.pop().unwrap_or_else(|| panic!("no reading"))
    }

    #[test]
    fn a_wrap_is_unwrapped_into_a_counter_that_only_grows() {
        // max_energy_range_uj 262143328850; 262143000000 → 500000 µJ in 1 s = 0.82885 W, and
        // the counter the meter sees goes from 0 to 0.82885 J, not down by 262 kJ.
        let (dir, counter) = tree(Some(262_143_328_850));
        let mut rapl = Rapl::new(dir.path());
        let first = read_at(&mut rapl, &counter, 262_143_000_000, 0);
        assert_eq!(first.watts, None);
        assert_eq!(first.energy_counter, Some(Joules(0.0)));
        let wrapped = read_at(&mut rapl, &counter, 500_000, 1);
        assert_eq!(
            wrapped.watts.map(|w| (w.0 * 1e6).round() / 1e6),
            Some(0.82885)
        );
        let total = wrapped.energy_counter.unwrap_or_default().0;
        assert!((total - 0.828_85).abs() < 1e-9, "{total}");
    }

    #[test]
    fn a_wrap_of_unknown_range_and_kilowatt_steps_never_reach_the_counter() {
        // The Celeron of s-tui #29: no max_energy_range_uj, a wrap, and kilowatt steps.
        let (dir, counter) = tree(None);
        let mut rapl = Rapl::new(dir.path());
        read_at(&mut rapl, &counter, 134_258_672_512, 0);
        let wrap = read_at(&mut rapl, &counter, 582_493_184, 1);
        assert_eq!(wrap.watts, None);
        let kilowatts = read_at(&mut rapl, &counter, 582_493_184 + 2_227_000_000, 2);
        assert_eq!(kilowatts.watts, None);
        assert_eq!(kilowatts.energy_counter, Some(Joules(0.0)));
        let real = read_at(
            &mut rapl,
            &counter,
            582_493_184 + 2_227_000_000 + 999_000_000,
            3,
        );
        assert_eq!(real.watts, Some(wattbar_core::Watts(999.0)));
        assert_eq!(real.energy_counter, Some(Joules(999.0)));
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
