//! MQTT as Home Assistant meets it: `serve --mqtt` against Debian's real `mosquitto`, read with
//! its own `mosquitto_sub` and commanded with `mosquitto_pub`. Discovery, the energy counter
//! against a replayed 50 W, a command, the broker gone for a minute, a serve killed and back,
//! and a broker that refuses the password. Beside it, a serve pushing OTLP whose receiver goes
//! away for the same minute, as a network outage takes both.

use crate::common::{listens_in_time, start_on_a_port_of_its_own, Serve};
use crate::otlp;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) const PREFIX: &str = "wattbar/test";
const WATTS: f64 = 50.0;

/// Debian's mosquitto on a loopback port, killed when dropped.
pub struct Broker {
    child: Child,
    pub port: u16,
    dir: PathBuf,
    /// Configuration lines of its listener besides the defaults (passwords, TLS); `None`:
    /// anonymous, plain.
    auth: Option<String>,
}

impl Broker {
    /// A broker on a loopback port of its own ([`start_on_a_port_of_its_own`]).
    pub fn start(dir: &Path, auth: Option<String>) -> Broker {
        let (child, port) = start_on_a_port_of_its_own(
            "mosquitto",
            |port| Broker::spawn(dir, port, auth.as_deref()),
            || Broker::log_in(dir),
        );
        Broker {
            child,
            port,
            dir: dir.to_path_buf(),
            auth,
        }
    }

    fn spawn(dir: &Path, port: u16, auth: Option<&str>) -> Child {
        let conf = dir.join("mosquitto.conf");
        let mut text = format!(
            // `user root`: run as root (CI), it would otherwise drop to `mosquitto`, which cannot
            // read the test's private folder (its TLS key).
            "user root\nlistener {port} 127.0.0.1\npersistence false\nlog_dest stderr\nlog_type all\n"
        );
        match auth {
            Some(lines) => text += &format!("{lines}\n"),
            None => text += "allow_anonymous true\n",
        }
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("{e}"));
        // Its log goes to stderr, unbuffered, where a file of its own would be written late.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("mosquitto.log"))
            .unwrap_or_else(|e| panic!("{e}"));
        Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start mosquitto ({e}): scripts/setup installs it (Debian package mosquitto)")
            })
    }

    fn log_in(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("mosquitto.log")).unwrap_or_default()
    }

    /// The same broker again on the same port, as after a restart of the machine that runs it.
    fn restart(mut self) -> Broker {
        self.kill();
        let mut child = Broker::spawn(&self.dir, self.port, self.auth.as_deref());
        assert!(
            listens_in_time("mosquitto", &mut child, self.port, || self.log()),
            "mosquitto did not get its port {} back:\n{}",
            self.port,
            self.log()
        );
        self.child = child;
        self
    }

    fn log(&self) -> String {
        Broker::log_in(&self.dir)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One message as `mosquitto_sub` saw it.
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub topic: String,
    pub payload: String,
    pub retained: bool,
}

/// `mosquitto_sub -t '#'` on a broker: every message, in order.
pub(crate) struct Subscriber {
    child: Child,
    rx: mpsc::Receiver<Message>,
    seen: Vec<Message>,
}

impl Subscriber {
    pub(crate) fn start(port: u16) -> Subscriber {
        let mut child = Command::new("mosquitto_sub")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "#",
                "-q",
                "1",
            ])
            .args(["-F", "%r\t%t\t%p"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("mosquitto_sub: {e}"));
        let out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut parts = line.splitn(3, '\t');
                let (Some(r), Some(t), Some(p)) = (parts.next(), parts.next(), parts.next()) else {
                    continue;
                };
                let m = Message {
                    retained: r == "1",
                    topic: t.to_string(),
                    payload: p.to_string(),
                };
                if tx.send(m).is_err() {
                    return;
                }
            }
        });
        Subscriber {
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// The next message after those seen that `want` accepts, within `within`.
    pub(crate) fn next(&mut self, within: Duration, want: impl Fn(&Message) -> bool) -> Message {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) => {
                    self.seen.push(m.clone());
                    if want(&m) {
                        return m;
                    }
                }
                Err(_) => panic!(
                    "no such message within {within:?}; the last seen: {:?}",
                    self.seen.iter().rev().take(8).collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Every message that came since the last read, in order, waiting `settle` for the last.
    pub(crate) fn drain(&mut self, settle: Duration) -> Vec<Message> {
        std::thread::sleep(settle);
        let came: Vec<Message> = self.rx.try_iter().collect();
        self.seen.extend(came.iter().cloned());
        came
    }

    /// The next state document.
    pub(crate) fn state(&mut self, within: Duration) -> serde_json::Value {
        let topic = format!("{PREFIX}/state");
        let m = self.next(within, |m| m.topic == topic);
        serde_json::from_str(&m.payload).unwrap_or_else(|e| panic!("{e}: {}", m.payload))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub(crate) fn serve(data: &Path, broker: &Broker, extra: &[&str]) -> Serve {
    let url = format!("mqtt://127.0.0.1:{}", broker.port);
    let mut args = vec![
        "--interval",
        "100ms",
        "--mqtt",
        &url,
        "--mqtt-topic-prefix",
        PREFIX,
        "--mqtt-interval",
        "1s",
    ];
    args.extend_from_slice(extra);
    Serve::start(data, &format!("t,watts\n0,{WATTS}\n"), &args)
}

/// 50 W × the time between two states' samples, in kWh, against what their counters moved. The
/// counter is what the store committed, which trails each state's sample by up to a batch
/// (`Serve::start`'s 500 ms) and a sample's step (100 ms): 50 W × 0.6 s = 30 J either way.
fn assert_energy_between(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    let seconds = num(&b["at"]) - num(&a["at"]);
    let moved = (num(&b["energy_kwh"]) - num(&a["energy_kwh"])) * 3.6e6;
    let want = WATTS * seconds;
    eprintln!("{what}: {moved:.1} J over {seconds:.1} s, {want:.1} J expected");
    assert!(seconds > 0.0, "{what}: {a} then {b}");
    assert!(
        (moved - want).abs() <= 0.01 * want + WATTS * 0.6,
        "{what}: the energy moved {moved} J in {seconds} s at {WATTS} W: {a} then {b}"
    );
}

#[test]
fn home_assistant_discovers_the_machine_and_no_energy_is_lost_while_the_broker_is_away() {
    let started = Instant::now();
    let dir_a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir_b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data_x = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data_y = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(dir_a.path(), None);
    // B takes only the user `wattbar` with the password "r1ght-br0ker-pw".
    let passwd = dir_b.path().join("passwd");
    let made = Command::new("mosquitto_passwd")
        .args(["-c", "-b"])
        .arg(&passwd)
        .args(["wattbar", "r1ght-br0ker-pw"])
        .status();
    assert!(made.is_ok_and(|s| s.success()));
    let strict = Broker::start(
        dir_b.path(),
        Some(format!(
            "allow_anonymous false\npassword_file {}",
            passwd.display()
        )),
    );
    let mut sub = Subscriber::start(broker.port);
    let x = serve(data_x.path(), &broker, &[]);
    let data_z = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let receiver = otlp::Receiver::start(0);
    let z = otlp::serve(data_z.path(), &receiver);
    let first_push = receiver.next(Duration::from_secs(20), |p| p.energy().is_some());
    otlp::assert_conventions(&first_push);
    let (t1, e1) = first_push.energy().unwrap_or_default();

    // Discovery: five entities, retained, each with its availability and the device.
    let mut docs = std::collections::BTreeMap::new();
    while docs.len() < 5 {
        let m = sub.next(Duration::from_secs(20), |m| {
            m.topic.starts_with("homeassistant/")
        });
        let doc: serde_json::Value =
            serde_json::from_str(&m.payload).unwrap_or_else(|e| panic!("{e}: {m:?}"));
        docs.insert(m.topic.clone(), doc);
    }
    let find = |object: &str| {
        docs.iter()
            .find(|(t, _)| t.ends_with(&format!("/{object}/config")))
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("no {object} in {docs:?}"))
    };
    let (power, energy, cost, switch) = (
        find("power"),
        find("energy"),
        find("cost"),
        find("low_power"),
    );
    assert_eq!(power["device_class"], "power");
    assert_eq!(power["state_class"], "measurement");
    assert_eq!(power["unit_of_measurement"], "W");
    assert_eq!(energy["device_class"], "energy");
    assert_eq!(energy["state_class"], "total_increasing");
    assert_eq!(energy["unit_of_measurement"], "kWh");
    assert_eq!(cost["device_class"], "monetary");
    assert_eq!(find("price")["unit_of_measurement"], "EUR/kWh");
    assert_eq!(switch["command_topic"], format!("{PREFIX}/low_power/set"));
    for doc in [&power, &energy, &cost, &switch] {
        assert_eq!(doc["state_topic"], format!("{PREFIX}/state"), "{doc}");
        assert_eq!(
            doc["availability"][0]["topic"],
            format!("{PREFIX}/availability")
        );
        assert!(doc["device"]["identifiers"][0].is_string(), "{doc}");
    }
    sub.next(Duration::from_secs(10), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "online"
    });
    // Retained: a subscriber that comes later (Home Assistant restarting) gets them all.
    let mut late = Subscriber::start(broker.port);
    for _ in 0..4 {
        let m = late.next(Duration::from_secs(5), |m| {
            m.topic.starts_with("homeassistant/")
        });
        assert!(m.retained && docs.contains_key(&m.topic), "{m:?}");
    }
    drop(late);
    // The first state may come before the first sample: unknown, so null. Then the scope.
    let attributes = sub.next(Duration::from_secs(10), |m| {
        m.topic == format!("{PREFIX}/attributes") && !m.payload.contains("\"scope\":null")
    });
    let attributes: serde_json::Value =
        serde_json::from_str(&attributes.payload).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(attributes["scope"], "system", "{attributes}");
    assert_eq!(attributes["quality"], "measured", "{attributes}");

    // A command moves low-power mode through the engine, and the state says so at once.
    let set = |payload: &str| {
        let sent = Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &broker.port.to_string(), "-q", "1"])
            .args(["-t", &format!("{PREFIX}/low_power/set"), "-m", payload])
            .status();
        assert!(sent.is_ok_and(|s| s.success()));
    };
    for (payload, enabled) in [("ON", true), ("OFF", false)] {
        let sent = Instant::now();
        set(payload);
        let s = sub.next(Duration::from_secs(5), |m| {
            m.topic == format!("{PREFIX}/state") && m.payload.contains(&format!("\"{payload}\""))
        });
        eprintln!(
            "{payload}: state {:?} after {:?}",
            s.payload,
            sent.elapsed()
        );
        assert_eq!(x.get("/v1/low-power")["enabled"], enabled);
    }

    // The energy entity against the replayed 50 W, over about 12 s of states.
    let first = sub.state(Duration::from_secs(5));
    assert_eq!(num(&first["power_w"]), WATTS, "{first}");
    let mut last = first.clone();
    while num(&last["at"]) - num(&first["at"]) < 12.0 {
        last = sub.state(Duration::from_secs(5));
    }
    assert_energy_between(&first, &last, "steady");

    // The broker gone for 60 s: meanwhile, the serve with the wrong password says why and does
    // not hammer its broker.
    let wrong = data_y.path().join("mqtt-password");
    std::fs::write(&wrong, "wr0ng-br0ker-pw\n").unwrap_or_else(|e| panic!("{e}"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let y = Serve::start(
        data_y.path(),
        "t,watts\n0,10\n",
        &[
            "--mqtt",
            &format!("mqtt://wattbar@127.0.0.1:{}", strict.port),
        ],
    );
    let before = last;
    drop(sub);
    let mut broker = broker;
    broker.kill();
    let gone = Instant::now();
    let pushed_before = receiver
        .latest()
        .unwrap_or(first_push)
        .energy()
        .unwrap_or_else(|| panic!("no energy pushed"));
    let receiver_port = receiver.port;
    drop(receiver);
    std::thread::sleep(Duration::from_secs(60).saturating_sub(gone.elapsed()));
    let receiver = otlp::Receiver::start(receiver_port);
    let broker = broker.restart();
    let mut sub = Subscriber::start(broker.port);
    sub.next(Duration::from_secs(70), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "online"
    });
    eprintln!("back online {:?} after the broker went", gone.elapsed());
    let after = sub.state(Duration::from_secs(5));
    assert_energy_between(&before, &after, "across the broker's minute away");

    // OTLP: the first push after the receiver's minute away carries all the energy (100 W), and
    // over 120 s in all hw.host.energy moved 12,000 J.
    let (t2, e2) = receiver
        .next(Duration::from_secs(10), |p| p.energy().is_some())
        .energy()
        .unwrap_or_default();
    let (t0, e0) = pushed_before;
    eprintln!(
        "otlp across the minute away: {:.1} J over {:.1} s",
        e2 - e0,
        t2 - t0
    );
    assert!(
        ((e2 - e0) - 100.0 * (t2 - t0)).abs() <= 1e-3 * 100.0 * (t2 - t0),
        "{e0} J at {t0}, {e2} J at {t2}"
    );
    let (t3, e3) = receiver
        .next(Duration::from_secs(120), |p| {
            p.energy().is_some_and(|(t, _)| t - t1 >= 120.0)
        })
        .energy()
        .unwrap_or_default();
    let per_120_s = (e3 - e1) / (t3 - t1) * 120.0;
    eprintln!(
        "otlp: {:.1} J over {:.1} s: {per_120_s:.1} J per 120 s",
        e3 - e1,
        t3 - t1
    );
    assert!(
        (per_120_s - 12_000.0).abs() <= 12.0,
        "{per_120_s} J per 120 s"
    );
    drop(z);

    let (status, log) = y.terminate();
    assert!(status.success(), "{status}");
    let refused: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("the broker refused") && l.contains("not authorized"))
        .collect();
    assert_eq!(refused.len(), 1, "the reason, said once: {log:#?}");
    assert!(
        !log.iter().any(|l| l.contains("wr0ng-br0ker-pw")),
        "the password was logged: {log:#?}"
    );
    let attempts = strict.log().matches("New connection from").count();
    eprintln!(
        "{attempts} connection attempts to the strict broker in {:?}",
        gone.elapsed()
    );
    assert!(
        (2..=10).contains(&attempts),
        "{attempts} attempts in about a minute:\n{}",
        strict.log()
    );

    // The serve killed: the broker says offline for it (its last will); back, online again,
    // with its counter where it stood.
    let before = sub.state(Duration::from_secs(5));
    let mut x = x;
    let _ = x.child.kill();
    let _ = x.child.wait();
    sub.next(Duration::from_secs(10), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "offline"
    });
    drop(x);
    // A stray state on the topic while it is down, retained: nothing read from the broker moves
    // the counter (Home Assistant would book a jump as consumption).
    let stray = num(&before["energy_kwh"]) * 1.9 + 1.0;
    let sent = Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &broker.port.to_string(),
            "-q",
            "1",
            "-r",
        ])
        .args(["-t", &format!("{PREFIX}/state")])
        .args(["-m", &format!("{{\"energy_kwh\": {stray}}}")])
        .status();
    assert!(sent.is_ok_and(|s| s.success()));
    let x = serve(data_x.path(), &broker, &[]);
    sub.next(Duration::from_secs(20), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "online"
    });
    let after = sub.next(Duration::from_secs(5), |m| {
        m.topic == format!("{PREFIX}/state") && !m.payload.contains(&format!("{stray}"))
    });
    let after: serde_json::Value =
        serde_json::from_str(&after.payload).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        num(&after["energy_kwh"]) >= num(&before["energy_kwh"]),
        "the energy went down across a restart: {before} then {after}"
    );
    assert!(
        num(&after["energy_kwh"]) < stray,
        "a stray message moved the energy: {after}"
    );
    let (status, _) = x.terminate();
    assert!(status.success());
    sub.next(Duration::from_secs(5), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "offline"
    });
    eprintln!("{:.0} s in all", started.elapsed().as_secs_f64());
}

#[test]
fn the_mqtt_preference_starts_stops_and_keeps_its_password_apart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let broker = Broker::start(dir.path(), None);
    let mut sub = Subscriber::start(broker.port);
    let serve = Serve::start(data.path(), &format!("t,watts\n0,{WATTS}\n"), &[]);
    let token = crate::common::api_token(data.path());
    let client = serve.client().with_token(&token);
    let set = |value: serde_json::Value| {
        client
            .put("/v1/preferences/mqtt", &value)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let prefs = set(serde_json::json!({
        "url": format!("mqtt://wattbar@127.0.0.1:{}", broker.port),
        "topic_prefix": PREFIX,
        "interval_ms": 1000,
        "password": "s3cret",
    }));
    assert_eq!(prefs["mqtt"]["has_secret"], true, "{prefs}");
    assert!(!prefs.to_string().contains("s3cret"), "{prefs}");
    let kept = data.path().join("mqtt-password");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap_or_default().trim(),
        "s3cret"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
    }
    let written = std::fs::read_to_string(data.path().join("preferences.json")).unwrap_or_default();
    assert!(!written.contains("s3cret"), "{written}");
    // Applied at once: the discovery documents and a state come without a restart.
    sub.next(Duration::from_secs(10), |m| {
        m.topic.ends_with("/power/config")
    });
    let state = sub.state(Duration::from_secs(10));
    assert!(state["energy_kwh"].is_number(), "{state}");
    // Cleared: the publisher says offline and stops; the password file goes.
    set(serde_json::Value::Null);
    sub.next(Duration::from_secs(10), |m| {
        m.topic == format!("{PREFIX}/availability") && m.payload == "offline"
    });
    assert!(!kept.exists());
    // A refused value changes nothing and names the field.
    let refused = client.put(
        "/v1/preferences/mqtt",
        &serde_json::json!("mqtt://u:pw@127.0.0.1:1883"),
    );
    let e = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("password"), "{e}");
}

/// A certificate authority and a server certificate for `localhost`, made with the openssl
/// command: (the CA's file, the server's certificate, its key).
fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("openssl: {e}"));
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=Wattbar test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n")
        .unwrap_or_else(|e| panic!("{e}"));
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

#[test]
fn mqtts_checks_the_broker_against_the_system_trust_and_says_why_it_refuses() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ca, cert, key) = tls_files(dir.path());
    let broker = Broker::start(
        dir.path(),
        Some(format!(
            "cafile {}\ncertfile {}\nkeyfile {}\nallow_anonymous true",
            ca.display(),
            cert.display(),
            key.display()
        )),
    );
    let url = format!("mqtts://localhost:{}", broker.port);
    // Not trusted by the system: refused, with the reason, and nothing published.
    let untrusted = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let refused = Serve::start(untrusted.path(), "t,watts\n0,50\n", &["--mqtt", &url]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let reason = loop {
        let line = refused
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|e| panic!("no reason logged: {e}"));
        if line.contains("mqtt: mqtts://localhost") {
            break line;
        }
    };
    assert!(reason.contains("certificate"), "{reason}");
    eprintln!(
        "untrusted: {}",
        reason.split("mqtt: ").nth(1).unwrap_or_default()
    );
    drop(refused);
    // Trusted (its CA given as the system's store, SSL_CERT_FILE): discovery over TLS.
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = data.path().join("trace.csv");
    std::fs::write(&trace, "t,watts\n0,50\n").unwrap_or_else(|e| panic!("{e}"));
    let mut c = crate::common::cli(data.path());
    c.env("WATTBAR_REPLAY", &trace)
        .env("SSL_CERT_FILE", &ca)
        .args(["serve", "--listen", "127.0.0.1:0", "--mqtt", &url]);
    let _serve = Serve::spawn(c);
    let out = Command::new("mosquitto_sub")
        .args([
            "-h",
            "localhost",
            "-p",
            &broker.port.to_string(),
            "--cafile",
        ])
        .arg(&ca)
        .args(["-t", "homeassistant/#", "-C", "4", "-W", "20"])
        .output()
        .unwrap_or_else(|e| panic!("mosquitto_sub: {e}"));
    let docs = String::from_utf8_lossy(&out.stdout);
    assert_eq!(docs.lines().count(), 4, "{docs}\n{}", broker.log());
    assert!(docs.contains("\"device_class\":\"energy\""), "{docs}");
}
