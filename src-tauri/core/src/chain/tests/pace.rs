//! Read counts: the chain asks only what it will use.

use super::super::*;
use crate::reading::Battery;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MACMON: &[Domain] = &[
    Domain::System,
    Domain::Cpu,
    Domain::Gpu,
    Domain::Ane,
    Domain::Dram,
];
const SMART_BATTERY: &[Domain] = &[Domain::System, Domain::Battery, Domain::Adapter];
const CPU: &[Domain] = &[Domain::Cpu];

/// A source that gives fixed watts per domain while healthy and a transient failure otherwise.
struct Scripted {
    id: &'static str,
    quality: Quality,
    declared: Option<&'static [Domain]>,
    gives: Vec<(Domain, f64)>,
    battery: Option<Battery>,
    healthy: Arc<AtomicBool>,
    reads: Arc<AtomicUsize>,
}

struct Handle {
    healthy: Arc<AtomicBool>,
    reads: Arc<AtomicUsize>,
}

impl Handle {
    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
    fn fail(&self) {
        self.healthy.store(false, Ordering::SeqCst);
    }
    fn heal(&self) {
        self.healthy.store(true, Ordering::SeqCst);
    }
}

fn scripted(
    id: &'static str,
    quality: Quality,
    declared: Option<&'static [Domain]>,
    gives: &[(Domain, f64)],
) -> (Scripted, Handle) {
    let healthy = Arc::new(AtomicBool::new(true));
    let reads = Arc::new(AtomicUsize::new(0));
    let source = Scripted {
        id,
        quality,
        declared,
        gives: gives.to_vec(),
        battery: None,
        healthy: healthy.clone(),
        reads: reads.clone(),
    };
    (source, Handle { healthy, reads })
}

impl Source for Scripted {
    fn id(&self) -> &str {
        self.id
    }
    fn quality(&self) -> Quality {
        self.quality
    }
    fn read(&mut self, at: Stamp) -> Result<Vec<Reading>, Error> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        if !self.healthy.load(Ordering::SeqCst) {
            return Err(Error::Transient(format!("{} is busy", self.id)));
        }
        Ok(self
            .gives
            .iter()
            .map(|(d, w)| Reading::power(*d, Watts(*w), self.id, self.quality, at))
            .collect())
    }
    fn battery(&self) -> Option<Battery> {
        self.battery
    }
    fn domains(&self) -> Option<&'static [Domain]> {
        self.declared
    }
}

fn at(s: u64) -> Stamp {
    Stamp::new(Duration::from_secs(s), 1_700_000_000.0 + s as f64)
}

/// macmon (SMC system power and the IOReport parts), the AppleSmartBattery gauge on battery,
/// and the `top` CPU estimate, as a MacBook's chain has them.
fn macbook() -> (Chain, Handle, Handle, Handle) {
    let (macmon, m) = scripted(
        "macmon",
        Quality::Measured,
        Some(MACMON),
        &[
            (Domain::System, 14.0),
            (Domain::Cpu, 4.0),
            (Domain::Gpu, 2.0),
            (Domain::Ane, 0.0),
            (Domain::Dram, 0.5),
        ],
    );
    let (mut battery, b) = scripted(
        "smart-battery",
        Quality::Measured,
        Some(SMART_BATTERY),
        &[(Domain::System, 15.1), (Domain::Battery, -15.1)],
    );
    battery.battery = Some(Battery {
        on_battery: true,
        percent: Some(81.0),
    });
    let (top, t) = scripted("top", Quality::Estimated, Some(CPU), &[(Domain::Cpu, 6.0)]);
    let chain = Chain::new(vec![Box::new(macmon), Box::new(battery), Box::new(top)]);
    (chain, m, b, t)
}

#[test]
fn with_macmon_healthy_sixty_ticks_read_the_battery_twice_and_top_never() {
    let (mut chain, macmon, battery, top) = macbook();
    let mut last = None;
    for s in 0..60 {
        last = Some(chain.sample(at(s)));
    }
    assert_eq!(macmon.reads(), 60);
    // At once for the supply state, then again 30 s later: never every second.
    assert_eq!(battery.reads(), 2);
    assert_eq!(top.reads(), 0);
    let snap = last.unwrap_or_else(|| panic!("no sample"));
    assert_eq!(snap.headline_watts(), Some(Watts(14.0)));
    assert_eq!(
        snap.battery,
        Some(Battery {
            on_battery: true,
            percent: Some(81.0)
        }),
        "the supply state stays known between the battery's reads"
    );
    let status = chain.status(&snap);
    let top_status = status.iter().find(|s| s.id == "top");
    assert!(top_status.is_some_and(|s| s.available && s.standby && s.readings == 0));
    assert!(snap.unavailable.is_empty(), "{:?}", snap.unavailable);
}

#[test]
fn when_macmon_fails_the_sources_below_are_read_in_that_same_sample() {
    let (mut chain, macmon, battery, top) = macbook();
    for s in 0..10 {
        chain.sample(at(s));
    }
    assert_eq!((battery.reads(), top.reads()), (1, 0));
    macmon.fail();
    let snap = chain.sample(at(10));
    let head = snap.headline.unwrap_or_else(|| panic!("no headline"));
    assert_eq!(head.source, "smart-battery");
    assert_eq!(head.watts, Some(Watts(15.1)));
    assert!(snap.breakdown.iter().any(|r| r.source == "top"));
    assert_eq!((battery.reads(), top.reads()), (2, 1));
    // While macmon is down the others are read every sample.
    for s in 11..20 {
        chain.sample(at(s));
    }
    assert_eq!((battery.reads(), top.reads()), (11, 10));
    macmon.heal();
    for s in 20..40 {
        chain.sample(at(s));
    }
    // macmon is asked again within 16 s of failing (backing off, never given up) and, once
    // back, the others stand by again: the battery only at its slow pace.
    let healthy_from = 10 + 1 + 1 + 2 + 4 + 8;
    assert!(top.reads() <= 10 + (healthy_from - 20), "{}", top.reads());
    let snap = chain.sample(at(40));
    assert_eq!(snap.headline.map(|h| h.source).as_deref(), Some("macmon"));
}

#[test]
fn a_failing_source_backs_off_to_the_slow_pace_and_its_reason_stays_listed() {
    let (nvml, h) = scripted("nvml", Quality::Measured, None, &[(Domain::Gpu, 80.0)]);
    h.fail();
    let mut chain = Chain::new(vec![Box::new(nvml)]);
    let mut read_at = Vec::new();
    for s in 0..60 {
        let before = h.reads();
        let snap = chain.sample(at(s));
        if h.reads() > before {
            read_at.push(s);
        }
        assert_eq!(snap.unavailable.len(), 1, "tick {s}");
        assert!(snap.unavailable[0].reason.contains("busy"));
        assert!(!snap.unavailable[0].permanent);
        assert!(snap.headline.is_none());
    }
    // Again at once, then after 1, 2, 4, 8, 16 s, then every 30 s.
    assert_eq!(read_at, vec![0, 1, 2, 4, 8, 16, 32]);
    h.heal();
    let mut s = 60;
    while chain.sample(at(s)).headline.is_none() {
        s += 1;
    }
    assert_eq!(s, 62, "the first read after the 30 s wait finds it healthy");
}

#[test]
fn a_source_that_declares_nothing_is_read_until_it_has_shown_what_it_gives() {
    let (rapl, r) = scripted(
        "rapl",
        Quality::Measured,
        None,
        &[(Domain::Cpu, 20.0), (Domain::Dram, 3.0)],
    );
    let (amdgpu, g) = scripted("hwmon", Quality::Measured, None, &[(Domain::Gpu, 30.0)]);
    let (stat, p) = scripted("proc-stat", Quality::Estimated, None, &[(Domain::Cpu, 9.0)]);
    let mut chain = Chain::new(vec![Box::new(rapl), Box::new(amdgpu), Box::new(stat)]);
    for s in 0..60 {
        let snap = chain.sample(at(s));
        assert_eq!(snap.headline_watts(), Some(Watts(53.0)), "tick {s}");
    }
    // The GPU is nobody else's, so hwmon is read every time; the CPU estimate once, to learn
    // that it gives only what RAPL already measures.
    assert_eq!((r.reads(), g.reads(), p.reads()), (60, 60, 1));
}

#[test]
fn an_absurd_reading_covers_nothing() {
    let (smc, _) = scripted(
        "smc",
        Quality::Measured,
        Some(&[Domain::System]),
        &[(Domain::System, f64::NAN)],
    );
    let (top, t) = scripted("top", Quality::Estimated, Some(CPU), &[(Domain::Cpu, 6.0)]);
    let mut chain = Chain::new(vec![Box::new(smc), Box::new(top)]);
    for s in 0..5 {
        let snap = chain.sample(at(s));
        assert_eq!(snap.headline_watts(), Some(Watts(6.0)));
    }
    assert_eq!(t.reads(), 5);
}

#[test]
fn every_read_is_counted_and_timed_with_the_chains_timer() {
    let (macmon, _) = scripted("macmon", Quality::Measured, Some(MACMON), &[]);
    let (top, _) = scripted("top", Quality::Estimated, Some(CPU), &[(Domain::Cpu, 6.0)]);
    // Each look at the stopwatch finds it 1.5 ms further on: every read takes 1.5 ms.
    let ticks = Arc::new(AtomicU64::new(0));
    let clock = ticks.clone();
    let mut chain =
        Chain::new(vec![Box::new(macmon), Box::new(top)]).with_timer(Box::new(move || {
            Duration::from_micros(1500 * clock.fetch_add(1, Ordering::SeqCst))
        }));
    let counters = chain.counters();
    for s in 0..4 {
        chain.sample(at(s));
    }
    let by_id = |id: &str| {
        counters
            .iter()
            .find(|c| c.id == id)
            .map(|c| (c.reads(), c.seconds()))
    };
    // macmon gives nothing, so top is needed every time.
    let (reads, seconds) = by_id("top").unwrap_or_default();
    assert_eq!(reads, 4);
    assert!((seconds - 0.006).abs() < 1e-9, "{seconds}");
    assert_eq!(by_id("macmon").map(|c| c.0), Some(4));
}

#[test]
fn a_diagnostic_sample_reads_every_source_and_says_which_would_stand_by() {
    let (mut chain, macmon, battery, top) = macbook();
    chain.sample(at(0));
    let snap = chain.sample_every_source(at(1));
    assert_eq!((macmon.reads(), battery.reads(), top.reads()), (2, 2, 1));
    let status = chain.status(&snap);
    let top_status = status.iter().find(|s| s.id == "top");
    assert!(top_status.is_some_and(|s| s.readings == 1 && s.standby));
}
