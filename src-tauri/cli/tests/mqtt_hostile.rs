//! MQTT against what a broker may hold or be sent by anyone on the network: Debian's real
//! `mosquitto`, fed with `mosquitto_pub`.

use crate::mqtt::{serve, Broker, Subscriber, PREFIX};
use std::process::Command;
use std::time::{Duration, Instant};

fn publish(broker: &Broker, topic: &str, retained: bool, payload: &[u8]) {
    let file = tempfile::NamedTempFile::new().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(file.path(), payload).unwrap_or_else(|e| panic!("{e}"));
    let mut c = Command::new("mosquitto_pub");
    c.args([
        "-h",
        "127.0.0.1",
        "-p",
        &broker.port.to_string(),
        "-q",
        "1",
        "-t",
        topic,
    ]);
    if retained {
        c.arg("-r");
    }
    let sent = c.arg("-f").arg(file.path()).status();
    assert!(sent.is_ok_and(|s| s.success()), "mosquitto_pub");
}

/// Lines `serve` logged so far.
fn logged(serve: &crate::common::Serve, lines: &mut Vec<String>) {
    lines.extend(serve.log.try_iter());
}

/// `serve` on `broker` until it has published two states; what it logged by then.
fn states_go_on(broker: &Broker) -> Vec<String> {
    let mut sub = Subscriber::start(broker.port);
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve(data.path(), broker, &[]);
    // States of this `serve`'s samples come, one after another (not the one the broker kept).
    let topic = format!("{PREFIX}/state");
    let mut sampled = |within| {
        let m = sub.next(within, |m| {
            m.topic == topic && !m.retained && !m.payload.contains("\"at\":null")
        });
        serde_json::from_str::<serde_json::Value>(&m.payload)
            .unwrap_or_else(|e| panic!("{e}: {}", m.payload))
    };
    // A state may be sent again unchanged (on connecting, then at the next tick): the states go
    // on once a later sample's comes.
    let first = sampled(Duration::from_secs(20));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let next = sampled(deadline.saturating_duration_since(std::time::Instant::now()));
        if next["at"].as_f64() > first["at"].as_f64() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{first} then only {next}"
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut lines = Vec::new();
    logged(&serve, &mut lines);
    let (status, _) = serve.terminate();
    assert!(status.success());
    lines
}

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| l.contains(what)).count()
}

#[test]
fn a_large_retained_command_neither_stops_the_states_nor_floods_the_log() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(dir.path(), None);
    let set = format!("{PREFIX}/low_power/set");
    // 20 KB kept by the broker, so each subscription is sent it again. Before, rumqttc's 10 KiB
    // limit ended every connection on it: `serve` reconnected every second for good and
    // published no state. It is a wrong command now, said once.
    publish(&broker, &set, true, &vec![b'x'; 20_000]);
    let lines = states_go_on(&broker);
    assert_eq!(count(&lines, "is neither ON nor OFF"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "mqtt: connected"), 1, "{lines:#?}");

    // 100 KB, over what any message to Wattbar may be: that connection ends, commands are off,
    // said once with how to clear it, and the states go on over the next connection.
    publish(&broker, &set, true, &vec![b'x'; 100_000]);
    let lines = states_go_on(&broker);
    assert_eq!(count(&lines, "commands over MQTT are off"), 1, "{lines:#?}");
    assert!(count(&lines, "mosquitto_pub -r -n -t") == 1, "{lines:#?}");
    assert_eq!(count(&lines, "mqtt: connected"), 2, "{lines:#?}");
}

#[test]
fn two_thousand_wrong_commands_are_said_once_not_two_thousand_times() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(dir.path(), None);
    let mut sub = Subscriber::start(broker.port);
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let serve = serve(data.path(), &broker, &[]);
    sub.state(Duration::from_secs(20));
    // One mosquitto_pub sending a line per message: 2,000 junk commands.
    let file = tempfile::NamedTempFile::new().unwrap_or_else(|e| panic!("{e}"));
    let junk: String = (0..2_000).map(|k| format!("junk {k}\n")).collect();
    std::fs::write(file.path(), junk).unwrap_or_else(|e| panic!("{e}"));
    let sent = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &broker.port.to_string(), "-q", "1"])
        .args(["-t", &format!("{PREFIX}/low_power/set"), "-l"])
        .stdin(std::fs::File::open(file.path()).unwrap_or_else(|e| panic!("{e}")))
        .status();
    assert!(sent.is_ok_and(|s| s.success()));
    // The engine is still commanded by a right one after them.
    publish(&broker, &format!("{PREFIX}/low_power/set"), false, b"ON");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = sub.state(Duration::from_secs(10));
        if state["low_power"] == "ON" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "low power never went on: {state}"
        );
    }
    let mut lines = Vec::new();
    logged(&serve, &mut lines);
    let said = lines
        .iter()
        .filter(|l| l.contains("is neither ON nor OFF"))
        .count();
    assert!(
        (1..=2).contains(&said),
        "{said} lines: {:#?}",
        &lines[..lines.len().min(20)]
    );
    let (status, _) = serve.terminate();
    assert!(status.success());
}
