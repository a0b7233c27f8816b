//! The plug parsers on answers no device gave: arbitrary text, and JSON built from the words
//! the real answers use, with values from the extremes (1e308, negatives, strings where numbers
//! go). Nothing panics, and what is taken is a reading a socket could give: finite, never
//! negative draw.

use proptest::prelude::*;
use serde_json::{json, Value};
use wattbar_sources::plugs::{parse_plug, parse_plug_as, Vendor};

/// The keys the captures use, so that the JSON reaches past the first check of each parser.
const KEYS: &[&str] = &[
    "StatusSNS",
    "ENERGY",
    "Total",
    "Power",
    "Voltage",
    "TotalStartTime",
    "Status",
    "switch:0",
    "switch:1",
    "em1:0",
    "em:0",
    "apower",
    "aenergy",
    "total",
    "by_minute",
    "meters",
    "emeters",
    "power",
    "is_valid",
    "emeter",
    "get_realtime",
    "power_mw",
    "total_wh",
    "err_code",
    "state",
    "attributes",
    "unit_of_measurement",
    "device_class",
    "entity_id",
    "gen",
    "ret_aenergy",
    "act_power",
    "total_act_energy",
    "a_act_power",
    "b_act_power",
    "c_act_power",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        prop_oneof![
            Just(1e308),
            Just(-1e308),
            Just(-0.0),
            Just(4e3),
            Just(-77.1),
            Just(f64::MIN_POSITIVE),
            -1e6..1e6f64,
        ]
        .prop_map(|x| json!(x)),
        prop_oneof![
            Just("unavailable".to_string()),
            Just("77.1".to_string()),
            Just("1e308".to_string()),
            Just("-5".to_string()),
            Just("W".to_string()),
            Just("kW".to_string()),
            Just("kWh".to_string()),
            Just("NaN".to_string()),
            ".{0,12}",
        ]
        .prop_map(Value::String),
    ]
}

fn answer() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

const VENDORS: [Vendor; 6] = [
    Vendor::ShellyGen1,
    Vendor::ShellyGen2,
    Vendor::Tasmota,
    Vendor::Kasa,
    Vendor::Tapo,
    Vendor::HomeAssistant,
];

fn believable(text: &str) -> Result<(), TestCaseError> {
    let mut results = vec![parse_plug(text)];
    results.extend(VENDORS.iter().map(|v| parse_plug_as(*v, text)));
    for reading in results.into_iter().flatten() {
        for w in [reading.watts, reading.export_watts].into_iter().flatten() {
            prop_assert!(w.is_finite() && w >= 0.0, "{w} W from {text}");
        }
        for j in [reading.energy_joules, reading.returned_joules]
            .into_iter()
            .flatten()
        {
            prop_assert!(j.is_finite() && j >= 0.0, "{j} J from {text}");
        }
    }
    Ok(())
}

proptest! {

    #[test]
    fn any_json_a_plug_might_answer_is_parsed_or_refused_never_believed_wrong(v in answer()) {
        believable(&v.to_string())?;
    }

    #[test]
    fn any_text_is_parsed_or_refused_without_a_panic(text in ".{0,256}") {
        believable(&text)?;
    }
}
