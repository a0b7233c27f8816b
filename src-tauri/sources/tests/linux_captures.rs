//! Every Linux capture in `tests/fixtures/linux/` against the values its SOURCES.md gives.

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattbar_core::{Domain, Joules, Quality, Source, Stamp, Watts};
use wattbar_sources::cpu_proxy::{CpuPowerModel, TdpOrigin};
use wattbar_sources::linux::{hwmon, power_supply, probe, proc_stat, rapl};
use wattbar_sources::Sample;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux")
        .join(rel)
}

fn model() -> CpuPowerModel {
    CpuPowerModel::with_tdp(Watts(15.0), TdpOrigin::Configured)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

fn watts_of(sample: &Sample, domain: Domain) -> Vec<f64> {
    sample
        .readings
        .iter()
        .filter(|r| r.domain == domain)
        .filter_map(|r| r.watts.map(|w| w.0))
        .collect()
}

// ---- powercap (RAPL) ----

#[test]
fn procfs_intel_zones_are_named_and_core_is_not_added_to_the_package() {
    let root = fixture("powercap/procfs-testdata-intel");
    let zones = rapl::read_zones(&root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(zones.len(), 2);
    assert_eq!(zones[0].kind, rapl::ZoneKind::Package("package-0".into()));
    assert_eq!(zones[0].energy_uj, 240_422_366_267);
    assert_eq!(zones[0].max_energy_range_uj, Some(262_143_328_850));
    // `core` has enabled=0 but its counter is valid; it sits inside the package.
    assert_eq!(zones[1].kind, rapl::ZoneKind::Part("core".into()));
    assert_eq!(zones[1].energy_uj, 118_821_284_256);
    // A single snapshot gives counters, no watts, and only the package as a CPU reading.
    let sample = probe(&root, None, model());
    let cpu: Vec<_> = sample
        .readings
        .iter()
        .filter(|r| r.source == "rapl")
        .collect();
    assert_eq!(cpu.len(), 1);
    assert_eq!(cpu[0].device.as_deref(), Some("package-0"));
    assert_eq!(cpu[0].watts, None);
}

#[test]
fn an_absurd_rapl_limit_does_not_become_the_cpu_tdp() {
    // constraint_0_power_limit_uw = 4090000000 (4090 W) in this capture.
    let m = CpuPowerModel::detect(&fixture("powercap/procfs-testdata-intel"), None);
    assert_eq!(m.origin, TdpOrigin::CoreCount);
}

#[test]
fn s_tui_x1_carbon_package_watts_match_s_tui() {
    let base = fixture("powercap/s-tui-56-i7-8550u-x1c6");
    let (dt1, dt2) = (1.1679787635803223, 1.1699001789093018);
    let mut source = rapl::Rapl::new(&base.join("t0"));
    let mut t = 0.0;
    let mut watts = Vec::new();
    for (dir, dt) in [("t0", 0.0), ("t1", dt1), ("t2", dt2)] {
        t += dt;
        let r = source
            .read_root(&base.join(dir), Stamp::new(Duration::from_secs_f64(t), t))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].domain, Domain::Cpu);
        assert_eq!(r[0].quality, Quality::Measured);
        watts.push(r[0].watts.map(|w| w.0));
    }
    assert_eq!(watts[0], None, "one read is not a measurement");
    assert!(close(watts[1].unwrap_or(0.0), 0.923955, 1e-6), "{watts:?}");
    assert!(close(watts[2].unwrap_or(0.0), 0.909290, 1e-6), "{watts:?}");
    // Energy t0 → t2 from the counters: 2.142939 J = 5.9526e-7 kWh.
    let joules = (1_302_058_007u64 - 1_299_915_068) as f64 / 1e6;
    assert!(close(joules, 2.142939, 1e-6));
}

#[test]
fn the_celeron_series_drops_both_unsized_wraps_and_every_kilowatt_step() {
    let text = std::fs::read_to_string(fixture(
        "powercap/s-tui-29-celeron-wrap-enodata/energy_uj_series.txt",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let values: Vec<u64> = text
        .lines()
        .map(|l| rapl::parse_uj(l).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let decreases: Vec<usize> = values
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] < w[0])
        .map(|(i, _)| i + 2)
        .collect();
    assert_eq!(
        decreases,
        [16, 48],
        "1-based lines where the counter went down"
    );
    // max_energy_range_uj was unreadable (ENODATA): no range. About 1 s between reads.
    let mut counter = wattbar_core::counter::CounterTotal::new();
    for (i, uj) in values.iter().enumerate() {
        let at = std::time::Duration::from_secs(i as u64);
        let watts = counter.update(
            at,
            Joules::from_microjoules(*uj as f64),
            None,
            rapl::MAX_ZONE_WATTS,
        );
        assert_eq!(watts, None, "line {} ({uj}) must not be integrated", i + 1);
    }
    assert_eq!(counter.total(), Some(Joules(0.0)));
}

// ---- power_supply ----

#[test]
fn thinkpad_discharging_takes_every_field_from_one_read() {
    let root = fixture("power_supply/thinkpad-lgc-lnv45n1-discharging");
    let bat = root.join("sys/class/power_supply/BAT0");
    let sample = probe(&root, None, model());
    assert_eq!(
        watts_of(&sample, Domain::System),
        [5.064],
        "uevent: POWER_NOW 5064000"
    );
    assert_eq!(sample.state["ac_online"], false);
    assert_eq!(sample.state["BAT0_capacity_percent"], 85);
    // The attribute files, read on their own, say 4.830 W: another moment, never mixed in.
    let attrs = power_supply::supply("BAT0", &power_supply::read_attributes(&bat));
    assert_eq!(power_supply::battery_watts(&attrs), Some(Watts(4.83)));
}

#[test]
fn a_discharging_battery_with_no_adapter_online_is_running_on_battery() {
    let root = fixture("power_supply/thinkpad-lgc-lnv45n1-discharging");
    let supplies = power_supply::read_supplies(&root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        power_supply::supply_state(&supplies),
        Some(wattbar_core::Battery {
            on_battery: true,
            percent: Some(85.0)
        })
    );
    let charging = fixture("power_supply/thinkpad-sanyo-00hw022-charging-power");
    let supplies = power_supply::read_supplies(&charging).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        power_supply::supply_state(&supplies).map(|b| b.on_battery),
        Some(false)
    );
}

#[test]
fn thinkpad_45n1153_discharging_power_from_attribute_files() {
    let sample = probe(
        &fixture("power_supply/thinkpad-lgc-45n1153-discharging-power"),
        None,
        model(),
    );
    assert_eq!(watts_of(&sample, Domain::System), [15.453]);
}

#[test]
fn charging_is_power_into_the_battery_never_system_draw() {
    for (case, watts) in [
        ("thinkpad-sanyo-00hw022-charging-power", 30.021),
        ("thinkpad-lgc-42t4865-charging-current", 38.093692),
        ("dell-pn1vn08-charging-current", 5.257077),
    ] {
        let sample = probe(&fixture(&format!("power_supply/{case}")), None, model());
        assert!(watts_of(&sample, Domain::System).is_empty(), "{case}");
        let battery = watts_of(&sample, Domain::Battery);
        assert_eq!(battery.len(), 1, "{case}");
        assert!(close(battery[0], watts, 1e-9), "{case}: {battery:?}");
    }
}

#[test]
fn dell_discharging_by_current_is_amps_times_volts() {
    let sample = probe(
        &fixture("power_supply/dell-m7r9677-discharging-current"),
        None,
        model(),
    );
    let system = watts_of(&sample, Domain::System);
    assert_eq!(system.len(), 1);
    assert!(close(system[0], 9.5256, 1e-9), "{system:?}");
}

#[test]
fn not_charging_full_and_unknown_power_are_no_measurement_not_zero() {
    for case in [
        "dell-xps15-9560-not-charging",
        "dell-xps15-full-no-power-now",
        "hp-charge-no-current-discharging",
    ] {
        let sample = probe(&fixture(&format!("power_supply/{case}")), None, model());
        let from_battery: Vec<_> = sample
            .readings
            .iter()
            .filter(|r| r.source == "power-supply")
            .collect();
        assert!(from_battery.is_empty(), "{case}: {from_battery:?}");
    }
    let xps = probe(
        &fixture("power_supply/dell-xps15-9560-not-charging"),
        None,
        model(),
    );
    assert_eq!(xps.state["ac_online"], true);
    assert_eq!(xps.state["BAT0_status"], "Not charging");
    let full = probe(
        &fixture("power_supply/dell-xps15-full-no-power-now"),
        None,
        model(),
    );
    assert_eq!(full.state["BAT1_status"], "Full");
    let hp = probe(
        &fixture("power_supply/hp-charge-no-current-discharging"),
        None,
        model(),
    );
    assert_eq!(hp.state["BAT0_status"], "Discharging");
    assert!(hp.state.contains_key("note"));
}

// ---- hwmon ----

#[test]
fn amdgpu_discrete_cards_read_their_average_power_and_report_limits() {
    for (case, dir, watts) in [
        ("amd-rx7900xtx", "hwmon8", 68.0),
        ("amd-rx580", "hwmon4", 41.045),
        ("amd-vega56", "hwmon4", 8.0),
    ] {
        let sample = probe(&fixture(&format!("hwmon/{case}")), None, model());
        assert_eq!(watts_of(&sample, Domain::Gpu), [watts], "{case}");
        assert!(
            sample.state.contains_key(&format!("{dir}_limits_w")),
            "{case}"
        );
    }
    let big = probe(&fixture("hwmon/amd-rx7900xtx"), None, model());
    assert_eq!(big.state["hwmon8_limits_w"]["power1_cap"], 290.0);
}

#[test]
#[allow(
    clippy::approx_constant,
    reason = "3.142 W is the Phoenix APU's measured PPT, not π"
)]
fn an_apu_is_the_whole_soc_and_prefers_input_over_average() {
    // The NUL-padded name must still read as amdgpu.
    let phoenix = probe(&fixture("hwmon/amd-phoenix"), None, model());
    assert_eq!(watts_of(&phoenix, Domain::Soc), [3.142]);
    assert!(watts_of(&phoenix, Domain::Gpu).is_empty());
    let strix = probe(&fixture("hwmon/amd-strixpoint"), None, model());
    assert_eq!(watts_of(&strix, Domain::Soc), [9.087]);
}

/// The raw energy register `energy<channel>_input` of hwmon device `dir`, in joules.
fn register(root: &Path, dir: &str, channel: u32) -> f64 {
    let devices = hwmon::read_devices(root).unwrap_or_else(|e| panic!("{e}"));
    let device = devices
        .iter()
        .find(|d| d.dir == dir)
        .unwrap_or_else(|| panic!("no {dir}"));
    hwmon::energy_counters(device)
        .into_iter()
        .find(|(ch, _)| *ch == channel)
        .map(|(_, uj)| uj as f64 / 1e6)
        .unwrap_or_else(|| panic!("no energy{channel}_input in {dir}"))
}

#[test]
fn intel_energy_counters_need_two_samples_and_limits_are_not_readings() {
    let b580 = fixture("hwmon/intel-b580");
    let mut source = hwmon::Hwmon::new(&b580);
    let first = source
        .sample_root(&b580, Stamp::new(Duration::ZERO, 0.0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.readings.len(), 1, "one figure per device");
    assert_eq!(first.readings[0].watts, None);
    // The reading carries the source's own total (nothing measured yet), never the register.
    assert_eq!(first.readings[0].energy_counter, Some(Joules(0.0)));
    assert!(
        close(register(&b580, "hwmon2", 1), 11_031.745544, 1e-6),
        "the card counter"
    );
    assert_eq!(first.state["hwmon2_limits_w"]["power1_cap"], 190.0);
    assert_eq!(first.state["hwmon2_limits_w"]["power1_crit"], 380.0);

    let a380 = probe(&fixture("hwmon/intel-a380-i915"), None, model());
    assert_eq!(a380.readings.len(), 1);
    assert!(close(
        register(&fixture("hwmon/intel-a380-i915"), "hwmon1", 1),
        25_637.161804,
        1e-6
    ));
    assert_eq!(a380.state["hwmon1_limits_w"]["power1_max"], 55.0);
}

#[test]
fn a_counter_that_reads_zero_is_unsupported_and_the_next_one_is_used() {
    let root = fixture("hwmon/intel-b580-6.16");
    let sample = probe(&root, None, model());
    assert_eq!(
        sample.state["hwmon4_energy1"],
        "unsupported: the counter never moves"
    );
    assert_eq!(sample.readings[0].energy_counter, Some(Joules(0.0)));
    assert!(
        close(register(&root, "hwmon4", 2), 29_523.753173, 1e-6),
        "the pkg counter"
    );
}

// ---- /proc/stat ----

#[test]
fn sysstat_8_cpus_are_17_percent_busy_between_the_two_captures() {
    let read = |dir: &str| {
        let text =
            std::fs::read_to_string(fixture(&format!("proc-stat/sysstat-8cpu/{dir}/proc/stat")))
                .unwrap_or_else(|e| panic!("{e}"));
        proc_stat::parse_proc_stat(&text).unwrap_or_else(|e| panic!("{e}"))
    };
    let (t0, t1) = (read("t0"), read("t1"));
    assert_eq!(t1.busy - t0.busy, 4222);
    assert_eq!(t1.total - t0.total, 24841);
    let u = proc_stat::utilisation(t0, t1).unwrap_or(0.0);
    assert!(close(u, 0.16996, 1e-5), "{u}");
    // Through the source, as `probe --then` does: 15 W × (0.1 + 0.9 × 0.16996).
    let base = fixture("proc-stat/sysstat-8cpu");
    let sample = probe(
        &base.join("t0"),
        Some((&base.join("t1"), Duration::from_secs_f64(31.17))),
        model(),
    );
    let cpu = watts_of(&sample, Domain::Cpu);
    assert_eq!(cpu.len(), 1);
    assert!(
        close(cpu[0], 15.0 * (0.1 + 0.9 * 4222.0 / 24841.0), 1e-9),
        "{cpu:?}"
    );
}

#[test]
fn the_source_keeps_proc_stat_open_and_reads_it_afresh_each_time() {
    // The file is rewritten in place between reads, as the kernel does: same inode, new text.
    let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.path().join("proc")).unwrap_or_else(|e| panic!("{e}"));
    let stat = root.path().join("proc/stat");
    let capture = |dir: &str| {
        std::fs::read(fixture(&format!("proc-stat/sysstat-8cpu/{dir}/proc/stat")))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    std::fs::write(&stat, capture("t0")).unwrap_or_else(|e| panic!("{e}"));
    let mut source = proc_stat::ProcStat::new(root.path(), model());
    let at = |s: f64| Stamp::new(Duration::from_secs_f64(s), s);
    source.read(at(0.0)).unwrap_or_else(|e| panic!("{e}"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&stat)
        .unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut f, &capture("t1")).unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let readings = source.read(at(31.17)).unwrap_or_else(|e| panic!("{e}"));
    let w = readings[0].watts.map_or(f64::NAN, |w| w.0);
    assert!(close(w, 15.0 * (0.1 + 0.9 * 4222.0 / 24841.0), 1e-9), "{w}");
    // Gone meanwhile: the source says why, never 0 W.
    std::fs::remove_file(&stat).unwrap_or_else(|e| panic!("{e}"));
    let mut fresh = proc_stat::ProcStat::new(root.path(), model());
    assert!(matches!(
        fresh.read(at(40.0)),
        Err(wattbar_core::Error::Unavailable(_))
    ));
}

#[test]
fn scaphandre_guest_time_is_inside_user_and_never_added() {
    let text = std::fs::read_to_string(fixture("proc-stat/scaphandre-xeon-bisocket/proc/stat"))
        .unwrap_or_else(|e| panic!("{e}"));
    let t = proc_stat::parse_proc_stat(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.busy, 254_764_110 + 11_797 + 179_539_978 + 8_670_797);
    assert_eq!(t.total, t.busy + 8_153_136_239 + 4_130_255);
}

#[test]
fn a_missing_root_makes_every_linux_source_say_why() {
    let sample = probe(Path::new("/nonexistent-wattbar-root"), None, model());
    assert!(sample.readings.is_empty());
    let unavailable = &sample.state["unavailable"];
    for id in ["power-supply", "rapl", "hwmon", "proc-stat"] {
        assert!(
            unavailable[id].as_str().is_some_and(|r| !r.is_empty()),
            "{id}: {unavailable}"
        );
    }
}
