//! Every macOS capture in `tests/fixtures/macos/` against the expected values of its
//! SOURCES.md.

use std::path::PathBuf;
use std::time::Duration;
use wattbar_core::{Domain, Quality, Stamp, Watts};
use wattbar_sources::cpu_proxy::{CpuPowerModel, TdpOrigin};
use wattbar_sources::macos::ioreg::parse_ioreg;
use wattbar_sources::macos::macmon::{parse_macmon_json, MacmonChannels};
use wattbar_sources::macos::pmset::{parse_pmset_batt, parse_pmset_g, ChargeState, PowerSource};
use wattbar_sources::macos::powermetrics::parse_powermetrics;
use wattbar_sources::macos::top::parse_top;
use wattbar_sources::Sample;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/macos")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn at() -> Stamp {
    Stamp::new(Duration::from_secs(5), 1_700_000_000.0)
}

fn close(actual: Option<f64>, expected: f64, tol: f64) {
    match actual {
        Some(a) => assert!((a - expected).abs() <= tol, "{a} is not {expected} ± {tol}"),
        None => panic!("no value where {expected} was expected"),
    }
}

fn w(x: Option<Watts>) -> Option<f64> {
    x.map(|w| w.0)
}

/// The one reading of `domain`, checked to be labelled as this source measured it.
fn reading(s: &Sample, domain: Domain, source: &str, quality: Quality) -> Option<f64> {
    let found: Vec<_> = s.readings.iter().filter(|r| r.domain == domain).collect();
    assert!(found.len() <= 1, "{domain} reported {} times", found.len());
    found.first().map(|r| {
        assert_eq!(r.source, source);
        assert_eq!(r.quality, quality);
        assert_eq!(r.at, at());
        r.watts
            .unwrap_or_else(|| panic!("{domain} reading without watts"))
            .0
    })
}

// ---- ioreg (AppleSmartBattery) ----

#[test]
fn ioreg_on_ac_not_charging_uses_system_load_not_the_idle_battery() {
    let b = parse_ioreg(&fixture("ioreg-applesilicon-ac-notcharging-98w.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let s = b.to_sample(at());
    let m = |d| reading(&s, d, "smart-battery", Quality::Measured);
    // SystemLoad 37369 mW.
    close(m(Domain::System), 37.369, 1e-9);
    // Battery 12367 mV × 0 mA: no charging power, and never 0 W as the draw.
    assert_eq!(m(Domain::Battery), None);
    // SystemPowerIn 37369 mW from the adapter; cross-check 19921 mV × 1879 mA = 37.43 W.
    close(m(Domain::Adapter), 37.369, 1e-9);
    let t = b.telemetry.clone().unwrap_or_default();
    close(
        t.system_voltage_in_mv
            .zip(t.system_current_in_ma)
            .map(|(v, i)| v as f64 * i as f64 / 1e6),
        37.43,
        0.005,
    );
    // Wall-side estimate 11367 × 3.6 / 1000 = 40.92 W (state only).
    close(
        s.state["wall_energy_estimate"]
            .as_f64()
            .map(|x| x * 3.6 / 1000.0),
        40.92,
        0.005,
    );
    assert_eq!(b.voltage_mv, Some(12367));
    assert_eq!(b.instant_amperage_ma, Some(0));
    assert_eq!(b.external_connected, Some(true));
    assert_eq!(s.state["power_source"], "AC");
    assert_eq!(s.state["charging"], false);
    assert_eq!(s.state["current_capacity"], 80);
    assert_eq!(s.state["adapter_rating_watts"], 98);
    // Without PowerTelemetryData, on AC nothing here measures the system's draw.
    let no_telemetry = wattbar_sources::macos::ioreg::SmartBattery {
        telemetry: None,
        ..b
    };
    assert_eq!(no_telemetry.system_power(), None);
}

#[test]
fn ioreg_charging_keeps_battery_and_adapter_power_apart_from_the_draw() {
    let b = parse_ioreg(&fixture("ioreg-applesilicon-charging-60w.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    let s = b.to_sample(at());
    let m = |d| reading(&s, d, "smart-battery", Quality::Measured);
    // SystemLoad 23437 mW = SystemPowerIn 55175 − BatteryPower 31738.
    close(m(Domain::System), 23.437, 1e-9);
    // Into the battery: BatteryPower 31738 mW ≈ 12369 mV × 2566 mA = 31.739 W.
    close(m(Domain::Battery), 31.738, 1e-9);
    close(
        b.voltage_mv
            .zip(b.amperage_ma)
            .map(|(v, i)| v as f64 * i as f64 / 1e6),
        31.739,
        0.0005,
    );
    // Adapter input SystemPowerIn 55175 mW ≈ 19805 mV × 2786 mA = 55.18 W.
    close(m(Domain::Adapter), 55.175, 1e-9);
    let t = b.telemetry.clone().unwrap_or_default();
    close(
        t.system_voltage_in_mv
            .zip(t.system_current_in_ma)
            .map(|(v, i)| v as f64 * i as f64 / 1e6),
        55.18,
        0.005,
    );
    // Wall estimate 16904 × 3.6 / 1000 = 60.85 W.
    close(
        t.wall_energy_estimate.map(|x| x as f64 * 3.6 / 1000.0),
        60.85,
        0.005,
    );
    assert_eq!(s.state["charging"], true);
    assert_eq!(s.state["current_capacity"], 73);
    assert_eq!(s.state["adapter_rating_watts"], 60);
}

#[test]
fn ioreg_plist_on_battery_reads_top_level_keys_and_signed_currents() {
    let b = parse_ioreg(&fixture("ioreg-a-applesilicon-m4pro-battery-1.plist"))
        .unwrap_or_else(|e| panic!("{e}"));
    // Top-level Voltage 11659, not BatteryData.Voltage 11708.
    assert_eq!(b.voltage_mv, Some(11659));
    assert_eq!(b.instant_amperage_ma, Some(-1623));
    assert_eq!(b.external_connected, Some(false));
    let s = b.to_sample(at());
    let m = |d| reading(&s, d, "smart-battery", Quality::Measured);
    // SystemLoad 18922 mW.
    close(m(Domain::System), 18.922, 1e-9);
    // SystemPowerIn 0 and BatteryPower −18922: neither is a reading.
    assert_eq!(m(Domain::Adapter), None);
    assert_eq!(m(Domain::Battery), None);
    assert_eq!(s.state["power_source"], "Battery");
    // ExternalConnected false; CurrentCapacity 61 of MaxCapacity 100.
    assert_eq!(
        b.supply(),
        Some(wattbar_core::Battery {
            on_battery: true,
            percent: Some(61.0)
        })
    );
    // Without SystemLoad, on battery: 11659 mV × |−1623 mA| = 18.923 W.
    let fallback = wattbar_sources::macos::ioreg::SmartBattery {
        telemetry: None,
        ..b
    };
    close(w(fallback.system_power()), 18.923, 0.0005);
}

// ---- powermetrics ----

#[test]
fn powermetrics_monterey_text_has_no_combined_line_and_package_is_the_soc() {
    let recs = parse_powermetrics(&fixture("powermetrics-m1-air-monterey.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recs.len(), 10);
    let first = &recs[0];
    assert_eq!(first.machine_model.as_deref(), Some("MacBookAir10,1"));
    assert_eq!(first.elapsed, Some(Duration::from_micros(104_510)));
    assert_eq!(first.combined, None);
    let s = first.to_sample(at());
    let m = |d| reading(&s, d, "powermetrics", Quality::Measured);
    close(m(Domain::Soc), 1.473, 1e-9);
    // CPU + GPU + ANE = 947 + 153 + 0 mW.
    close(
        Some(
            m(Domain::Cpu).unwrap_or(0.0)
                + m(Domain::Gpu).unwrap_or(0.0)
                + m(Domain::Ane).unwrap_or(0.0),
        ),
        1.100,
        1e-9,
    );
    close(m(Domain::Dram), 0.220, 1e-9);
    assert_eq!(m(Domain::System), None);
    // Means over the 10 samples: CPU 314.6 mW, GPU 38.6 mW, Package 517.2 mW.
    let mean = |f: fn(&wattbar_sources::macos::powermetrics::PowerRecord) -> Option<Watts>| {
        recs.iter()
            .map(|r| w(f(r)).unwrap_or(f64::NAN))
            .sum::<f64>()
            / recs.len() as f64
    };
    close(Some(mean(|r| r.cpu)), 0.3146, 1e-9);
    close(Some(mean(|r| r.gpu)), 0.0386, 1e-9);
    close(Some(mean(|r| r.package)), 0.5172, 1e-9);
}

#[test]
fn powermetrics_tahoe_text_counts_gpu_power_once() {
    let recs = parse_powermetrics(&fixture("powermetrics-mac16-11-tahoe-text.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].machine_model.as_deref(), Some("Mac16,11"));
    close(w(recs[0].combined), 0.040, 1e-12);
    close(w(recs[1].combined), 0.012, 1e-12);
    let s = recs[0].to_sample(at());
    let m = |d| reading(&s, d, "powermetrics", Quality::Measured);
    close(m(Domain::Cpu), 0.037, 1e-12);
    close(m(Domain::Gpu), 0.003, 1e-12);
    close(m(Domain::Ane), 0.0, 0.0);
    assert_eq!(m(Domain::System), None);
    close(s.state["combined_watts"].as_f64(), 0.040, 1e-12);
    // Parts add up to Combined: nothing counted twice.
    for r in &recs {
        close(
            Some(w(r.cpu).unwrap_or(0.0) + w(r.gpu).unwrap_or(0.0) + w(r.ane).unwrap_or(0.0)),
            w(r.combined).unwrap_or(f64::NAN),
            1e-12,
        );
    }
}

#[test]
fn powermetrics_intel_package_is_cpu_not_system() {
    let recs = parse_powermetrics(&fixture("powermetrics-intel-mbp15-1-excerpt.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].machine_model.as_deref(), Some("MacBookPro15,1"));
    close(w(recs[0].intel_package), 8.53, 1e-12);
    let s = recs[0].to_sample(at());
    close(
        reading(&s, Domain::Cpu, "powermetrics", Quality::Measured),
        8.53,
        1e-12,
    );
    assert_eq!(s.readings.len(), 1);
}

#[test]
fn powermetrics_plist_uses_energy_over_elapsed() {
    let recs = parse_powermetrics(&fixture("powermetrics-mac16-5-tahoe.plist"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r.machine_model.as_deref(), Some("Mac16,5"));
    assert_eq!(r.elapsed, Some(Duration::from_nanos(1_023_685_416)));
    // combined_power 3248.07 mW.
    close(w(r.combined), 3.24807, 1e-12);
    // cpu_energy 3049 mJ / 1.023685416 s = 2978.45 mW.
    close(w(r.cpu), 2.97845, 5e-6);
    // processor.gpu_energy 276 mJ → 269.614 mW (not the GPU block's 284 mJ).
    close(w(r.gpu), 0.269614, 5e-7);
    close(w(r.ane), 0.0, 0.0);
    let s = r.to_sample(at());
    let m = |d| reading(&s, d, "powermetrics", Quality::Measured);
    close(m(Domain::Cpu), 2.97845, 5e-6);
    assert_eq!(m(Domain::System), None);
    assert_eq!(m(Domain::Dram), None);
}

#[test]
fn powermetrics_plist_stream_of_the_real_record_splits_on_nul() {
    let one = fixture("powermetrics-mac16-5-tahoe.plist");
    let stream = format!("{one}\0{one}\0");
    let recs = parse_powermetrics(&stream).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0], recs[1]);
}

// ---- top ----

#[test]
fn top_uses_the_second_sample() {
    let cpu = parse_top(&fixture("top-l2-stats-power.txt")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cpu.user_percent, 27.39);
    assert_eq!(cpu.sys_percent, 40.18);
    assert_eq!(cpu.idle_percent, 32.42);
    // busy = 100 − 32.42 = 67.58 %.
    close(Some(cpu.busy_fraction()), 0.6758, 1e-12);
    let model = CpuPowerModel::with_tdp(Watts(30.0), TdpOrigin::Configured);
    let s = cpu.to_sample_with_model(&model, at());
    // 3 W idle floor + 27 W × 0.6758 = 21.2466 W.
    close(
        reading(&s, Domain::Cpu, "top", Quality::Estimated),
        21.2466,
        1e-9,
    );
    close(s.state["cpu_busy_percent"].as_f64(), 67.58, 1e-9);
}

// ---- pmset ----

fn batt(name: &str) -> wattbar_sources::macos::pmset::PmsetBatt {
    parse_pmset_batt(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn pmset_batt_captures_give_source_charge_and_state() {
    let cases: [(&str, PowerSource, u8, ChargeState, Option<u64>); 5] = [
        (
            "pmset-batt-discharging-48pct.txt",
            PowerSource::Battery,
            48,
            ChargeState::Discharging,
            Some(43 * 60),
        ),
        (
            "pmset-batt-charging-73pct.txt",
            PowerSource::Ac,
            73,
            ChargeState::Charging,
            Some(80 * 60),
        ),
        (
            "pmset-batt-ac-attached.txt",
            PowerSource::Ac,
            80,
            ChargeState::NotCharging,
            None,
        ),
        (
            "pmset-batt-charged.txt",
            PowerSource::Ac,
            100,
            ChargeState::Charged,
            Some(0),
        ),
        (
            "pmset-batt-discharging-94pct.txt",
            PowerSource::Battery,
            94,
            ChargeState::Discharging,
            Some(10 * 3600 + 2 * 60),
        ),
    ];
    for (name, source, pct, state, secs) in cases {
        let b = batt(name);
        assert_eq!(b.source, source, "{name}");
        assert_eq!(b.batteries.len(), 1, "{name}");
        let bat = &b.batteries[0];
        assert_eq!(bat.name, "InternalBattery-0", "{name}");
        assert_eq!(bat.percent, pct, "{name}");
        assert_eq!(bat.state, state, "{name}");
        assert_eq!(bat.remaining.map(|d| d.as_secs()), secs, "{name}");
        assert_eq!(bat.present, Some(true), "{name}");
        let s = b.to_sample(at());
        assert!(s.readings.is_empty(), "{name}: pmset is state, not watts");
        assert_eq!(s.state["charge_percent"], pct, "{name}");
    }
    assert_eq!(
        batt("pmset-batt-charged.txt").batteries[0].id,
        Some(36438115)
    );
    assert_eq!(
        batt("pmset-batt-discharging-94pct.txt").batteries[0].id,
        Some(34930787)
    );
}

#[test]
fn pmset_g_reads_low_power_mode_currently_in_use() {
    let s = parse_pmset_g(&fixture("pmset-g.txt")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.current.low_power_mode, Some(false));
    assert_eq!(s.current.power_mode, None);
    assert!(s.by_source.is_empty());
    let sample = s.to_sample(at());
    assert_eq!(sample.state["low_power_mode"], false);
    assert!(sample.readings.is_empty());
}

#[test]
fn pmset_g_custom_reads_low_power_mode_per_power_source() {
    let s = parse_pmset_g(&fixture("pmset-g-custom.txt")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.current.low_power_mode, None);
    let names: Vec<&str> = s.by_source.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Battery Power", "AC Power"]);
    for (name, modes) in &s.by_source {
        assert_eq!(modes.low_power_mode, Some(false), "{name}");
    }
    let state = s.to_sample(at()).state;
    assert_eq!(
        state["by_power_source"]["AC Power"]["low_power_mode"],
        false
    );
}

// ---- macmon ----

#[test]
fn macmon_pipe_gives_smc_system_power_and_leaves_still_channels_out() {
    let samples = parse_macmon_json(&fixture("macmon-pipe-v0.x-sample.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(samples.len(), 10);
    let first = &samples[0];
    // sys_power 12.617 W (SMC PSTR); all_power 0.503 W = cpu 0.477 + gpu 0.026 + ane 0.
    close(w(first.sys_power), 12.617, 0.0005);
    close(w(first.all_power), 0.503, 0.0005);
    close(
        Some(w(first.cpu_power).unwrap_or(0.0) + w(first.gpu_power).unwrap_or(0.0)),
        0.503,
        0.0005,
    );

    let mut channels = MacmonChannels::default();
    let sys: Vec<f64> = samples
        .iter()
        .map(|smp| {
            let s = channels.to_sample(smp, at());
            let m = |d| reading(&s, d, "macmon", Quality::Measured);
            // ANE and DRAM read 0.0 on every line: unavailable, never 0 W.
            assert_eq!(m(Domain::Ane), None);
            assert_eq!(m(Domain::Dram), None);
            assert!(m(Domain::Cpu).is_some() && m(Domain::Gpu).is_some());
            assert_eq!(
                s.state["unavailable_channels"],
                serde_json::json!(["ane", "dram"])
            );
            m(Domain::System).unwrap_or(f64::NAN)
        })
        .collect();
    close(sys.first().copied(), 12.617373, 1e-6);
    // PSTR updates slower than the 1 s sample: it repeats (4 × 12.617, then 6 × 12.073).
    assert!(sys[..4].iter().all(|x| (x - 12.617373).abs() < 1e-6));
    assert!(sys[4..].iter().all(|x| (x - 12.072607).abs() < 1e-6));
}
