//! Every smart-plug capture in `../shared/fixtures/plugs/` (read in place, never copied) against
//! the values its SOURCES.md gives.

use std::path::PathBuf;
use wattbar_sources::plugs::{parse_plug, PlugReading, Vendor};
use wattbar_sources::Error;

fn capture(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/plugs")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read(rel: &str) -> PlugReading {
    parse_plug(&capture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn refusal(rel: &str) -> String {
    match parse_plug(&capture(rel)) {
        Err(Error::Unavailable(why)) => why,
        other => panic!("{rel}: {other:?}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// `rel` reads as `vendor`, drawing `watts` now with the counter at `joules`.
fn check(rel: &str, vendor: Vendor, watts: Option<f64>, joules: Option<f64>) -> PlugReading {
    let r = read(rel);
    assert_eq!(r.vendor, vendor, "{rel}");
    match (r.watts, watts) {
        (Some(a), Some(b)) => assert!(close(a, b), "{rel}: {a} W, not {b} W"),
        (a, b) => assert_eq!(a, b, "{rel}: watts"),
    }
    match (r.energy_joules, joules) {
        (Some(a), Some(b)) => assert!(close(a, b), "{rel}: {a} J, not {b} J"),
        (a, b) => assert_eq!(a, b, "{rel}: energy"),
    }
    r
}

#[test]
fn shelly_gen2_counters_are_wh_summed_over_every_metered_channel() {
    use Vendor::ShellyGen2 as S;
    // 7258.589 Wh × 3600 = 26 130 920.4 J.
    check(
        "shelly-gen2/plus-plug-s-gen2-fw1.1.0-switch-getstatus.json",
        S,
        Some(2.7),
        Some(26_130_920.4),
    );
    // A PV plug with no returned register counts both ways into aenergy: 2.57 MWh, in f64.
    check(
        "shelly-gen2/plug-s-gen3-switch-getstatus-pv-production-no-ret.json",
        S,
        Some(399.2),
        Some(9_268_079_864.4),
    );
    // Four switches, all fresh and off: four channels of 0 W and 0 J, not one.
    let four = check(
        "shelly-gen2/pro-4pm-gen2-fw1.0.3-shelly-getstatus-four-switches.json",
        S,
        Some(0.0),
        Some(0.0),
    );
    assert_eq!(four.channels.len(), 4);
    // Two switches: (62 758.285 + 61 917.211) Wh × 3600 = 448 831 785.6 J.
    check(
        "shelly-gen2/plus-2pm-fw-pre1.2.2-shelly-getstatus-two-switches.json",
        S,
        Some(0.0),
        Some(448_831_785.6),
    );
    check(
        "shelly-gen2/plus-1pm-fw-pre1.2.2-shelly-getstatus-no-pf-freq.json",
        S,
        Some(0.0),
        Some(73_417_028.4),
    );
}

#[test]
fn a_shelly_cover_is_metered_and_its_counter_rises_673_joules_in_12_minutes() {
    let before = check(
        "shelly-gen2/2pm-gen3-cover-profile-shelly-getstatus.json",
        Vendor::ShellyGen2,
        Some(0.0),
        Some(1_132_610.4),
    );
    let after = check(
        "shelly-gen2/2pm-gen3-cover-profile-cover-getstatus-12min-later.json",
        Vendor::ShellyGen2,
        Some(123.1),
        Some(1_133_283.6),
    );
    assert_eq!(before.channels[0].id, "cover:0");
    // (314.801 − 314.614) Wh × 3600 = 673.2 J.
    let delta = after.energy_joules.unwrap_or(f64::NAN) - before.energy_joules.unwrap_or(0.0);
    assert!((delta - 673.2).abs() < 1e-6, "{delta} J");
}

#[test]
fn shelly_energy_meters_take_power_from_em_and_counters_from_emdata() {
    // Pro 3EM: the phases' total active power, 375.5 + 170.8 + 12.7.
    let em = check(
        "shelly-gen2/pro-3em-fw1.1.0-em-getstatus.json",
        Vendor::ShellyGen2,
        Some(558.965),
        None,
    );
    assert_eq!(em.channels[0].id, "em:0");
    // Its counters: 2 589 773.39 Wh imported, 1026.61 Wh returned.
    let data = check(
        "shelly-gen2/pro-3em-fw1.1.0-emdata-getstatus.json",
        Vendor::ShellyGen2,
        None,
        Some(9_323_184_204.0),
    );
    assert!(close(data.returned_joules.unwrap_or(0.0), 3_695_796.0));
    assert_eq!(data.export_watts, None);
    // Pro EM-50: each clamp alone.
    check(
        "shelly-gen2/pro-em-50-em1-getstatus-id0.json",
        Vendor::ShellyGen2,
        Some(392.1),
        None,
    );
    let id1 = check(
        "shelly-gen2/pro-em-50-em1-getstatus-id1.json",
        Vendor::ShellyGen2,
        Some(122.4),
        None,
    );
    assert_eq!(id1.channels[0].id, "em1:1");
}

#[test]
fn negative_power_is_export_never_draw() {
    // Pro EM exporting on both clamps: −332.2 W and −38.5 W.
    let r = check(
        "shelly-gen2/pro-em-50-fw-pre1.5.1-shelly-getstatus-negative-power-em1data.json",
        Vendor::ShellyGen2,
        None,
        // Imported: (1264.15 + 48 002.83) Wh × 3600 = 177 361 128 J.
        Some(177_361_128.0),
    );
    assert!(close(r.export_watts.unwrap_or(0.0), 370.7));
    // Returned: 521 252 208 + 119 669 724 J.
    assert!(close(r.returned_joules.unwrap_or(0.0), 640_921_932.0));
    let ids: Vec<&str> = r.channels.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["em1:0", "em1:1"],
        "the unmetered switch:0 is no channel"
    );
    assert_eq!(r.channels[0].watts, Some(-332.2));
    // Shelly EM Gen1: channel 0 exports 620.34 W; its counters are Wh (not W·min as meters[]).
    let gen1 = check(
        "shelly-gen1/em-gen1-fw1.12.1-status-negative-power.json",
        Vendor::ShellyGen1,
        None,
        Some(1_445_302_440.0 + 624_280_680.0),
    );
    assert!(close(gen1.export_watts.unwrap_or(0.0), 620.34));
}

#[test]
fn shelly_gen1_meters_count_watt_minutes_and_emeters_watt_hours() {
    // 2632 W·min × 60 = 157 920 J.
    check(
        "shelly-gen1/plug-s-gen1-fw1.14.0-status.json",
        Vendor::ShellyGen1,
        Some(0.0),
        Some(157_920.0),
    );
    // Three phases: 51.08 + 155.02 + 6.75 W; 2 771 353.9 Wh imported, 428 962.5 Wh returned.
    let three = check(
        "shelly-gen1/3em-gen1-fw1.14.0-status-three-phase.json",
        Vendor::ShellyGen1,
        Some(212.85),
        Some(9_976_874_040.0),
    );
    assert!(close(three.returned_joules.unwrap_or(0.0), 1_544_265_000.0));
    assert_eq!(three.channels.len(), 3);
}

#[test]
fn a_device_without_a_meter_is_refused_with_its_reason_never_0_w() {
    let declared = refusal("shelly-gen1/shelly-1-gen1-fw1.11.7-status-no-metering-hw.json");
    assert!(
        declared.contains("81.5 W is the load configured"),
        "{declared}"
    );
    for rel in [
        "shelly-gen2/mini-1-gen4-shelly-getstatus-unmetered.json",
        "shelly-gen2/pro-3-gen2-fw1.1.0-shelly-getstatus-unmetered-switches.json",
        "shelly-gen2/pro-em-50-switch-getstatus-unmetered-contactor.json",
    ] {
        let why = refusal(rel);
        assert!(
            why.contains("does not meter") && why.contains("switch:0"),
            "{rel}: {why}"
        );
    }
    let three = refusal("shelly-gen2/pro-3-gen2-fw1.1.0-shelly-getstatus-unmetered-switches.json");
    assert!(three.contains("switch:2"), "{three}");
    let tasmota = refusal("tasmota/pow-r2-fw6.1.1-status8-no-energy-object.json");
    assert!(tasmota.contains("no ENERGY"), "{tasmota}");
    let kasa = refusal("kasa/hs100-us-v2-fw1.5.6-emeter-module-not-support.json");
    assert!(kasa.contains("module not support"), "{kasa}");
}

#[test]
fn shelly_error_answers_say_what_the_device_said() {
    let absent = refusal("shelly-gen2/pro-em-50-error-404-no-handler-em0.json");
    assert!(absent.contains("No handler for EM0.GetStatus"), "{absent}");
    let locked = refusal("shelly-gen2/plus-2pm-wsrpc-401-digest-challenge.json");
    assert!(
        locked.contains("password") && locked.contains("shellyplus2pm-485519992590"),
        "{locked}"
    );
}

#[test]
fn tasmota_counts_kwh_in_1_wh_steps_and_names_when_the_count_began() {
    use Vendor::Tasmota as T;
    // 49.766 kWh × 3.6 MJ = 179 157 600 J, in steps of 1 Wh.
    let plug = check(
        "tasmota/plug-on-microinverter-status10-http.json",
        T,
        Some(1.0),
        Some(179_157_600.0),
    );
    assert_eq!(plug.energy_resolution_joules, Some(3600.0));
    assert_eq!(plug.counter_since.as_deref(), Some("2023-07-10T09:17:23"));
    // "Power": 0 padded with a space.
    check(
        "tasmota/plug-status8-http-relay-off-voltage0-padded-ints.json",
        T,
        Some(0.0),
        Some(14_400.0),
    );
    check(
        "tasmota/sonoff-s31-status10-fresh-counter-relay-off.json",
        T,
        Some(0.0),
        Some(0.0),
    );
    // Old firmware: no TotalStartTime, so no epoch to compare.
    let old = check(
        "tasmota/sonoff-pow-fw5.x-tele-sensor-old-format-no-totalstarttime.json",
        T,
        Some(0.0),
        Some(187_200.0),
    );
    assert_eq!(old.counter_since, None);
}

#[test]
fn tasmota_power_lists_are_channels_under_one_total() {
    // Power [8.15, 0], Total 0.077 kWh = 277 200 J for the device.
    let r = check(
        "tasmota/shelly25-tasmota-status8-power-array.json",
        Vendor::Tasmota,
        Some(8.15),
        Some(277_200.0),
    );
    let watts: Vec<Option<f64>> = r.channels.iter().map(|c| c.watts).collect();
    assert_eq!(watts, [Some(8.15), Some(0.0)]);
}

#[test]
fn kasa_units_follow_the_field_names_not_the_model() {
    use Vendor::Kasa as K;
    // v1 floats: W and kWh. 0.015 kWh = 54 000 J.
    check(
        "kasa/hs110-emeter-v1-wire-get-realtime-kwh-floats.json",
        K,
        Some(3.121391),
        Some(54_000.0),
    );
    // v2 milli-units: 31 259 mW, 107 Wh.
    check(
        "kasa/emeter-v2-wire-get-realtime-milli-units.json",
        K,
        Some(31.259),
        Some(385_200.0),
    );
    // The same model name, hw 4.0: milli-units.
    check(
        "kasa/hs110-eu-v4-fw1.0.4-emeter.json",
        K,
        Some(61.753),
        Some(58_762_800.0),
    );
    check(
        "kasa/kp125-us-fw1.0.6-emeter-100w.json",
        K,
        Some(100.277),
        Some(43_812_000.0),
    );
    // One outlet of a strip.
    let slot = check(
        "kasa/hs300-us-v2-fw1.1.2-klap-emeter-slot0-2026-02.json",
        K,
        Some(9.021),
        Some(14_446_800.0),
    );
    assert_eq!(slot.channels[0].id, "slot:0");
}

#[test]
fn kasa_counter_pairs_rise_by_what_the_captures_say() {
    let pairs = [
        // HS110(EU) v1: 32.448 → 55.139 kWh, Δ 81 687 600 J.
        (
            "kasa/hs110-eu-v1-fw1.2.5-emeter-2019-pair-a.json",
            "kasa/hs110-eu-v1-fw1.2.5-emeter-2024-pair-b.json",
            116_812_800.0,
            81_687_600.0,
        ),
        // KP115(EU): from a fresh 0 to 12 068 Wh.
        (
            "kasa/kp115-eu-fw1.0.16-emeter-2021-pair-a.json",
            "kasa/kp115-eu-fw1.0.16-emeter-2024-pair-b.json",
            0.0,
            43_444_800.0,
        ),
        // HS300 slot 0: 785 → 4013 Wh, Δ 11 620 800 J.
        (
            "kasa/hs300-us-v2-fw1.1.2-klap-emeter-slot0-2025-11.json",
            "kasa/hs300-us-v2-fw1.1.2-klap-emeter-slot0-2026-02.json",
            2_826_000.0,
            11_620_800.0,
        ),
    ];
    for (a, b, first, delta) in pairs {
        let (a, b) = (read(a), read(b));
        let (ea, eb) = (
            a.energy_joules.unwrap_or(f64::NAN),
            b.energy_joules.unwrap_or(f64::NAN),
        );
        assert!(close(ea, first), "{ea} J");
        assert!(close(eb - ea, delta), "{} J", eb - ea);
    }
    assert!(close(
        read("kasa/hs110-eu-v1-fw1.2.5-emeter-2019-pair-a.json")
            .watts
            .unwrap_or(0.0),
        0.983971
    ));
    assert!(close(
        read("kasa/kp115-eu-fw1.0.16-emeter-2024-pair-b.json")
            .watts
            .unwrap_or(0.0),
        63.499
    ));
}

#[test]
fn tapo_gives_power_in_milliwatts_and_no_lifetime_counter() {
    check(
        "kasa/tapo-p110-uk-fw1.3.0-klap-smart-energy-2023-12-22-pair-a.json",
        Vendor::Tapo,
        Some(11.196),
        None,
    );
    check(
        "kasa/tapo-p110-uk-fw1.3.0-klap-smart-energy-2023-12-30-pair-b.json",
        Vendor::Tapo,
        Some(11.3),
        None,
    );
}

#[test]
fn home_assistant_reads_a_power_sensor_state_in_its_unit() {
    let r = check(
        "homeassistant/rest-api-states-power-sensor-w.json",
        Vendor::HomeAssistant,
        Some(77.1),
        None,
    );
    assert!(r.channels[0].id.starts_with("sensor."), "{:?}", r.channels);
}

#[test]
fn every_capture_in_the_folder_is_read_or_refused_with_a_reason() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/plugs");
    let mut seen = 0;
    for vendor in std::fs::read_dir(&root).unwrap_or_else(|e| panic!("{e}")) {
        let dir = vendor.unwrap_or_else(|e| panic!("{e}")).path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{e}")) {
            let path = file.unwrap_or_else(|e| panic!("{e}")).path();
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
            match parse_plug(&text) {
                Ok(r) => assert!(
                    r.watts.is_some() || r.export_watts.is_some() || r.energy_joules.is_some(),
                    "{}: {r:?}",
                    path.display()
                ),
                Err(Error::Unavailable(why)) => assert!(!why.is_empty()),
                Err(e) => panic!("{}: {e}", path.display()),
            }
            seen += 1;
        }
    }
    assert!(seen >= 40, "only {seen} captures");
}

#[test]
fn only_the_channels_named_are_summed() {
    let two = read("shelly-gen2/plus-2pm-fw-pre1.2.2-shelly-getstatus-two-switches.json");
    let ids: Vec<&str> = two.channels.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["switch:0", "switch:1"]);
    // The first switch alone: 62 758.285 Wh × 3600 = 225 929 826 J.
    let first = two
        .clone()
        .only(&["switch:0".to_string()])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(close(
        first.energy_joules.unwrap_or_default(),
        225_929_826.0
    ));
    assert_eq!(first.channels.len(), 1);
    // None named: all of them, as read.
    assert_eq!(two.clone().only(&[]).ok(), Some(two.clone()));
    let missing = two
        .only(&["switch:7".to_string()])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        missing.contains("\"switch:7\"") && missing.contains("switch:0, switch:1"),
        "{missing}"
    );
}
