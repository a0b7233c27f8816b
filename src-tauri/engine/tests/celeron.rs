//! The Celeron of s-tui #29 through the engine's accounting: a RAPL counter with no readable
//! `max_energy_range_uj`, two wraps and kilowatt steps on a 7.5 W part (a bogus unit). The
//! source must keep all of it out of the counter it hands on, so the per-domain energy stays
//! at what was really measured: nothing.

use std::path::PathBuf;
use std::time::Duration;
use wattbar_core::{Chain, Domain, Joules, Price, Pricing, Source, Stamp, Tariffs};
use wattbar_engine::accounting::Accounting;
use wattbar_sources::linux::rapl::Rapl;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../../tests/fixtures/linux/powercap/s-tui-29-celeron-wrap-enodata/energy_uj_series.txt",
    )
}

#[test]
fn the_celeron_series_adds_no_energy_to_the_cpu() {
    let series = std::fs::read_to_string(fixture()).unwrap_or_else(|e| panic!("{e}"));
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let zone = root.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(zone.join("name"), "package-0\n").unwrap_or_else(|e| panic!("{e}"));
    let sources: Vec<Box<dyn Source>> = vec![Box::new(Rapl::new(root.path()))];
    let mut chain = Chain::new(sources);
    let mut accounting = Accounting::new(
        0.0,
        Duration::from_secs(1),
        Pricing::fixed(Tariffs::flat(Price::default()), None),
    );
    let mut cpu = Joules(0.0);
    let mut counters = Vec::new();
    for (i, line) in series.lines().enumerate() {
        std::fs::write(zone.join("energy_uj"), line).unwrap_or_else(|e| panic!("{e}"));
        let at = Stamp::new(Duration::from_secs(i as u64), 1_800_000_000.0 + i as f64);
        let snapshot = chain.sample(at);
        counters.extend(snapshot.breakdown.iter().filter_map(|r| r.energy_counter));
        let step = accounting.push(&snapshot, i as f64);
        cpu += step
            .by_domain
            .get(&Domain::Cpu)
            .copied()
            .unwrap_or_default();
        assert_eq!(
            snapshot.headline,
            None,
            "line {}: {:?}",
            i + 1,
            snapshot.headline
        );
    }
    assert!(counters.len() > 50, "{} reads", counters.len());
    assert!(counters.iter().all(|c| *c == Joules(0.0)), "{counters:?}");
    assert_eq!(cpu, Joules(0.0));
}
