//! A plug asked over HTTP: a loopback server plays the device with its captured answers
//! (read in place from `../shared/fixtures/plugs/`), as the device would serve them.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use wattbar_core::secret::Bound;
use wattbar_sources::plugs::{PlugClient, Vendor, WallMeter};
use wattbar_sources::Error;

fn capture(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/plugs")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the device answers: status, extra headers, body.
type Answer = (u16, Vec<(String, String)>, String);

/// A request as the device saw it.
#[derive(Clone, Debug)]
struct Asked {
    path: String,
    headers: HashMap<String, String>,
}

/// A device on loopback port 0, answering each request with `answer`.
struct Device {
    origin: String,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl Device {
    fn start(answer: impl Fn(&Asked) -> Answer + Send + Sync + 'static) -> Device {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let origin = format!(
            "127.0.0.1:{}",
            listener
                .local_addr()
                .unwrap_or_else(|e| panic!("{e}"))
                .port()
        );
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, answer) = (Arc::clone(&log), Arc::clone(&answer));
                std::thread::spawn(move || serve(stream, &log, answer.as_ref()));
            }
        });
        Device { origin, asked }
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Asked>>, answer: &dyn Fn(&Asked) -> Answer) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let asked = Asked { path, headers };
        if let Ok(mut l) = log.lock() {
            l.push(asked.clone());
        }
        let (status, extra, body) = answer(&asked);
        let mut head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(body.as_bytes()).is_err()
        {
            return;
        }
    }
}

fn ok(body: String) -> Answer {
    (200, Vec::new(), body)
}

fn not_found() -> Answer {
    (404, Vec::new(), String::new())
}

fn client(url: &str) -> PlugClient {
    PlugClient::new(&WallMeter {
        url: url.to_string(),
        ..WallMeter::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_shelly_is_found_by_its_own_answer_and_read_with_rpc() {
    let status = capture("shelly-gen2/plus-2pm-fw-pre1.2.2-shelly-getstatus-two-switches.json");
    let device = Device::start(move |asked| match asked.path.as_str() {
        "/shelly" => ok(r#"{"id":"shellyplus2pm-x","gen":2,"app":"Plus2PM"}"#.to_string()),
        "/rpc/Shelly.GetStatus" => ok(status.clone()),
        _ => not_found(),
    });
    let mut plug = client(&format!("http://{}", device.origin));
    let reading = plug.read().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reading.vendor, Vendor::ShellyGen2);
    // (62 758.285 + 61 917.211) Wh × 3600 = 448 831 785.6 J.
    assert!((reading.energy_joules.unwrap_or(0.0) - 448_831_785.6).abs() < 1e-3);
    // Found once: the second read asks the status alone.
    plug.read().unwrap_or_else(|e| panic!("{e}"));
    let paths: Vec<String> = device.asked().into_iter().map(|a| a.path).collect();
    assert_eq!(
        paths,
        ["/shelly", "/rpc/Shelly.GetStatus", "/rpc/Shelly.GetStatus"]
    );
}

#[test]
fn a_tasmota_is_found_when_no_shelly_answers() {
    let status = capture("tasmota/plug-on-microinverter-status10-http.json");
    let device = Device::start(move |asked| match asked.path.as_str() {
        "/cm?cmnd=Status" => ok(r#"{"Status":{"Module":1,"DeviceName":"Tasmota"}}"#.to_string()),
        "/cm?cmnd=Status%208" => ok(status.clone()),
        _ => not_found(),
    });
    let reading = client(&format!("http://{}/", device.origin))
        .read()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reading.vendor, Vendor::Tasmota);
    // 49.766 kWh = 179 157 600 J.
    assert_eq!(reading.energy_joules, Some(179_157_600.0));
}

/// The value of `key` in a digest `Authorization` header.
fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    header
        .trim_start_matches("Digest")
        .split(',')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim_matches('"'))
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A Shelly with password `secret`: a 401 challenge, then the status for the right answer.
fn locked_shelly() -> Device {
    let status = capture("shelly-gen2/plus-plug-s-gen2-fw1.1.0-switch-getstatus.json");
    let realm = "shellyplusplugs-e465b8b28e1c";
    let nonce = "1725185413";
    Device::start(move |asked| {
        let challenge = || {
            (
                401,
                vec![(
                    "WWW-Authenticate".to_string(),
                    format!(
                        r#"Digest qop="auth", realm="{realm}", nonce="{nonce}", algorithm=SHA-256"#
                    ),
                )],
                String::new(),
            )
        };
        let Some(auth) = asked.headers.get("authorization") else {
            return challenge();
        };
        // RFC 7616 with SHA-256, worked here apart from the client's crate.
        let ha1 = sha256(&format!("admin:{realm}:secret"));
        let ha2 = sha256(&format!("GET:{}", asked.path));
        let expected = sha256(&format!(
            "{ha1}:{nonce}:{}:{}:auth:{ha2}",
            field(auth, "nc").unwrap_or(""),
            field(auth, "cnonce").unwrap_or("")
        ));
        let right = field(auth, "response") == Some(expected.as_str())
            && field(auth, "username") == Some("admin")
            && field(auth, "uri") == Some(asked.path.as_str());
        match (right, asked.path.as_str()) {
            (true, "/rpc/Switch.GetStatus?id=0") => ok(status.clone()),
            (true, _) => not_found(),
            (false, _) => challenge(),
        }
    })
}

#[test]
fn a_shelly_with_a_password_is_read_after_its_digest_challenge() {
    let device = locked_shelly();
    let url = format!(
        "http://admin:secret@{}/rpc/Switch.GetStatus?id=0",
        device.origin
    );
    let reading = PlugClient::new(&WallMeter {
        url,
        kind: Some(Vendor::ShellyGen2),
        ..WallMeter::default()
    })
    .and_then(|mut c| c.read())
    .unwrap_or_else(|e| panic!("{e}"));
    // 2.7 W; 7258.589 Wh = 26 130 920.4 J.
    assert_eq!(reading.watts, Some(2.7));
    assert!((reading.energy_joules.unwrap_or(0.0) - 26_130_920.4).abs() < 1e-6);
    let asked = device.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(!asked[0].headers.contains_key("authorization"));
}

#[test]
fn a_wrong_or_missing_password_is_said_so_and_never_shown() {
    let device = locked_shelly();
    let path = "/rpc/Switch.GetStatus?id=0";
    let wrong = PlugClient::new(&WallMeter {
        url: format!("http://{}{path}", device.origin),
        kind: Some(Vendor::ShellyGen2),
        password: Bound::new(&format!("http://{}", device.origin), "guessed".into()),
        token: None,
        channels: Vec::new(),
        tls_pin: None,
    })
    .and_then(|mut c| c.read());
    match wrong {
        Err(Error::Unavailable(why)) => {
            assert!(
                why.contains("refused the password") && !why.contains("guessed"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    let missing = client(&format!("http://{}{path}", device.origin)).read();
    match missing {
        Err(Error::Unavailable(why)) => assert!(why.contains("asks for its password"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn home_assistant_is_asked_with_its_token() {
    let state = capture("homeassistant/rest-api-states-power-sensor-w.json");
    let device =
        Device::start(
            move |asked| match asked.headers.get("authorization").map(String::as_str) {
                Some("Bearer long-lived") => ok(state.clone()),
                _ => (401, Vec::new(), "401: Unauthorized".to_string()),
            },
        );
    let url = format!("http://{}/api/states/sensor.station_power", device.origin);
    let reading = PlugClient::new(&WallMeter {
        url: url.clone(),
        token: Bound::new(&url, "long-lived".into()),
        ..WallMeter::default()
    })
    .and_then(|mut c| c.read())
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reading.vendor, Vendor::HomeAssistant);
    assert_eq!(reading.watts, Some(77.1));
    let refused = PlugClient::new(&WallMeter {
        url: url.clone(),
        kind: Some(Vendor::HomeAssistant),
        token: Bound::new(&url, "stale".into()),
        ..WallMeter::default()
    })
    .and_then(|mut c| c.read());
    match refused {
        Err(Error::Unavailable(why)) => {
            assert!(
                why.contains("refused the token") && !why.contains("stale"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_token_kept_for_one_home_assistant_goes_to_no_other_address() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let elsewhere = Device::start(move |asked| {
        if let Ok(mut log) = log.lock() {
            log.push(asked.headers.get("authorization").cloned());
        }
        (401, Vec::new(), "401: Unauthorized".to_string())
    });
    let kept_for = "http://ha.local:8123/api/states/sensor.station_power";
    let refused = PlugClient::new(&WallMeter {
        url: format!(
            "http://{}/api/states/sensor.station_power",
            elsewhere.origin
        ),
        kind: Some(Vendor::HomeAssistant),
        token: Bound::new(kept_for, "long-lived".into()),
        ..WallMeter::default()
    })
    .and_then(|mut c| c.read());
    assert!(
        matches!(&refused, Err(Error::Unavailable(why)) if why.contains("asks for a token")),
        "{refused:?}"
    );
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen, vec![None], "asked once, with no Authorization");
}

#[test]
fn a_plug_that_hangs_up_or_stays_silent_is_transient_and_never_zero() {
    // One hangs up on every request; the other takes it and never answers (2 s at most).
    let hangs_up = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let silent = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let addr = |l: &TcpListener| l.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (addr(&hangs_up), addr(&silent));
    std::thread::spawn(move || {
        for stream in hangs_up.incoming() {
            drop(stream);
        }
    });
    std::thread::spawn(move || {
        let held: Vec<TcpStream> = silent.incoming().flatten().take(4).collect();
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(held);
    });
    for url in [format!("http://{a}"), format!("http://{b}")] {
        match client(&url).read() {
            Err(Error::Transient(why)) => assert!(why.contains("did not answer"), "{why}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}
