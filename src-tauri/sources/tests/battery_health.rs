//! Every battery capture in `tests/fixtures/` gives its health and cycles, worked by hand from
//! the files (full ÷ design in the gauge's own unit; energy in Wh).

use std::path::PathBuf;
use wattbar_core::battery::{Cycles, EnergyFrom, Health};
use wattbar_sources::linux::power_supply;
use wattbar_sources::macos::ioreg::parse_ioreg;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The batteries of one Linux capture, read as the source reads them (uevent, else attributes).
fn linux(case: &str) -> Vec<Health> {
    let root = fixtures().join("linux/power_supply").join(case);
    power_supply::read_supplies(&root)
        .unwrap_or_else(|e| panic!("{case}: {e}"))
        .iter()
        .filter_map(power_supply::health)
        .collect()
}

fn macos(name: &str) -> Health {
    let path = fixtures().join("macos").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_ioreg(&String::from_utf8_lossy(&bytes))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .health()
        .unwrap_or_else(|| panic!("{name}: no health"))
}

fn wh(j: Option<wattbar_core::Joules>) -> f64 {
    j.map(|j| j.0 / 3600.0).unwrap_or(f64::NAN)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

struct Expected {
    case: &'static str,
    battery: &'static str,
    ratio: f64,
    design_wh: f64,
    full_wh: f64,
    energy_from: EnergyFrom,
    cycles: Cycles,
    chemistry: &'static str,
    manufacturer: &'static str,
}

#[test]
fn every_linux_capture_gives_health_worked_by_hand() {
    let design_v = |volts| EnergyFrom::ChargeAtDesignVoltage { volts };
    let cases = [
        // Charge: 4.804 Ah ÷ 4.912 Ah = 97.80 %; at 11.4 V: 55.9968 Wh designed, 54.7656 Wh full.
        Expected {
            case: "dell-m7r9677-discharging-current",
            battery: "BAT0",
            ratio: 4.804 / 4.912,
            design_wh: 55.9968,
            full_wh: 54.7656,
            energy_from: design_v(11.4),
            cycles: Cycles::NotReported,
            chemistry: "Li-poly",
            manufacturer: "Samsung SDI",
        },
        // 3.750 ÷ 4.474 Ah = 83.82 %; × 11.4 V = 51.0036 and 42.75 Wh.
        Expected {
            case: "dell-pn1vn08-charging-current",
            battery: "BAT0",
            ratio: 3.750 / 4.474,
            design_wh: 51.0036,
            full_wh: 42.75,
            energy_from: design_v(11.4),
            cycles: Cycles::NotReported,
            chemistry: "Li-poly",
            manufacturer: "SMP-ATL4.49",
        },
        // A worn battery: 2.871 ÷ 8.509 Ah = 33.74 %; × 11.4 V = 97.0026 and 32.7294 Wh.
        Expected {
            case: "dell-xps15-9560-not-charging",
            battery: "BAT0",
            ratio: 2.871 / 8.509,
            design_wh: 97.0026,
            full_wh: 32.7294,
            energy_from: design_v(11.4),
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "SMP",
        },
        // Energy: 89.21 ÷ 91.0 Wh = 98.03 %.
        Expected {
            case: "dell-xps15-full-no-power-now",
            battery: "BAT1",
            ratio: 89.21 / 91.0,
            design_wh: 91.0,
            full_wh: 89.21,
            energy_from: EnergyFrom::Energy,
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "Simplo",
        },
        // Attribute files only: 3.424 ÷ 3.6 Ah = 95.11 %; × 11.4 V = 41.04 and 39.0336 Wh.
        Expected {
            case: "hp-charge-no-current-discharging",
            battery: "BAT0",
            ratio: 3.424 / 3.6,
            design_wh: 41.04,
            full_wh: 39.0336,
            energy_from: design_v(11.4),
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "Hewlett-Packard",
        },
        // 1.802 ÷ 5.6 Ah = 32.18 %; × 11.1 V = 62.16 and 20.0022 Wh.
        Expected {
            case: "thinkpad-lgc-42t4865-charging-current",
            battery: "BAT0",
            ratio: 1.802 / 5.6,
            design_wh: 62.16,
            full_wh: 20.0022,
            energy_from: design_v(11.1),
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "LGC",
        },
        // 67.49 ÷ 99.46 Wh = 67.86 %.
        Expected {
            case: "thinkpad-lgc-45n1153-discharging-power",
            battery: "BAT0",
            ratio: 67.49 / 99.46,
            design_wh: 99.46,
            full_wh: 67.49,
            energy_from: EnergyFrom::Energy,
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "LGC",
        },
        // From the uevent (one read), not the attribute files captured at another moment
        // (50.06 Wh there): 47.39 ÷ 47.52 Wh = 99.73 %.
        Expected {
            case: "thinkpad-lgc-lnv45n1-discharging",
            battery: "BAT0",
            ratio: 47.39 / 47.52,
            design_wh: 47.52,
            full_wh: 47.39,
            energy_from: EnergyFrom::Energy,
            cycles: Cycles::NotReported,
            chemistry: "Li-ion",
            manufacturer: "LGC",
        },
        // Above its design, kept so: 24.04 ÷ 23.51 Wh = 102.25 %; the one capture that counts
        // cycles: 5.
        Expected {
            case: "thinkpad-sanyo-00hw022-charging-power",
            battery: "BAT0",
            ratio: 24.04 / 23.51,
            design_wh: 23.51,
            full_wh: 24.04,
            energy_from: EnergyFrom::Energy,
            cycles: Cycles::Counted(5),
            chemistry: "Li-poly",
            manufacturer: "SANYO",
        },
    ];
    let listed: Vec<String> = std::fs::read_dir(fixtures().join("linux/power_supply"))
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        listed.len(),
        cases.len(),
        "a capture without its case: {listed:?}"
    );
    for e in &cases {
        let found = linux(e.case);
        assert_eq!(found.len(), 1, "{}: {found:?}", e.case);
        let h = &found[0];
        assert_eq!(h.battery, e.battery, "{}", e.case);
        assert!(
            close(h.ratio.unwrap_or(f64::NAN), e.ratio),
            "{}: {h:?}",
            e.case
        );
        assert!(close(wh(h.design), e.design_wh), "{}: {h:?}", e.case);
        assert!(close(wh(h.full), e.full_wh), "{}: {h:?}", e.case);
        assert_eq!(h.energy_from, e.energy_from, "{}", e.case);
        assert_eq!(h.cycles, e.cycles, "{}", e.case);
        assert_eq!(h.chemistry.as_deref(), Some(e.chemistry), "{}", e.case);
        assert_eq!(
            h.manufacturer.as_deref(),
            Some(e.manufacturer),
            "{}",
            e.case
        );
    }
}

#[test]
fn a_linux_capture_counting_zero_cycles_says_not_reported() {
    let h = &linux("dell-m7r9677-discharging-current")[0];
    assert_eq!(h.cycles, Cycles::NotReported);
    assert_eq!(h.cycles.count(), None);
    let json = serde_json::to_value(h.cycles).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["state"], "not_reported");
}

#[test]
fn the_60w_mac_is_at_87_percent_after_194_cycles() {
    // AppleRawMaxCapacity 5287 ÷ DesignCapacity 6075 mAh = 87.03 %; 3 cells × 3.8 V = 11.4 V:
    // 69.255 Wh designed, 60.2718 Wh full.
    let h = macos("ioreg-applesilicon-charging-60w.txt");
    assert!(close(h.ratio.unwrap_or(f64::NAN), 5287.0 / 6075.0), "{h:?}");
    assert_eq!(format!("{:.1}", h.percent().unwrap_or(f64::NAN)), "87.0");
    assert_eq!(h.cycles, Cycles::Counted(194));
    assert!(close(wh(h.design), 69.255), "{h:?}");
    assert!(close(wh(h.full), 60.2718), "{h:?}");
    assert_eq!(
        h.energy_from,
        EnergyFrom::ChargeAtNominalCellVoltage { cells: 3 }
    );
    // "Apple Inc." in this capture is the adapter's maker (inside AdapterDetails), not the
    // battery's: the battery names none.
    assert_eq!(h.manufacturer, None);
    assert_eq!(h.model.as_deref(), Some("bq40z651"));
}

#[test]
fn the_98w_mac_reads_above_its_design_after_9_cycles() {
    // AppleRawMaxCapacity 6273 ÷ 6249 mAh = 100.38 % (not NominalChargeCapacity's 6425).
    let h = macos("ioreg-applesilicon-ac-notcharging-98w.txt");
    assert!(close(h.ratio.unwrap_or(f64::NAN), 6273.0 / 6249.0), "{h:?}");
    assert_eq!(h.cycles, Cycles::Counted(9));
    assert!(close(wh(h.design), 6.249 * 11.4), "{h:?}");
}

#[test]
fn the_m4_pro_plist_is_at_94_percent_after_171_cycles() {
    // 5900 ÷ 6249 mAh = 94.42 %, 171 cycles; its cells read 3892, 3888 and 3879 mV: three.
    let h = macos("ioreg-a-applesilicon-m4pro-battery-1.plist");
    assert!(close(h.ratio.unwrap_or(f64::NAN), 5900.0 / 6249.0), "{h:?}");
    assert_eq!(h.cycles, Cycles::Counted(171));
    assert_eq!(
        h.energy_from,
        EnergyFrom::ChargeAtNominalCellVoltage { cells: 3 }
    );
}

#[test]
fn a_mac_without_apples_raw_figure_falls_back_to_the_nominal_then_mah_max() {
    let mut b = parse_ioreg(
        &std::fs::read_to_string(fixtures().join("macos/ioreg-applesilicon-charging-60w.txt"))
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    b.raw_max_capacity_mah = None;
    // NominalChargeCapacity 5437 ÷ 6075 = 89.50 %.
    let nominal = b.health().and_then(|h| h.ratio);
    assert!(close(nominal.unwrap_or(f64::NAN), 5437.0 / 6075.0));
    // MaxCapacity 100 is a percentage on Apple Silicon: not a capacity, so no ratio.
    b.nominal_charge_capacity_mah = None;
    assert_eq!(b.health().and_then(|h| h.ratio), None);
    // An Intel Mac's MaxCapacity in mAh: 5000 ÷ 6075.
    b.max_capacity = Some(5000);
    let intel = b.health().and_then(|h| h.ratio);
    assert!(close(intel.unwrap_or(f64::NAN), 5000.0 / 6075.0));
}
