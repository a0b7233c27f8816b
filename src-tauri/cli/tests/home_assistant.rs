//! A real Home Assistant (2025.4.4, `scripts/homeassistant`) with its MQTT integration on
//! Debian's mosquitto, and `serve --mqtt` on a replayed 50 W: the entities Home Assistant makes
//! from the discovery documents, their states through its REST API, and its switch turning
//! low-power mode on.

use crate::common::http::{http, Answer};
use crate::common::{repo_root, Serve};
use crate::mqtt::Broker;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct HomeAssistant {
    child: Child,
    url: String,
    token: String,
}

impl HomeAssistant {
    fn start(config: &std::path::Path, broker_port: u16) -> HomeAssistant {
        // Waits for an install still running in the background (scripts/setup), and says why
        // it failed if it did.
        let installed = Command::new(repo_root().join("scripts/homeassistant"))
            .arg("python")
            .output()
            .unwrap_or_else(|e| panic!("scripts/homeassistant: {e}"));
        assert!(
            installed.status.success(),
            "run scripts/setup: {}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let mut child = Command::new(repo_root().join("scripts/homeassistant"))
            .args([
                "run",
                "--broker-port",
                &broker_port.to_string(),
                "--config-dir",
            ])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("scripts/homeassistant: {e}"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "Home Assistant did not start ({e}); its log:\n{}",
                std::fs::read_to_string(config.join("home-assistant.log")).unwrap_or_default()
            )
        });
        HomeAssistant {
            child,
            url: v["url"].as_str().unwrap_or_default().to_string(),
            token: v["token"].as_str().unwrap_or_default().to_string(),
        }
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let answer = http()
            .get(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.code(), 200, "{path}");
        answer.json()
    }

    fn post(&self, path: &str, body: serde_json::Value) -> String {
        let answer = http()
            .post(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .send_json(&body)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.code(), 200, "{path}");
        answer.text()
    }

    /// Waits until the entity's state passes `want`; answers it.
    fn state_until(
        &self,
        id: &str,
        want: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let state = self.get(&format!("/api/states/{id}"));
            if want(&state) {
                return state;
            }
            assert!(Instant::now() < deadline, "{id}: {state}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for HomeAssistant {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn home_assistant_shows_power_energy_cost_and_commands_low_power_mode() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(dir.path(), None);
    let config = dir.path().join("ha");
    let ha = HomeAssistant::start(&config, broker.port);
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let serve = Serve::start(
        data.path(),
        "t,watts\n0,50\n",
        &[
            "--interval",
            "100ms",
            "--mqtt",
            &url,
            "--mqtt-interval",
            "1s",
        ],
    );

    // The five entities Home Assistant made from the discovery documents.
    let deadline = Instant::now() + Duration::from_secs(30);
    let entities: Vec<String> = loop {
        let listed = ha.post(
            "/api/template",
            serde_json::json!({"template": "{{ integration_entities('mqtt') | list | tojson }}"}),
        );
        let ids: Vec<String> = serde_json::from_str(&listed).unwrap_or_default();
        if ids.len() >= 5 {
            break ids;
        }
        assert!(Instant::now() < deadline, "entities after 30 s: {listed}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let id = |suffix: &str| {
        entities
            .iter()
            .find(|e| e.ends_with(suffix))
            .cloned()
            .unwrap_or_else(|| panic!("no *{suffix} in {entities:?}"))
    };
    let number = |s: &serde_json::Value| s["state"].as_str().and_then(|v| v.parse::<f64>().ok());

    let power = ha.state_until(&id("_power"), |s| number(s) == Some(50.0));
    assert_eq!(power["attributes"]["unit_of_measurement"], "W", "{power}");
    assert_eq!(power["attributes"]["device_class"], "power", "{power}");
    assert_eq!(power["attributes"]["scope"], "system", "{power}");
    let energy = ha.state_until(&id("_energy"), |s| number(s).is_some_and(|k| k > 0.0));
    assert_eq!(
        energy["attributes"]["unit_of_measurement"], "kWh",
        "{energy}"
    );
    assert_eq!(
        energy["attributes"]["state_class"], "total_increasing",
        "{energy}"
    );
    let cost = ha.state_until(&id("_cost"), |s| number(s).is_some());
    assert_eq!(cost["attributes"]["device_class"], "monetary", "{cost}");
    // Without a price feed the price is not known: unavailable, never 0.
    let price = ha.state_until(&id("_price"), |s| s["state"] == "unavailable");
    assert_eq!(
        price["attributes"]["unit_of_measurement"], "EUR/kWh",
        "{price}"
    );
    let switch = id("_low_power");
    assert!(switch.starts_with("switch."), "{switch}");
    ha.state_until(&switch, |s| s["state"] == "off");

    // Home Assistant's switch moves low-power mode through the engine, and shows it back.
    ha.post(
        "/api/services/switch/turn_on",
        serde_json::json!({"entity_id": switch}),
    );
    ha.state_until(&switch, |s| s["state"] == "on");
    assert_eq!(serve.get("/v1/low-power")["enabled"], true);

    // Stopped cleanly, the machine's entities become unavailable, not 0.
    let (status, _) = serve.terminate();
    assert!(status.success());
    ha.state_until(&id("_power"), |s| s["state"] == "unavailable");
    eprintln!("Home Assistant's entities: {entities:?}");
}
