#[test]
fn the_fast_plist_reader_agrees_with_the_plist_crate_on_the_real_capture() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/macos/ioreg-a-applesilicon-m4pro-battery-1.plist");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let fast = parse_plist(&text).unwrap_or_else(|e| panic!("{e}"));
    let reference = parse_plist_reference(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(fast.len() > 50);
    assert_eq!(fast, reference);
}
use super::*;

fn battery(text: &str) -> SmartBattery {
    parse_ioreg(text).unwrap_or_else(|e| panic!("{e}"))
}

fn text_entry(lines: &[&str]) -> String {
    let mut s = String::from("+-o AppleSmartBattery  <class AppleSmartBattery>\n    {\n");
    for l in lines {
        s.push_str("      ");
        s.push_str(l);
        s.push('\n');
    }
    s.push_str("    }\n");
    s
}

#[test]
fn text_ioreg_negative_numbers_are_reinterpreted_as_signed() {
    let b = battery(&text_entry(&[
        "\"ExternalConnected\" = No",
        "\"Voltage\" = 11659",
        "\"InstantAmperage\" = 18446744073709549993",
    ]));
    assert_eq!(b.instant_amperage_ma, Some(-1623));
    // 11.659 V × 1.623 A = 18.922557 W
    let w = b.system_power().unwrap_or(Watts(-1.0));
    assert!((w.0 - 18.922_557).abs() < 1e-9, "{w:?}");
}

#[test]
fn battery_current_on_ac_is_not_the_system_draw() {
    let b = battery(&text_entry(&[
        "\"ExternalConnected\" = Yes",
        "\"IsCharging\" = Yes",
        "\"Voltage\" = 12000",
        "\"Amperage\" = 2000",
        "\"InstantAmperage\" = 2000",
    ]));
    assert_eq!(b.system_power(), None);
    // 12 V × 2 A into the battery.
    assert_eq!(b.charge_power(), Some(Watts(24.0)));
    assert_eq!(b.adapter_power(), None);
}

#[test]
fn a_zero_system_load_falls_back_to_the_battery_on_battery_power() {
    let b = battery(&text_entry(&[
        "\"ExternalConnected\" = No",
        "\"Voltage\" = 12000",
        "\"InstantAmperage\" = 18446744073709550616",
        "\"PowerTelemetryData\" = {\"SystemLoad\"=0,\"SystemPowerIn\"=0}",
    ]));
    // 12 V × |−1 A|, not 0 W.
    assert_eq!(b.system_power(), Some(Watts(12.0)));
}

#[test]
fn zero_current_on_battery_is_no_measurement_not_zero_watts() {
    let b = battery(&text_entry(&[
        "\"ExternalConnected\" = No",
        "\"Voltage\" = 12000",
        "\"Amperage\" = 0",
        "\"InstantAmperage\" = 0",
    ]));
    assert_eq!(b.system_power(), None);
    assert!(b.to_sample(Stamp::default()).readings.is_empty());
}

#[test]
fn a_ghost_battery_on_a_desktop_gives_nothing() {
    let b = battery(&text_entry(&[
        "\"BatteryInstalled\" = No",
        "\"ExternalConnected\" = No",
        "\"Voltage\" = 0",
        "\"PowerTelemetryData\" = {\"SystemLoad\"=9000,\"SystemPowerIn\"=9000}",
    ]));
    assert!(!b.is_installed());
    let s = b.to_sample(Stamp::default());
    assert!(s.readings.is_empty());
    assert_eq!(s.state["battery_installed"], false);
}

#[test]
fn nested_dictionaries_do_not_shadow_top_level_keys() {
    let b = battery(&text_entry(&[
        "\"BatteryData\" = {\"Voltage\"=11708,\"AdapterPower\"=,\"CellVoltage\"=(4121,4122)}",
        "\"Voltage\" = 11659",
        "\"ExternalConnected\" = No",
    ]));
    assert_eq!(b.voltage_mv, Some(11659));
}

#[test]
fn garbage_is_a_parse_error() {
    assert!(parse_ioreg("").is_err());
    assert!(parse_ioreg("hello\n").is_err());
    assert!(parse_ioreg("<plist version=\"1.0\"><array/></plist>").is_err());
    assert!(parse_ioreg("<?xml version=\"1.0\"?><plist><dict><key>").is_err());
    assert!(parse_ioreg(&text_entry(&["\"Voltage\" 12"])).is_err());
    assert!(parse_ioreg("+-o X\n{\n\"Voltage\" = 1\n").is_err());
}

#[test]
fn text_nested_a_million_deep_is_refused_at_32_not_a_stack_overflow() {
    let deep = format!("\"Voltage\" = {}", "(".repeat(1_000_000));
    let err = parse_ioreg(&text_entry(&[&deep]))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("nested more than 32 deep"), "{err}");
    let within = format!("\"Voltage\" = {}{}", "(".repeat(31), ")".repeat(31));
    assert!(parse_ioreg(&text_entry(&[&within, "\"Voltage\" = 1"])).is_ok());
}
