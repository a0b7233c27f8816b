use super::discovery::{documents, node_id, number, Topics};
use super::*;

#[test]
fn a_broker_url_gives_its_port_and_the_machine_its_topics() {
    let c = MqttConfig::from_url("mqtt://ha@broker.lan", "gpu-box.local")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (c.host.as_str(), c.port, c.tls),
        ("broker.lan", 1883, false)
    );
    assert_eq!(c.username.as_deref(), Some("ha"));
    assert_eq!(c.topics.prefix, "wattbar/gpu-box_local");
    assert_eq!(c.topics.node, "wattbar_gpu-box_local");
    assert_eq!(c.client_id, "wattbar-gpu-box_local");
    assert_eq!(c.interval, DEFAULT_INTERVAL);
    let tls = MqttConfig::from_url("mqtts://[fd00::1]/", "h").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (tls.host.as_str(), tls.port, tls.tls),
        ("fd00::1", 8883, true)
    );
    assert_eq!(tls.broker(), "mqtts://[fd00::1]:8883");
}

#[test]
fn a_password_in_the_url_is_refused_and_never_shown() {
    let e = MqttConfig::from_url("mqtt://ha:hunter2@broker", "h")
        .err()
        .unwrap_or_else(|| panic!("taken"));
    let text = e.to_string();
    assert!(text.contains("password file"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let mut c =
        MqttConfig::from_url("mqtt://ha@broker:1884", "h").unwrap_or_else(|e| panic!("{e}"));
    c.password = wattbar_core::secret::Bound::new("mqtt://broker:1884", "hunter2".to_string());
    let shown = format!("{c:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("mqtt://broker:1884"), "{shown}");
    c.port = 1885;
    assert!(
        c.options()
            .is_ok_and(|o| o.credentials().is_some_and(|l| l.password.is_empty())),
        "a broker at another port is sent no password"
    );
    for bad in [
        "http://broker",
        "mqtt://",
        "mqtt://broker/topic",
        "broker:1883",
    ] {
        assert!(MqttConfig::from_url(bad, "h").is_err(), "{bad} was taken");
    }
}

#[test]
fn node_ids_keep_only_what_home_assistant_takes() {
    assert_eq!(node_id("Mac Studio (2)"), "Mac_Studio__2_");
    assert_eq!(node_id(""), "wattbar");
}

#[test]
fn discovery_gives_five_entities_each_unavailable_when_its_field_is_unknown() {
    let topics = Topics::new("wattbar/box", "homeassistant", "wattbar_box");
    let docs = documents(&topics, "box", "EUR", "0.1.0");
    let topics_of: Vec<&str> = docs.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        topics_of,
        [
            "homeassistant/sensor/wattbar_box/power/config",
            "homeassistant/sensor/wattbar_box/energy/config",
            "homeassistant/sensor/wattbar_box/cost/config",
            "homeassistant/sensor/wattbar_box/price/config",
            "homeassistant/switch/wattbar_box/low_power/config",
        ]
    );
    let (_, energy) = &docs[1];
    assert_eq!(energy["device_class"], "energy");
    assert_eq!(energy["state_class"], "total_increasing");
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(energy["availability_mode"], "all");
    assert_eq!(
        energy["availability"][0]["topic"],
        "wattbar/box/availability"
    );
    assert_eq!(
        energy["availability"][1]["value_template"],
        "{{ 'online' if value_json.energy_kwh is not none else 'offline' }}"
    );
    assert_eq!(docs[2].1["unit_of_measurement"], "EUR");
    assert_eq!(docs[3].1["unit_of_measurement"], "EUR/kWh");
    assert_eq!(
        docs[3].1["availability"][1]["value_template"],
        "{{ 'online' if value_json.price_per_kwh is not none else 'offline' }}"
    );
    assert_eq!(docs[4].1["command_topic"], "wattbar/box/low_power/set");
    for (_, doc) in &docs {
        assert_eq!(doc["device"]["identifiers"][0], "wattbar_box");
        assert_eq!(doc["json_attributes_topic"], "wattbar/box/attributes");
    }
}

#[test]
fn a_published_figure_is_finite_and_never_negative_zero() {
    // An empty sum of costs in Rust is -0.0; Home Assistant would show "-0.00 EUR".
    let empty: f64 = std::iter::empty::<f64>().sum();
    assert_eq!(serde_json::json!(empty).to_string(), "-0.0");
    assert_eq!(serde_json::json!(number(Some(empty))).to_string(), "0.0");
    assert_eq!(number(Some(-0.0)).map(f64::is_sign_negative), Some(false));
    assert_eq!(number(Some(-0.25)), Some(-0.25), "a credit stays negative");
    assert_eq!(number(Some(1.5)), Some(1.5));
    assert_eq!(number(Some(f64::NAN)), None);
    assert_eq!(number(Some(f64::INFINITY)), None);
    assert_eq!(number(None), None);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {

        /// Any broker address: taken or refused, and a refusal never repeats a password given
        /// in it.
        #[test]
        fn any_broker_address_is_taken_or_refused_without_its_password(
            scheme in prop_oneof![Just("mqtt://"), Just("mqtts://"), Just("http://"), Just("")],
            user in "[a-z]{0,6}",
            rest in "\\PC{0,30}",
        ) {
            let url = format!("{scheme}{user}:pw-s3cret@{rest}");
            if let Err(e) = MqttConfig::from_url(&url, "h") {
                prop_assert!(!e.to_string().contains("pw-s3cret"), "{e}");
            }
            let _ = MqttConfig::from_url(&format!("{scheme}{rest}"), "h");
        }

        /// Any payload on `low_power/set`: a command only when it is exactly ON or OFF; any
        /// other is refused in a short line with no control character, however long or hostile.
        #[test]
        fn any_command_payload_is_on_off_or_a_short_clean_refusal(
            payload in prop_oneof![
                Just(b"ON".to_vec()),
                Just(b"OFF".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..20_000),
                "\\PC{0,80}".prop_map(String::into_bytes),
            ],
        ) {
            match super::super::low_power_command(&payload) {
                Ok(on) => prop_assert_eq!(payload, if on { b"ON".to_vec() } else { b"OFF".to_vec() }),
                Err(why) => {
                    prop_assert!(payload != b"ON" && payload != b"OFF");
                    prop_assert!(why.len() < 700, "{} bytes", why.len());
                    prop_assert!(!why.chars().any(char::is_control), "{why:?}");
                }
            }
        }
    }
}
