use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

type Canned = Result<Vec<(Domain, Option<&'static str>, f64)>, Error>;

struct Fixed {
    id: &'static str,
    quality: Quality,
    result: Canned,
    calls: Arc<AtomicUsize>,
}

impl Source for Fixed {
    fn id(&self) -> &str {
        self.id
    }
    fn quality(&self) -> Quality {
        self.quality
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let quality = self.quality;
        let id = self.id;
        self.result.clone().map(|v| {
            v.into_iter()
                .map(|(d, dev, w)| {
                    let r = Reading::power(d, Watts(w), id, quality, at);
                    match dev {
                        Some(dev) => r.with_device(dev),
                        None => r,
                    }
                })
                .collect()
        })
    }
}

fn counted(
    id: &'static str,
    quality: Quality,
    result: Canned,
) -> (Box<dyn Source>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let source = Box::new(Fixed {
        id,
        quality,
        result,
        calls: calls.clone(),
    });
    (source, calls)
}

fn fixed(id: &'static str, quality: Quality, result: Canned) -> Box<dyn Source> {
    counted(id, quality, result).0
}

fn t(s: u64) -> Stamp {
    Stamp::new(Duration::from_secs(s), s as f64)
}

#[test]
fn a_measured_system_reading_beats_an_estimate_given_first() {
    let mut chain = Chain::new(vec![
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 9.0)]),
        ),
        fixed(
            "smc",
            Quality::Measured,
            Ok(vec![(Domain::System, None, 14.2)]),
        ),
    ]);
    let snap = chain.sample(t(1));
    let head = snap.headline.unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(14.2)));
    assert_eq!(head.source, "smc");
    assert_eq!(head.quality, Quality::Measured);
    assert_eq!(snap.breakdown.len(), 2);
}

#[test]
fn components_sum_once_each_and_take_the_worst_quality() {
    let mut chain = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![(Domain::Cpu, Some("package-0"), 20.0)]),
        ),
        fixed(
            "nvml",
            Quality::Measured,
            Ok(vec![(Domain::Gpu, Some("0"), 100.0)]),
        ),
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, Some("package-0"), 35.0)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(120.0)));
    assert_eq!(head.quality, Quality::Measured);
    assert_eq!(head.source, "rapl+nvml");
}

#[test]
fn a_domain_comes_whole_from_its_best_source() {
    // RAPL's two packages and the CPU proxy's whole-CPU estimate must not add up.
    let mut chain = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![
                (Domain::Cpu, Some("package-0"), 20.0),
                (Domain::Cpu, Some("package-1"), 22.0),
            ]),
        ),
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 35.0)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(42.0)));
    assert_eq!(head.source, "rapl");
}

#[test]
fn the_snapshot_names_each_domains_owner_and_the_headlines_parts() {
    // RAPL beats the CPU estimate, NVML beats the Ollama heuristic: the owners are exactly
    // what the headline adds up, so metering them cannot count a domain twice.
    let mut chain = Chain::new(vec![
        fixed(
            "ollama",
            Quality::Heuristic,
            Ok(vec![(Domain::Gpu, None, 80.0)]),
        ),
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 35.0)]),
        ),
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![(Domain::Cpu, Some("package-0"), 20.0)]),
        ),
        fixed(
            "nvml",
            Quality::Measured,
            Ok(vec![(Domain::Gpu, Some("0"), 250.0)]),
        ),
    ]);
    let snap = chain.sample(t(1));
    let part = |domain, device: &str, source: &str| Part {
        domain,
        device: Some(device.to_string()),
        source: source.to_string(),
    };
    let expected = vec![
        part(Domain::Cpu, "package-0", "rapl"),
        part(Domain::Gpu, "0", "nvml"),
    ];
    assert_eq!(snap.owners, expected);
    assert_eq!(snap.headline_parts, expected);
    assert_eq!(snap.headline_watts(), Some(Watts(270.0)));
}

#[test]
fn psys_is_used_only_without_a_system_reading_and_never_added_to_parts() {
    let mut chain = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![
                (Domain::Cpu, Some("package-0"), 20.0),
                (Domain::Platform, Some("psys"), 31.0),
            ]),
        ),
        fixed(
            "power-supply",
            Quality::Measured,
            Ok(vec![(Domain::System, None, 36.5)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(36.5)));
    let mut no_battery = Chain::new(vec![fixed(
        "rapl",
        Quality::Measured,
        Ok(vec![
            (Domain::Cpu, Some("package-0"), 20.0),
            (Domain::Platform, Some("psys"), 31.0),
        ]),
    )]);
    let head = no_battery
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(31.0)));
}

#[test]
fn measured_parts_beat_a_heuristic_whole_system_guess() {
    let mut chain = Chain::new(vec![
        fixed(
            "ollama-heuristic",
            Quality::Heuristic,
            Ok(vec![(Domain::System, None, 16.0)]),
        ),
        fixed(
            "nvml",
            Quality::Measured,
            Ok(vec![(Domain::Gpu, Some("0"), 250.0)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(250.0)));
    assert_eq!(head.quality, Quality::Measured);
}

#[test]
fn an_apu_soc_figure_is_never_added_to_the_cpu() {
    let mut both = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![(Domain::Cpu, Some("package-0"), 9.0)]),
        ),
        fixed(
            "hwmon",
            Quality::Measured,
            Ok(vec![(Domain::Soc, Some("amdgpu"), 9.1)]),
        ),
    ]);
    let head = both
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(9.0)));
    let mut soc_only = Chain::new(vec![fixed(
        "hwmon",
        Quality::Measured,
        Ok(vec![(Domain::Soc, Some("amdgpu"), 9.1)]),
    )]);
    let head = soc_only
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(9.1)));
}

struct Slow;

impl Source for Slow {
    fn id(&self) -> &str {
        "nvml"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, _at: Stamp) -> Result<Vec<Reading>, Error> {
        Ok(Vec::new())
    }
    fn min_interval(&self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }
}

#[test]
fn the_chain_knows_the_slowest_sources_minimum_interval() {
    let chain = Chain::new(vec![
        Box::new(Slow),
        fixed("cpu-proxy", Quality::Estimated, Ok(vec![])),
    ]);
    assert_eq!(chain.min_interval(), Some(Duration::from_millis(250)));
    assert_eq!(Chain::new(Vec::new()).min_interval(), None);
}

#[test]
fn an_estimated_part_makes_the_sum_estimated() {
    let mut chain = Chain::new(vec![
        fixed(
            "nvml",
            Quality::Measured,
            Ok(vec![(Domain::Gpu, Some("0"), 100.0)]),
        ),
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 35.0)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(135.0)));
    assert_eq!(head.quality, Quality::Estimated);
}

#[test]
fn no_source_means_no_headline_not_zero_watts() {
    let mut chain = Chain::new(vec![fixed(
        "rapl",
        Quality::Measured,
        Err(Error::Unavailable("energy_uj is root-only".into())),
    )]);
    let snap = chain.sample(t(1));
    let status = chain.status(&snap);
    assert_eq!(status.len(), 1);
    assert!(!status[0].available);
    assert_eq!(status[0].reason.as_deref(), Some("energy_uj is root-only"));
    assert!(snap.headline.is_none());
    assert_eq!(snap.unavailable.len(), 1);
    assert_eq!(snap.unavailable[0].source, "rapl");
    assert!(snap.unavailable[0].reason.contains("root-only"));
}

#[test]
fn nan_readings_never_become_the_headline() {
    let mut chain = Chain::new(vec![
        fixed(
            "smc",
            Quality::Measured,
            Ok(vec![(Domain::System, None, f64::NAN)]),
        ),
        fixed(
            "cpu-proxy",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 7.0)]),
        ),
    ]);
    let head = chain
        .sample(t(1))
        .headline
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.watts, Some(Watts(7.0)));
    assert_eq!(head.source, "cpu-proxy");
}

#[test]
fn an_unavailable_source_is_not_asked_again_but_stays_listed() {
    let (source, calls) = counted(
        "rapl",
        Quality::Measured,
        Err(Error::Unavailable("no powercap".into())),
    );
    let mut chain = Chain::new(vec![source]);
    chain.sample(t(1));
    let snap = chain.sample(t(2));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(snap.unavailable.len(), 1);
    assert!(snap.unavailable[0].permanent);
    assert_eq!(snap.unavailable[0].reason, "no powercap");
}

#[test]
fn a_transient_failure_is_listed_and_retried() {
    let (source, calls) = counted(
        "nvml",
        Quality::Measured,
        Err(Error::Transient("busy".into())),
    );
    let mut chain = Chain::new(vec![source]);
    let first = chain.sample(t(1));
    let second = chain.sample(t(2));
    assert!(!first.unavailable[0].permanent);
    assert_eq!(second.unavailable.len(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

mod pace;

/// A plug that reads `watts` while `live`, and fails transiently otherwise.
struct Plug {
    live: Arc<std::sync::atomic::AtomicBool>,
    watts: f64,
}

impl Source for Plug {
    fn id(&self) -> &str {
        "wall-meter"
    }
    fn quality(&self) -> Quality {
        Quality::Measured
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, Error> {
        if self.live.load(Ordering::SeqCst) {
            let r = Reading::power(
                Domain::Wall,
                Watts(self.watts),
                "wall-meter",
                Quality::Measured,
                at,
            );
            Ok(vec![r])
        } else {
            Err(Error::Transient("the plug did not answer".into()))
        }
    }
    fn answer_period(&self) -> Option<Duration> {
        Some(Duration::from_secs(1))
    }
}

#[test]
fn the_wall_is_the_headline_while_it_reads_and_the_sensors_take_over_when_it_stops() {
    // 100 W at the socket; the sensors see RAPL's 40 W package and NVML's 20 W card.
    let live = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut chain = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![(Domain::Cpu, Some("package-0"), 40.0)]),
        ),
        Box::new(Plug {
            live: live.clone(),
            watts: 100.0,
        }),
        fixed(
            "nvml",
            Quality::Measured,
            Ok(vec![(Domain::Gpu, Some("0"), 20.0)]),
        ),
    ]);
    let with_plug = chain.sample(t(1));
    let head = with_plug
        .headline
        .clone()
        .unwrap_or_else(|| panic!("no headline"));
    assert_eq!(
        (head.domain, head.watts),
        (Domain::Wall, Some(Watts(100.0)))
    );
    assert_eq!(
        with_plug.coverage().map(|c| c.scope),
        Some(crate::Scope::Wall)
    );
    // The plug answers once a second: whatever the pace, its energy between answers is
    // interpolated, and the snapshot says so.
    assert_eq!(with_plug.answer_period_seconds, Some(1.0));
    // The sensors' own figure is still there, beside the wall: 40 + 20 = 60 W of two parts.
    let (wall, sensors, coverage) = with_plug
        .wall_and_sensors()
        .unwrap_or_else(|| panic!("no sensors beside the wall"));
    assert_eq!((wall, sensors), (Watts(100.0), Watts(60.0)));
    assert_eq!(coverage.covers, ["cpu-package", "gpu:0"]);

    // Unplugged: in that same sample the headline is the sensors' 60 W, never 0 W, and the
    // plug says why.
    live.store(false, Ordering::SeqCst);
    let without = chain.sample(t(2));
    assert_eq!(without.headline_watts(), Some(Watts(60.0)));
    assert_eq!(without.answer_period_seconds, None);
    assert_eq!(
        without.coverage().map(|c| c.scope),
        Some(crate::Scope::Components)
    );
    assert_eq!(without.wall_watts(), None);
    assert!(without
        .unavailable
        .iter()
        .any(|u| u.source == "wall-meter" && u.reason.contains("did not answer")));
}

#[test]
fn a_source_set_later_takes_its_place_and_the_counts_go_on() {
    let mut chain = Chain::new(vec![
        fixed(
            "rapl",
            Quality::Measured,
            Ok(vec![(Domain::Cpu, None, 40.0)]),
        ),
        fixed(
            "cpu-estimate",
            Quality::Estimated,
            Ok(vec![(Domain::Cpu, None, 30.0)]),
        ),
    ]);
    chain.sample_every_source(t(1));
    let live = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let plug = |watts| -> Box<dyn Source> {
        Box::new(Plug {
            live: live.clone(),
            watts,
        })
    };
    chain.set_source("wall-meter", Some(plug(100.0)));
    // Measured, so before the estimate; the reads counted so far are kept.
    assert_eq!(chain.ids(), ["rapl", "wall-meter", "cpu-estimate"]);
    assert_eq!(chain.counters()[0].reads(), 1);
    assert_eq!(chain.sample(t(2)).headline_watts(), Some(Watts(100.0)));
    // Another plug in its place, then none.
    chain.set_source("wall-meter", Some(plug(120.0)));
    assert_eq!(chain.ids().len(), 3);
    assert_eq!(chain.sample(t(3)).headline_watts(), Some(Watts(120.0)));
    chain.set_source("wall-meter", None);
    assert_eq!(chain.ids(), ["rapl", "cpu-estimate"]);
    assert_eq!(chain.sample(t(4)).headline_watts(), Some(Watts(40.0)));
    assert_eq!(chain.counters()[0].reads(), 4);
    // Set again: its reads count on from the two before (a Prometheus counter never resets).
    chain.set_source("wall-meter", Some(plug(90.0)));
    assert_eq!(chain.counters()[1].id, "wall-meter");
    assert_eq!(chain.counters()[1].reads(), 2);
}
