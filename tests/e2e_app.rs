//! End to end, for real: the built app under Xvfb with a private D-Bus session bus, its tray read
//! and clicked over D-Bus (StatusNotifierItem + dbusmenu), its dashboard driven in the real
//! webview through tauri-driver and WebKitWebDriver. Power comes from a replay trace, so the
//! numbers are known.
//!
//! Run under `xvfb-run -a dbus-run-session -- cargo test` (`make test` does).

use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The app is single-instance: tests that launch it must not overlap.
static ONE_APP_AT_A_TIME: Mutex<()> = Mutex::new(());

const APP: &str = env!("CARGO_BIN_EXE_wattbar");
const TRAY_PATH: &str = "/org/ayatana/NotificationItem/tray_icon_tray_app_wattbar";
/// Watts the replay trace plays, one a second, and how the tray prints them.
const TRACE: &str = "t,watts\n0,12.5\n1,17.3\n2,31\n";
const TRACE_TITLES: [&str; 3] = ["12.5 W", "17.3 W", "31.0 W"];

fn require_desktop() {
    for var in ["DISPLAY", "DBUS_SESSION_BUS_ADDRESS"] {
        assert!(
            std::env::var_os(var).is_some(),
            "{var} is not set: run the end-to-end tests under `xvfb-run -a dbus-run-session -- cargo test` (make test does)"
        );
    }
}

fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A private home for one app: data, config and temp folders, and the replay trace.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("trace.csv"), TRACE).unwrap_or_else(|e| panic!("{e}"));
        Home { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn apply(&self, cmd: &mut Command) {
        let p = self.path();
        cmd.env("WATTBAR_DATA_DIR", p.join("data"))
            .env("XDG_DATA_HOME", p.join("xdg-data"))
            .env("XDG_CONFIG_HOME", p.join("xdg-config"))
            .env("XDG_CACHE_HOME", p.join("xdg-cache"))
            .env("TMPDIR", p)
            .env("WATTBAR_REPLAY", p.join("trace.csv"))
            .env("WATTBAR_BATCH_INTERVAL", "1s")
            .env("RUST_LOG", "warn");
    }

    fn stored(&self) -> Value {
        std::fs::read_to_string(self.path().join("data/preferences.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    }
}

/// Kills the child when the test ends, pass or fail.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn gdbus(dest: &str, path: &str, method: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("gdbus")
        .args(["call", "--session", "--timeout", "2", "--dest", dest])
        .args(["--object-path", path, "--method", method, "--"])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[derive(Debug, Clone, PartialEq)]
struct MenuItem {
    id: u32,
    label: String,
    toggle: Option<u8>,
}

/// The app's tray as a desktop's tray host sees it.
struct Tray {
    dest: String,
}

impl Tray {
    fn find() -> Tray {
        wait_for(
            "the tray item on the session bus",
            Duration::from_secs(20),
            || {
                let names = gdbus(
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.ListNames",
                    &[],
                )?;
                names
                    .split(['\'', ' ', ',', '[', ']', '(', ')'])
                    .filter(|n| n.starts_with(':'))
                    .find(|n| {
                        let t = Tray {
                            dest: n.to_string(),
                        };
                        t.label().is_some()
                    })
                    .map(|n| Tray {
                        dest: n.to_string(),
                    })
            },
        )
    }

    /// The tray title (`XAyatanaLabel`).
    fn label(&self) -> Option<String> {
        let out = gdbus(
            &self.dest,
            TRAY_PATH,
            "org.freedesktop.DBus.Properties.Get",
            &["org.kde.StatusNotifierItem", "XAyatanaLabel"],
        )?;
        let start = out.find("<'")? + 2;
        let end = out.rfind("'>")?;
        Some(out.get(start..end)?.to_string())
    }

    fn menu(&self) -> Vec<MenuItem> {
        let out = gdbus(
            &self.dest,
            &format!("{TRAY_PATH}/Menu"),
            "com.canonical.dbusmenu.GetLayout",
            &["0", "-1", "[]"],
        )
        .unwrap_or_default();
        out.split("<(")
            .skip(1)
            .filter_map(|item| {
                let id = item.split(',').next()?.trim().parse().ok()?;
                let label = item
                    .split("'label': <'")
                    .nth(1)
                    .and_then(|l| l.split("'>").next())
                    .unwrap_or("")
                    .to_string();
                let toggle = item
                    .split("'toggle-state': <")
                    .nth(1)
                    .and_then(|t| t.split('>').next())
                    .and_then(|t| t.parse().ok());
                Some(MenuItem { id, label, toggle })
            })
            .collect()
    }

    fn item(&self, label: &str) -> MenuItem {
        let menu = self.menu();
        menu.iter()
            .find(|i| i.label == label)
            .cloned()
            .unwrap_or_else(|| panic!("no menu item {label:?} in {menu:?}"))
    }

    fn item_starting(&self, prefix: &str) -> String {
        self.menu()
            .into_iter()
            .find(|i| i.label.starts_with(prefix))
            .map(|i| i.label)
            .unwrap_or_default()
    }

    fn click(&self, label: &str) {
        let id = self.item(label).id.to_string();
        gdbus(
            &self.dest,
            &format!("{TRAY_PATH}/Menu"),
            "com.canonical.dbusmenu.Event",
            &[&id, "clicked", "<int32 0>", "0"],
        )
        .unwrap_or_else(|| panic!("clicking {label:?} over dbusmenu failed"));
    }
}

fn visible_dashboard() -> bool {
    Command::new("xdotool")
        .args(["search", "--onlyvisible", "--name", "^Wattbar$"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Field `key` of `/proc/<pid>/status`.
fn proc_status(pid: &str, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

/// WebKit web processes whose parent is a running `wattbar`.
fn web_processes_of_the_app() -> usize {
    let pids: Vec<String> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
                .collect()
        })
        .unwrap_or_default();
    pids.iter()
        .filter(|pid| proc_status(pid, "Name:").as_deref() == Some("WebKitWebProces"))
        .filter(|pid| {
            proc_status(pid, "PPid:")
                .and_then(|ppid| proc_status(&ppid, "Name:"))
                .as_deref()
                == Some("wattbar")
        })
        .count()
}

fn launch(home: &Home, args: &[&str]) -> Proc {
    let mut cmd = Command::new(APP);
    home.apply(&mut cmd);
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Proc(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot start {APP}: {e}")),
    )
}

#[test]
fn the_tray_shows_live_watts_and_the_dashboard_opens_only_on_demand() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let mut app = launch(&home, &[]);
    let tray = Tray::find();

    // The title follows the replayed watts, sample after sample.
    let mut seen = Vec::new();
    wait_for("two different titles", Duration::from_secs(10), || {
        let label = tray.label()?;
        assert!(TRACE_TITLES.contains(&label.as_str()), "title {label:?}");
        if !seen.contains(&label) {
            seen.push(label);
        }
        (seen.len() >= 2).then_some(())
    });

    let menu = tray.menu();
    let labels: Vec<&str> = menu.iter().map(|i| i.label.as_str()).collect();
    assert!(
        labels.iter().any(|l| l.ends_with(" W · measured · replay")),
        "{labels:?}"
    );
    assert!(
        labels.iter().any(|l| l.starts_with("Session ")),
        "{labels:?}"
    );
    for wanted in ["Low-power mode", "Reset session", "Open dashboard", "Quit"] {
        assert!(labels.contains(&wanted), "{wanted} missing from {labels:?}");
    }
    assert_eq!(tray.item("Low-power mode").toggle, Some(0));

    // "Reset session" starts the session's energy again from zero.
    let session_line = || tray.item_starting("Session ");
    wait_for(
        "session energy in the menu",
        Duration::from_secs(15),
        || (!session_line().starts_with("Session 0.00 Wh")).then_some(()),
    );
    tray.click("Reset session");
    wait_for(
        "the session line to restart",
        Duration::from_secs(5),
        || session_line().starts_with("Session 0.00 Wh").then_some(()),
    );

    // No window at start-up; a second launch hands over to the first, which opens it.
    assert!(!visible_dashboard(), "a window is open at start-up");
    let mut second = Command::new(APP);
    home.apply(&mut second);
    let status = second
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    wait_for("the dashboard window", Duration::from_secs(15), || {
        visible_dashboard().then_some(())
    });
    assert!(
        app.0.try_wait().ok().flatten().is_none(),
        "the first instance died"
    );

    // Quit ends the app cleanly.
    tray.click("Quit");
    let status = wait_for("the app to quit", Duration::from_secs(10), || {
        app.0.try_wait().ok().flatten()
    });
    assert!(status.success(), "{status:?}");

    // SIGTERM (logout, kill) writes the batch still in memory before exiting 0. With a
    // one-minute batch, only that final write can have put this run's energy on disk.
    let before = stored_lifetime_joules(&home);
    let mut cmd = Command::new(APP);
    home.apply(&mut cmd);
    cmd.env("WATTBAR_BATCH_INTERVAL", "60s")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut app = Proc(cmd.spawn().unwrap_or_else(|e| panic!("{e}")));
    let tray = Tray::find();
    wait_for(
        "energy in the session line",
        Duration::from_secs(15),
        || {
            let line = tray.item_starting("Session ");
            (!line.starts_with("Session 0.00 Wh")).then_some(())
        },
    );
    assert_eq!(
        stored_lifetime_joules(&home),
        before,
        "written before the batch was due"
    );
    let term = Command::new("kill")
        .args(["-TERM", &app.0.id().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(term.success());
    let status = wait_for(
        "the app to exit on SIGTERM",
        Duration::from_secs(10),
        || app.0.try_wait().ok().flatten(),
    );
    assert!(status.success(), "{status:?}");
    assert!(
        stored_lifetime_joules(&home) > before,
        "the last batch was lost"
    );
}

/// Lifetime joules in the app's ledger, read the way `wattbar-cli totals` would.
fn stored_lifetime_joules(home: &Home) -> f64 {
    let db = home.path().join("data/wattbar.db");
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0.0;
    };
    conn.query_row(
        "SELECT COALESCE(SUM(joules), 0) FROM lifetime WHERE domain = 'system'",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0.0)
}

/// A tauri-driver on free ports, with the app's environment.
struct Driver {
    _proc: Proc,
    base: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

impl Driver {
    fn start(home: &Home) -> Driver {
        let port = free_port();
        let native = free_port();
        let mut cmd = Command::new("tauri-driver");
        home.apply(&mut cmd);
        cmd.args([
            "--port",
            &port.to_string(),
            "--native-port",
            &native.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let proc = Proc(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("cannot start tauri-driver ({e}): run scripts/setup")),
        );
        let base = format!("http://127.0.0.1:{port}");
        wait_for("tauri-driver to listen", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        Driver { _proc: proc, base }
    }

    fn session(&self, args: &[&str]) -> Session {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "wry",
            "tauri:options": {"application": APP, "args": args}
        }}});
        let reply = post(&format!("{}/session", self.base), &caps);
        let id = reply["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {reply}"))
            .to_string();
        Session {
            url: format!("{}/session/{id}", self.base),
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

fn post(url: &str, body: &Value) -> Value {
    match agent().post(url).send_json(body) {
        Ok(r) => r.into_json().unwrap_or(Value::Null),
        Err(ureq::Error::Status(code, r)) => {
            panic!(
                "POST {url} → {code}: {}",
                r.into_string().unwrap_or_default()
            )
        }
        Err(e) => panic!("POST {url}: {e}"),
    }
}

/// One WebDriver session: one run of the app with its dashboard open.
struct Session {
    url: String,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Session {
    fn js(&self, script: &str) -> Value {
        post(
            &format!("{}/execute/sync", self.url),
            &json!({"script": script, "args": []}),
        )["value"]
            .clone()
    }

    fn element(&self, css: &str) -> String {
        let v = post(
            &format!("{}/element", self.url),
            &json!({"using": "css selector", "value": css}),
        );
        v["value"][ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    fn click(&self, css: &str) {
        let el = self.element(css);
        post(&format!("{}/element/{el}/click", self.url), &json!({}));
    }

    fn type_into(&self, css: &str, text: &str) {
        let el = self.element(css);
        post(&format!("{}/element/{el}/clear", self.url), &json!({}));
        if !text.is_empty() {
            post(
                &format!("{}/element/{el}/value", self.url),
                &json!({"text": text}),
            );
        }
    }

    fn text(&self, id: &str) -> String {
        self.js(&format!(
            "return document.getElementById('{id}').textContent"
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    fn number(&self, id: &str) -> f64 {
        self.js(&format!(
            "return Number(document.getElementById('{id}').dataset.value)"
        ))
        .as_f64()
        .unwrap_or(f64::NAN)
    }

    fn screenshot(&self, name: &str) {
        use base64::Engine;
        let v = agent()
            .get(&format!("{}/screenshot", self.url))
            .call()
            .ok()
            .and_then(|r| r.into_json::<Value>().ok())
            .unwrap_or(Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v["value"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("screenshot: {e}"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join(name), png).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Presses Ctrl+W in the page, as a person closing the dashboard would.
    fn press_ctrl_w(&self) {
        let body = self.element("body");
        let _ = agent()
            .post(&format!("{}/element/{body}/value", self.url))
            .send_json(json!({"text": "\u{E009}w\u{E000}"}));
    }

    fn end(self) {
        let _ = agent().delete(&self.url).call();
    }
}

#[test]
fn the_dashboard_shows_live_watts_prices_cost_and_follows_the_tray() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let driver = Driver::start(&home);
    let ui = driver.session(&["--open-dashboard"]);
    wait_for("the dashboard to load", Duration::from_secs(20), || {
        (ui.js("return document.body.dataset.ready").as_str() == Some("true")).then_some(())
    });

    // Live watts with quality and source, changing between samples.
    let first = wait_for("watts", Duration::from_secs(5), || {
        let w = ui.text("watts");
        (w != "—").then_some(w)
    });
    let second = wait_for("the watts to change", Duration::from_secs(5), || {
        let w = ui.text("watts");
        (w != first).then_some(w)
    });
    for w in [&first, &second] {
        assert!(["12.5", "17.3", "31.0"].contains(&w.as_str()), "{w}");
    }
    assert_eq!(ui.text("quality"), "measured");
    assert_eq!(ui.text("source"), "replay");
    let breakdown = ui.js(
        "return [...document.querySelectorAll('#breakdown-rows tr')].map(r => r.innerText.replace(/\\s+/g, ' ').trim())",
    );
    let rows = breakdown.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{breakdown}");
    let row = rows[0].as_str().unwrap_or_default();
    assert!(
        row.starts_with("system ") && row.ends_with(" W measured · replay"),
        "{row}"
    );
    let spark = ui.js("return document.getElementById('spark-line').getAttribute('d')");
    assert!(
        spark.as_str().is_some_and(|d| d.starts_with('M')),
        "{spark}"
    );

    // Bad prices are refused with a message and the old price stays.
    assert_eq!(ui.number("price-value"), 0.3);
    for bad in ["-1", "", "abc"] {
        ui.type_into("#price-input", bad);
        ui.js("document.getElementById('price-message').textContent = ''; return 0");
        ui.click("#price-save");
        let msg = wait_for("a refusal", Duration::from_secs(5), || {
            let m = ui.text("price-message");
            (!m.is_empty()).then_some(m)
        });
        assert!(msg.starts_with("Not saved. price:"), "{bad:?} → {msg}");
        assert_eq!(
            ui.js("return document.getElementById('price-message').dataset.kind"),
            "error"
        );
        assert_eq!(ui.number("price-value"), 0.3);
    }
    assert_eq!(home.stored().get("price_per_kwh"), None);

    // A good price is saved and the cost uses it from then on.
    ui.type_into("#price-input", "2");
    ui.click("#price-save");
    wait_for("the new price", Duration::from_secs(5), || {
        (ui.number("price-value") == 2.0).then_some(())
    });
    assert_eq!(home.stored()["price_per_kwh"], 2.0);
    let read = || {
        let v = ui.js(
            "return [Number(document.getElementById('session-kwh').dataset.value),\
                     Number(document.getElementById('session-cost').dataset.value)]",
        );
        (
            v[0].as_f64().unwrap_or(f64::NAN),
            v[1].as_f64().unwrap_or(f64::NAN),
        )
    };
    let (kwh0, cost0) = read();
    let (kwh1, cost1) = wait_for("energy to accrue", Duration::from_secs(10), || {
        let (k, c) = read();
        (k > kwh0 + 1e-6).then_some((k, c))
    });
    let rate = (cost1 - cost0) / (kwh1 - kwh0);
    assert!(
        (rate - 2.0).abs() < 1e-6,
        "cost grew at {rate} per kWh, not 2"
    );
    assert!(ui.text("session-cost").ends_with(" EUR"));

    // The ledger feeds today's totals and the history tabs.
    wait_for(
        "a stored batch in today's total",
        Duration::from_secs(10),
        || (ui.number("today-kwh") > 0.0).then_some(()),
    );
    for tab in ["#tab-24h", "#tab-30d", "#tab-1h"] {
        wait_for("history points", Duration::from_secs(10), || {
            ui.click(tab);
            std::thread::sleep(Duration::from_millis(200));
            (ui.number("history-points") >= 1.0 && ui.number("history-kwh") > 0.0).then_some(())
        });
        let selected = ui.js(&format!(
            "return document.querySelector('{tab}').getAttribute('aria-selected')"
        ));
        assert_eq!(selected, "true", "{tab}");
        let line = ui.js("return document.getElementById('history-line').getAttribute('d')");
        assert!(
            line.as_str().is_some_and(|d| d.starts_with('M')),
            "{tab}: {line}"
        );
    }

    // Reset session: the session starts again from zero; today and lifetime keep their energy.
    let (session_before, lifetime_before) = (ui.number("session-kwh"), ui.number("lifetime-kwh"));
    assert!(session_before > 0.0);
    ui.click("#reset-session");
    assert_eq!(ui.text("reset-session"), "Click again to reset");
    ui.click("#reset-session");
    wait_for("the session to restart", Duration::from_secs(5), || {
        (ui.number("session-kwh") < session_before / 2.0).then_some(())
    });
    wait_for("lifetime to keep counting", Duration::from_secs(10), || {
        (ui.number("lifetime-kwh") >= lifetime_before).then_some(())
    });

    // The tray and the dashboard share one low-power state, and the store keeps it.
    let tray = Tray::find();
    assert!(TRACE_TITLES.contains(&tray.label().unwrap_or_default().as_str()));
    tray.click("Low-power mode");
    wait_for(
        "the dashboard to follow the tray",
        Duration::from_secs(5),
        || (ui.js("return document.getElementById('low-power').checked") == true).then_some(()),
    );
    assert_eq!(home.stored()["low_power"], true);
    assert_eq!(tray.item("Low-power mode").toggle, Some(1));
    ui.screenshot("dashboard.png");
    ui.click("#low-power");
    wait_for(
        "the tray to follow the dashboard",
        Duration::from_secs(5),
        || (tray.item("Low-power mode").toggle == Some(0)).then_some(()),
    );
    assert_eq!(home.stored()["low_power"], false);
    tray.click("Low-power mode");
    wait_for("low power on again", Duration::from_secs(5), || {
        (home.stored()["low_power"] == true).then_some(())
    });

    // Closing the dashboard destroys its web process and leaves the tray running.
    assert!(web_processes_of_the_app() > 0);
    ui.press_ctrl_w();
    wait_for("the window to go", Duration::from_secs(10), || {
        (!visible_dashboard() && web_processes_of_the_app() == 0).then_some(())
    });
    let before = tray.label();
    wait_for("the title to keep updating", Duration::from_secs(5), || {
        (tray.label() != before).then_some(())
    });

    // The tray's "Open dashboard" creates it again.
    tray.click("Open dashboard");
    wait_for("the dashboard to reopen", Duration::from_secs(15), || {
        (visible_dashboard() && web_processes_of_the_app() > 0).then_some(())
    });
    tray.click("Quit");
    wait_for("the app to quit", Duration::from_secs(10), || {
        tray.label().is_none().then_some(())
    });
    ui.end();

    // A restart keeps the price and the low-power state.
    let ui = driver.session(&["--open-dashboard"]);
    wait_for(
        "the dashboard to load again",
        Duration::from_secs(20),
        || (ui.js("return document.body.dataset.ready").as_str() == Some("true")).then_some(()),
    );
    assert_eq!(ui.number("price-value"), 2.0);
    assert_eq!(
        ui.js("return document.getElementById('price-input').value"),
        "2"
    );
    assert_eq!(
        ui.js("return document.getElementById('low-power').checked"),
        true
    );
    ui.end();
}
