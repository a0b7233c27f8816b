//! End to end, for real: the built app under Xvfb with a private D-Bus session bus, its tray
//! (`wattbar`) read and clicked over D-Bus (StatusNotifierItem + dbusmenu), its windows
//! (`wattbar-window`, the process the tray starts for them) driven in the real webview through
//! tauri-driver and WebKitWebDriver. Power comes from a replay trace, so the numbers are known.
//!
//! Run under `xvfb-run -a dbus-run-session -- cargo test` (`make test` does).

use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The app is single-instance, and each test's clean-up ends every `wattbar` and
/// `wattbar-window` it finds: tests that launch either must not overlap.
static ONE_APP_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The windows' process; the tray is the `wattbar` beside it (src-tauri/tray, built with the
/// workspace).
const WINDOW: &str = env!("CARGO_BIN_EXE_wattbar-window");

fn tray_exe() -> PathBuf {
    let tray = Path::new(WINDOW).with_file_name("wattbar");
    assert!(
        tray.exists(),
        "{} is missing: build the workspace (cargo test --workspace does)",
        tray.display()
    );
    tray
}
const TRAY_PATH: &str = "/org/ayatana/NotificationItem/tray_icon_tray_app_wattbar";
/// Watts the replay trace plays, one a second, over and over.
const TRACE: &str = "t,watts\n0,12.5\n1,17.3\n2,31\n";
const TRACE_WATTS: [f64; 3] = [12.5, 17.3, 31.0];

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

/// A private home for one app: data, config, runtime and temp folders, and the replay trace. The
/// local API listens on port 0; the engine's lock file names where it landed.
struct Home {
    dir: tempfile::TempDir,
    /// A sysfs capture the app reads instead of the replayed trace.
    sysfs: Option<PathBuf>,
}

impl Home {
    /// Low-power auto-engage is off here, so that the 31 W trace does not switch it under tests
    /// that toggle it by hand.
    fn new() -> Home {
        Home::with(TRACE, &json!({"low_power_auto": false}))
    }

    fn with(trace: &str, prefs: &Value) -> Home {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("trace.csv"), trace).unwrap_or_else(|e| panic!("{e}"));
        for sub in ["data", "runtime", "home"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dir.path().join("data/preferences.json"), prefs.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        Home { dir, sysfs: None }
    }

    /// The app on a genuine sysfs capture (`tests/fixtures/linux/…`), read in place.
    fn on_capture(capture: &str, prefs: &Value) -> Home {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/linux")
            .join(capture);
        Home {
            sysfs: Some(root),
            ..Home::with("", prefs)
        }
    }

    /// The running app's local API, found as the windows find it; `Null` while none runs.
    fn api(&self, path: &str) -> Value {
        wattbar_client::Client::running(&self.path().join("data"))
            .ok()
            .flatten()
            .and_then(|api| api.get(path).ok())
            .unwrap_or(Value::Null)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn apply(&self, cmd: &mut Command) {
        let p = self.path();
        cmd.env("HOME", p.join("home"))
            .env("WATTBAR_DATA_DIR", p.join("data"))
            .env("XDG_DATA_HOME", p.join("xdg-data"))
            .env("XDG_CONFIG_HOME", p.join("xdg-config"))
            .env("XDG_CACHE_HOME", p.join("xdg-cache"))
            .env("XDG_RUNTIME_DIR", p.join("runtime"))
            .env("WATTBAR_API_LISTEN", "127.0.0.1:0")
            .env("TMPDIR", p);
        match &self.sysfs {
            Some(root) => cmd.env("WATTBAR_SYSFS_ROOT", root),
            None => cmd.env("WATTBAR_REPLAY", p.join("trace.csv")),
        };
        cmd.env("WATTBAR_BATCH_INTERVAL", "1s")
            // The machine's own model servers are never followed by the app under test.
            .env("WATTBAR_FIND_MODEL_SERVERS", "0")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            );
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
    gdbus_on(None, dest, path, method, args)
}

/// `gdbus call` on the session bus, or on the bus at `address`.
fn gdbus_on(
    address: Option<&str>,
    dest: &str,
    path: &str,
    method: &str,
    args: &[&str],
) -> Option<String> {
    let mut command = Command::new("gdbus");
    command.arg("call");
    match address {
        Some(a) => command.args(["--address", a]),
        None => command.arg("--session"),
    };
    let out = command
        .args(["--timeout", "2", "--dest", dest])
        .args(["--object-path", path, "--method", method, "--"])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The stand-in StatusNotifierWatcher on the test run's session bus (`tests/desktop`), started
/// once, before the first tray: with it each tray is a StatusNotifierItem, as on a desktop whose
/// tray host has one. It ends with this test binary.
fn sni_watcher() {
    static WATCHER: std::sync::OnceLock<Mutex<Child>> = std::sync::OnceLock::new();
    WATCHER.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/desktop/sni_watcher.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("the stand-in StatusNotifierWatcher: {e}"));
        assert_eq!(
            first_line(&mut child),
            "ready",
            "the stand-in watcher did not start"
        );
        Mutex::new(child)
    });
}

/// The first line `child` writes to its piped stdout, trimmed; the rest is not read.
fn first_line(child: &mut Child) -> String {
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
    }
    line.trim().to_string()
}

#[derive(Debug, Clone, PartialEq)]
struct MenuItem {
    id: u32,
    label: String,
    toggle: Option<u8>,
}

/// How the tray shows itself: a StatusNotifierItem of its own (ksni), or libappindicator's.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Sni,
    AppIndicator,
}

impl Backend {
    fn item_path(self) -> &'static str {
        match self {
            Backend::Sni => "/StatusNotifierItem",
            Backend::AppIndicator => TRAY_PATH,
        }
    }

    fn menu_path(self) -> String {
        match self {
            Backend::Sni => "/MenuBar".to_string(),
            Backend::AppIndicator => format!("{TRAY_PATH}/Menu"),
        }
    }
}

/// The app's tray as a desktop's tray host sees it.
struct Tray {
    dest: String,
    backend: Backend,
    /// The bus it is on, where not the session's.
    address: Option<String>,
}

impl Tray {
    /// The tray item of the running `wattbar`: only connections of a process running `wattbar`
    /// or the `wattbar-appindicator` it becomes are asked (the bus itself answers which process
    /// a connection is, at once).
    fn find() -> Tray {
        Tray::find_on(None)
    }

    fn find_on(address: Option<&str>) -> Tray {
        let bus = |dest: &str, path: &str, method: &str, args: &[&str]| {
            gdbus_on(address, dest, path, method, args)
        };
        wait_for(
            "the tray item on the session bus",
            Duration::from_secs(20),
            || {
                let names = bus(
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus.ListNames",
                    &[],
                )?;
                names
                    .split(['\'', ' ', ',', '[', ']', '(', ')'])
                    .filter(|n| n.starts_with(':'))
                    .filter(|n| {
                        bus(
                            "org.freedesktop.DBus",
                            "/org/freedesktop/DBus",
                            "org.freedesktop.DBus.GetConnectionUnixProcessID",
                            &[n],
                        )
                        .and_then(|out| {
                            // "(uint32 1234,)"
                            let pid: String = out
                                .split_whitespace()
                                .nth(1)?
                                .chars()
                                .filter(|c| c.is_ascii_digit())
                                .collect();
                            std::fs::read_link(format!("/proc/{pid}/exe")).ok()
                        })
                        .is_some_and(|exe| {
                            exe.ends_with("wattbar") || exe.ends_with("wattbar-appindicator")
                        })
                    })
                    .find_map(|n| {
                        [Backend::Sni, Backend::AppIndicator]
                            .into_iter()
                            .map(|backend| Tray {
                                dest: n.to_string(),
                                backend,
                                address: address.map(str::to_string),
                            })
                            .find(|t| t.id().is_some())
                    })
            },
        )
    }

    fn call(&self, path: &str, method: &str, args: &[&str]) -> Option<String> {
        gdbus_on(self.address.as_deref(), &self.dest, path, method, args)
    }

    fn property(&self, name: &str) -> Option<String> {
        self.call(
            self.backend.item_path(),
            "org.freedesktop.DBus.Properties.Get",
            &["org.kde.StatusNotifierItem", name],
        )
    }

    /// The item's `Id`, while it is on the bus.
    fn id(&self) -> Option<String> {
        let out = self.property("Id")?;
        let start = out.find("<'")? + 2;
        let end = out.rfind("'>")?;
        Some(out.get(start..end)?.to_string())
    }

    /// The icon's pixels, as the tray host would draw them: the `IconPixmap` (ARGB32, network
    /// order) of a StatusNotifierItem, or the PNG libappindicator names in `IconName`.
    fn icon(&self) -> Option<wattbar_tray::icon_render::Rgba> {
        match self.backend {
            Backend::Sni => {
                // "(<[(44, 44, [byte 0x00, 0xff, …])]>,)"
                let out = self.property("IconPixmap")?;
                let size: u32 = out.split(['(', ',']).nth(2)?.trim().parse().ok()?;
                let bytes: Vec<u8> = out
                    .split("0x")
                    .skip(1)
                    .filter_map(|b| u8::from_str_radix(b.get(..2)?, 16).ok())
                    .collect();
                if bytes.len() != (size * size * 4) as usize {
                    return None;
                }
                let pixels = bytes
                    .chunks_exact(4)
                    .flat_map(|p| [p[1], p[2], p[3], p[0]])
                    .collect();
                Some(wattbar_tray::icon_render::Rgba { size, pixels })
            }
            Backend::AppIndicator => {
                let out = self.property("IconName")?;
                let start = out.find("<'")? + 2;
                let end = out.rfind("'>")?;
                let file = std::fs::File::open(out.get(start..end)?).ok()?;
                let mut reader = png::Decoder::new(std::io::BufReader::new(file))
                    .read_info()
                    .ok()?;
                let mut buf = vec![0; reader.output_buffer_size()?];
                let info = reader.next_frame(&mut buf).ok()?;
                if info.color_type != png::ColorType::Rgba || info.width != info.height {
                    return None;
                }
                buf.truncate(info.buffer_size());
                Some(wattbar_tray::icon_render::Rgba {
                    size: info.width,
                    pixels: buf,
                })
            }
        }
    }

    /// Which of `watts` the icon shows drawn as a number (in low-power colours or not).
    fn icon_watts(&self, watts: &[f64], low_power: bool) -> Option<f64> {
        use wattbar_tray::icon_render::{icon_text, render};
        let icon = self.icon()?;
        watts
            .iter()
            .copied()
            .find(|w| render(&icon_text(Some(*w)), icon.size, low_power) == icon)
    }

    /// A left click on the icon, as the host sends it (`Activate`).
    fn activate(&self) {
        self.call(
            self.backend.item_path(),
            "org.kde.StatusNotifierItem.Activate",
            &["0", "0"],
        )
        .unwrap_or_else(|| panic!("Activate over D-Bus failed"));
    }

    fn menu(&self) -> Vec<MenuItem> {
        let out = self
            .call(
                &self.backend.menu_path(),
                "com.canonical.dbusmenu.GetLayout",
                &["0", "-1", "@as []"],
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
        self.call(
            &self.backend.menu_path(),
            "com.canonical.dbusmenu.Event",
            &[&id, "clicked", "<int32 0>", "0"],
        )
        .unwrap_or_else(|| panic!("clicking {label:?} over dbusmenu failed"));
    }

    /// Clicks "Quit". The app may end before its menu answers the click (it writes its last
    /// batch first, on the thread that answers): no reply is no failure here; each caller checks
    /// that the app quit.
    fn click_quit(&self) {
        let id = self.item("Quit").id.to_string();
        let _ = self.call(
            &self.backend.menu_path(),
            "com.canonical.dbusmenu.Event",
            &[&id, "clicked", "<int32 0>", "0"],
        );
    }
}

/// Quit from the tray's menu: the app ends with status 0.
fn quits_cleanly(tray: &Tray, app: &mut Proc) {
    tray.click_quit();
    let status = wait_for("the app to quit", Duration::from_secs(30), || {
        app.0.try_wait().ok().flatten()
    });
    assert!(status.success(), "{status:?}");
}

/// The names of the threads of process `pid`.
fn threads(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
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

/// Pids of running `wattbar` (tray) and `wattbar-window` processes.
fn apps_running() -> Vec<String> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
                .filter(|pid| {
                    matches!(
                        proc_status(pid, "Name:").as_deref(),
                        Some("wattbar" | "wattbar-appindi" | "wattbar-window")
                    )
                })
                .filter(|pid| proc_status(pid, "State:").is_some_and(|s| !s.starts_with('Z')))
                .collect()
        })
        .unwrap_or_default()
}

/// WebKit web processes whose parent is a running `wattbar-window`.
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
                == Some("wattbar-window")
        })
        .count()
}

fn launch(home: &Home, args: &[&str]) -> Proc {
    sni_watcher();
    let mut cmd = Command::new(tray_exe());
    home.apply(&mut cmd);
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Proc(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot start the tray: {e}")),
    )
}

#[test]
fn the_tray_shows_live_watts_and_the_dashboard_opens_only_on_demand() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let mut app = launch(&home, &[]);
    let tray = Tray::find();
    let web_view_loaded = |pid: u32| {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        maps.contains("libwebkit2gtk") || maps.contains("libjavascriptcoregtk")
    };
    assert!(!web_view_loaded(app.0.id()), "the tray loaded a web view");

    // Linux tray hosts drop titles: the icon itself shows the replayed watts, drawn as the
    // golden-tested renderer draws them, sample after sample.
    let mut seen = Vec::new();
    wait_for(
        "two different numbers in the icon",
        Duration::from_secs(30),
        || {
            let w = tray.icon_watts(&TRACE_WATTS, false)?;
            if !seen.contains(&w) {
                seen.push(w);
            }
            (seen.len() >= 2).then_some(())
        },
    );
    assert_eq!(
        tray.backend,
        Backend::Sni,
        "a watcher runs: the tray is its own item"
    );
    // No toolkit was started: GTK's own threads (GLib's main context, its D-Bus worker) run
    // only once GTK is.
    let names = threads(app.0.id());
    assert!(
        !names.iter().any(|t| t == "gmain" || t == "gdbus"),
        "{names:?}"
    );

    let menu = tray.menu();
    let labels: Vec<&str> = menu.iter().map(|i| i.label.as_str()).collect();
    assert!(
        labels
            .iter()
            .any(|l| l.ends_with(" W · measured · replay · whole machine")),
        "{labels:?}"
    );
    assert!(
        labels.iter().any(|l| l.starts_with("Session ")),
        "{labels:?}"
    );
    assert!(labels.iter().any(|l| l.starts_with("Today ")), "{labels:?}");
    // The replayed trace has no CPU domain: no program has a share yet, and the line says so
    // rather than naming one at 0 W.
    assert!(labels.contains(&"Top: —"), "{labels:?}");
    for wanted in [
        "Low-power mode",
        "Reset session",
        "Open dashboard",
        "Preferences…",
        "Quit",
    ] {
        assert!(labels.contains(&wanted), "{wanted} missing from {labels:?}");
    }
    assert_eq!(tray.item("Low-power mode").toggle, Some(0));
    write_menu_picture(&tray, "tray-menu.png");

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
        Duration::from_secs(30),
        || session_line().starts_with("Session 0.00 Wh").then_some(()),
    );

    // No window at start-up; a second launch hands over to the first, which opens it.
    assert!(!visible_dashboard(), "a window is open at start-up");
    let mut second = Command::new(tray_exe());
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
    // The window is a process of its own: its web view is there, the tray's memory holds none.
    wait_for(
        "the dashboard's web process",
        Duration::from_secs(30),
        || (web_processes_of_the_app() > 0).then_some(()),
    );
    assert!(!web_view_loaded(app.0.id()), "the tray loaded a web view");
    // A launch that names the preferences opens them beside the dashboard.
    let mut third = Command::new(tray_exe());
    home.apply(&mut third);
    let status = third
        .arg("--open-preferences")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    wait_for("the preferences window", Duration::from_secs(15), || {
        Command::new("xdotool")
            .args(["search", "--onlyvisible", "--name", "^Wattbar Preferences$"])
            .output()
            .ok()
            .filter(|o| o.status.success())
    });

    // Quit ends the app cleanly, its windows with it.
    quits_cleanly(&tray, &mut app);
    wait_for("the windows to close", Duration::from_secs(30), || {
        apps_running().is_empty().then_some(())
    });

    // SIGTERM (logout, kill) writes the batch still in memory before exiting 0. With a
    // one-minute batch, only that final write can have put this run's energy on disk.
    let before = stored_lifetime_joules(&home);
    let mut cmd = Command::new(tray_exe());
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
        Duration::from_secs(30),
        || app.0.try_wait().ok().flatten(),
    );
    assert!(status.success(), "{status:?}");
    assert!(
        stored_lifetime_joules(&home) > before,
        "the last batch was lost"
    );
}

/// The last low-power change in the app's ledger: on or off, and why.
fn stored_low_power(home: &Home) -> Option<(bool, String)> {
    let db = home.path().join("data/wattbar.db");
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT enabled, reason FROM low_power ORDER BY id DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .ok()
}

fn e2e_dir() -> std::io::Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The tray menu as the D-Bus menu gives it, drawn as text into a PNG (no tray host draws
/// menus under Xvfb): what a person would read, line by line.
fn write_menu_picture(tray: &Tray, name: &str) {
    let lines: Vec<String> = tray
        .menu()
        .into_iter()
        .filter(|i| i.id != 0)
        .map(|i| match i.toggle {
            Some(1) => format!("[x] {}", i.label),
            Some(_) => format!("[ ] {}", i.label),
            None if i.label.is_empty() => "────────────────────────".to_string(),
            None => format!("    {}", i.label),
        })
        .collect();
    let Ok(dir) = e2e_dir() else { return };
    let text = dir.join(format!("{name}.txt"));
    if std::fs::write(&text, lines.join("\n")).is_err() {
        return;
    }
    let _ = Command::new("convert")
        .args([
            "-background",
            "#2b2b30",
            "-fill",
            "#f2f2f2",
            "-font",
            "DejaVu-Sans",
        ])
        .args([
            "-pointsize",
            "15",
            "-border",
            "12",
            "-bordercolor",
            "#2b2b30",
        ])
        .arg(format!("label:{}", lines.join("\n").replace('%', "%%")))
        .arg(dir.join(name))
        .status();
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
        "SELECT COALESCE(SUM(joules), 0) FROM lifetime_scopes",
        [],
        |r| r.get(0),
    )
    .unwrap_or(0.0)
}

/// A tauri-driver on ports of its own, with the app's environment.
struct Driver {
    _proc: Proc,
    base: String,
}

/// Whatever happened in the test, no app outlives its driver: a lingering instance would take
/// the next test's launch (the app is single-instance).
impl Drop for Driver {
    fn drop(&mut self) {
        for pid in apps_running() {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The process listening on a loopback `port`, where one is.
fn listener(port: u16) -> Option<u32> {
    wattbar_sources::linux::listener::find_listener(Path::new("/"), port)
        .ok()
        .flatten()
}

/// A process's parent, from `/proc/PID/stat` (the fields after the name in parentheses).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Driver {
    fn start(home: &Home) -> Driver {
        Driver::start_with(home, &[])
    }

    /// tauri-driver on two ports that were free a moment ago (it forwards to WebKitWebDriver on
    /// the second, so neither can be port 0), each proved its own before use: the process
    /// listening on the first is this driver, on the second its WebKitWebDriver. Connecting alone
    /// would talk to whatever took a port meanwhile; a driver that lost a port is started again
    /// on two others.
    fn start_with(home: &Home, env: &[(&str, &str)]) -> Driver {
        for _ in 0..5 {
            let port = free_port();
            let native = free_port();
            let mut cmd = Command::new("tauri-driver");
            home.apply(&mut cmd);
            cmd.envs(env.iter().copied());
            cmd.args([
                "--port",
                &port.to_string(),
                "--native-port",
                &native.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            let mut proc =
                Proc(cmd.spawn().unwrap_or_else(|e| {
                    panic!("cannot start tauri-driver ({e}): run scripts/setup")
                }));
            let driver = proc.0.id();
            // tauri-driver listens at once but forwards each request to WebKitWebDriver, which it
            // starts beside itself; until that one listens, a forwarded POST /session is dropped
            // and the client reads "Unexpected EOF". Its first start on a fresh machine (cold
            // caches) is the slow one.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if listener(port) == Some(driver)
                    && listener(native).is_some_and(|pid| parent(pid) == Some(driver))
                {
                    return Driver {
                        _proc: proc,
                        base: format!("http://127.0.0.1:{port}"),
                    };
                }
                if proc.0.try_wait().ok().flatten().is_some() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "tauri-driver and WebKitWebDriver did not listen on {port} and {native} in 60 s"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        panic!("tauri-driver exited five times before it listened")
    }

    fn session(&self, args: &[&str]) -> Session {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "wry",
            "tauri:options": {"application": WINDOW, "args": args}
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

/// WebDriver's client: its errors come back as answers, with their bodies. A new session starts
/// the app and its WebKit, which on a loaded 2-core machine was seen to take over a minute: the
/// timeout only guards against a hang.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(180)))
        .http_status_as_error(false)
        .build()
        .into()
}

fn post(url: &str, body: &Value) -> Value {
    match agent().post(url).send_json(body) {
        Ok(mut r) if r.status().as_u16() < 400 => r.body_mut().read_json().unwrap_or(Value::Null),
        Ok(mut r) => panic!(
            "POST {url} → {}: {}",
            r.status(),
            r.body_mut().read_to_string().unwrap_or_default()
        ),
        Err(e) => panic!("POST {url}: {e}"),
    }
}

/// One WebDriver session: one run of the app with its dashboard open.
struct Session {
    url: String,
}

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Session {
    /// Waits for the page's `data-ready`; a start-up failure the page reports fails at once.
    fn wait_ready(&self) {
        wait_for("the page to load", Duration::from_secs(20), || {
            let failed = self.js("return document.body.dataset.failed");
            assert!(failed.is_null(), "the page failed to start: {failed}");
            (self.js("return document.body.dataset.ready").as_str() == Some("true")).then_some(())
        });
    }

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
            .and_then(|mut r| {
                r.body_mut()
                    .with_config()
                    .limit(64 << 20)
                    .read_json::<Value>()
                    .ok()
            })
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

    /// Ends the session, and with it the app: a lingering instance would take the next
    /// launch's place (the app is single-instance).
    fn end(self) {
        let _ = agent().delete(&self.url).call();
        wait_for("the app to exit", Duration::from_secs(30), || {
            let running = apps_running();
            for pid in &running {
                let _ = Command::new("kill").args(["-TERM", pid]).status();
            }
            running.is_empty().then_some(())
        });
    }
}

#[test]
fn the_dashboard_shows_live_watts_prices_cost_and_follows_the_tray() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let driver = Driver::start(&home);
    let _tray = launch(&home, &[]);
    let ui = driver.session(&["--open-dashboard"]);
    ui.wait_ready();

    // Live watts with quality and source, changing between samples.
    let first = wait_for("watts", Duration::from_secs(30), || {
        let w = ui.text("watts");
        (w != "—").then_some(w)
    });
    let second = wait_for("the watts to change", Duration::from_secs(30), || {
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
    for chart in ["spark-watts", "spark-kwh", "spark-cost", "history-chart"] {
        let canvases = ui.js(&format!(
            "return document.querySelectorAll('#{chart} canvas').length"
        ));
        assert_eq!(canvases, 1, "{chart} has no uPlot canvas");
    }

    // Bad prices are refused with a message and the old price stays.
    assert_eq!(ui.number("price-value"), 0.3);
    for bad in ["-1", "", "abc"] {
        ui.type_into("#price-input", bad);
        ui.js("document.getElementById('price-message').textContent = ''; return 0");
        ui.click("#price-save");
        let msg = wait_for("a refusal", Duration::from_secs(30), || {
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
    wait_for("the new price", Duration::from_secs(30), || {
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
    let (kwh1, cost1) = wait_for("energy to accrue", Duration::from_secs(30), || {
        let (k, c) = read();
        (k > kwh0 + 1e-6).then_some((k, c))
    });
    let rate = (cost1 - cost0) / (kwh1 - kwh0);
    assert!(
        (rate - 2.0).abs() < 1e-6,
        "cost grew at {rate} per kWh, not 2"
    );
    // Money as the page's locale writes euros: "€0.0012", "0,0012 €".
    let cost = ui.text("session-cost");
    assert!(
        cost.contains('€') && cost.chars().any(|c| c.is_ascii_digit()),
        "{cost}"
    );

    // The ledger feeds today's totals and the history tabs.
    wait_for(
        "a stored batch in today's total",
        Duration::from_secs(30),
        || (ui.number("today-kwh") > 0.0).then_some(()),
    );
    for tab in ["#tab-24h", "#tab-30d", "#tab-1h"] {
        wait_for("history points", Duration::from_secs(30), || {
            ui.click(tab);
            std::thread::sleep(Duration::from_millis(200));
            (ui.number("history-points") >= 1.0 && ui.number("history-kwh") > 0.0).then_some(())
        });
        let selected = ui.js(&format!(
            "return document.querySelector('{tab}').getAttribute('aria-selected')"
        ));
        assert_eq!(selected, "true", "{tab}");
    }

    // Save report: the ledger's SVG report, into the home folder while no Downloads folder is
    // configured (as `xdg-user-dir` answers), then into the one user-dirs.dirs names.
    let home_dir = home.path().join("home");
    let saved = |what: &str, folder: &Path| {
        ui.click("#save-report");
        let status = wait_for(what, Duration::from_secs(20), || {
            let s = ui.text("report-status");
            assert!(!s.starts_with("no report"), "{s}");
            s.strip_prefix("saved: ")
                .filter(|p| Path::new(p).parent() == Some(folder))
                .map(str::to_string)
        });
        let svg = std::fs::read_to_string(&status).unwrap_or_else(|e| panic!("{status}: {e}"));
        assert!(
            svg.contains("<svg") && svg.contains("power (W)") && svg.contains("energy (kWh)"),
            "{status} is not the report"
        );
        let name = Path::new(&status)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        assert!(
            name.starts_with("wattbar-report-") && name.ends_with(".svg"),
            "{name}"
        );
    };
    saved("the report in the home folder", &home_dir);
    let config = home.path().join("xdg-config");
    std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        config.join("user-dirs.dirs"),
        "XDG_DOWNLOAD_DIR=\"$HOME/Fetched\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    saved("the report in Downloads", &home_dir.join("Fetched"));

    // Reset session: the session starts again from zero; today and lifetime keep their energy.
    let (session_before, lifetime_before) = (ui.number("session-kwh"), ui.number("lifetime-kwh"));
    assert!(session_before > 0.0);
    ui.click("#reset-session");
    assert_eq!(ui.text("reset-session"), "Click again to reset");
    ui.click("#reset-session");
    wait_for("the session to restart", Duration::from_secs(30), || {
        (ui.number("session-kwh") < session_before / 2.0).then_some(())
    });
    wait_for("lifetime to keep counting", Duration::from_secs(30), || {
        (ui.number("lifetime-kwh") >= lifetime_before).then_some(())
    });

    // The tray and the dashboard share one low-power state, and the store keeps it.
    let tray = Tray::find();
    tray.click("Low-power mode");
    wait_for(
        "the dashboard to follow the tray",
        Duration::from_secs(30),
        || (ui.js("return document.getElementById('low-power').checked") == true).then_some(()),
    );
    assert_eq!(stored_low_power(&home), Some((true, "manual".to_string())));
    wait_for("the tray's own tick", Duration::from_secs(30), || {
        (tray.item("Low-power mode").toggle == Some(1)).then_some(())
    });
    assert!(
        ui.text("low-power-status")
            .starts_with("On · switched by hand"),
        "{}",
        ui.text("low-power-status")
    );
    assert!(ui.text("recommendation").contains("qwen3:1b"));
    wait_for(
        "the icon's low-power colours",
        Duration::from_secs(30),
        || tray.icon_watts(&TRACE_WATTS, true),
    );
    ui.js("window.scrollTo(0, 0); return 0");
    ui.screenshot("dashboard.png");
    ui.click("#low-power");
    wait_for(
        "the tray to follow the dashboard",
        Duration::from_secs(30),
        || (tray.item("Low-power mode").toggle == Some(0)).then_some(()),
    );
    assert_eq!(stored_low_power(&home), Some((false, "manual".to_string())));
    tray.click("Low-power mode");
    wait_for("low power on again", Duration::from_secs(30), || {
        (stored_low_power(&home) == Some((true, "manual".to_string()))).then_some(())
    });

    // Closing the dashboard destroys its web process and leaves the tray running.
    assert!(web_processes_of_the_app() > 0);
    ui.press_ctrl_w();
    wait_for("the window to go", Duration::from_secs(30), || {
        (!visible_dashboard() && web_processes_of_the_app() == 0).then_some(())
    });
    let before = tray.menu();
    wait_for("the menu to keep updating", Duration::from_secs(30), || {
        (tray.menu() != before).then_some(())
    });

    // The tray's "Open dashboard" creates it again.
    tray.click("Open dashboard");
    wait_for("the dashboard to reopen", Duration::from_secs(15), || {
        (visible_dashboard() && web_processes_of_the_app() > 0).then_some(())
    });
    tray.click_quit();
    wait_for("the app to quit", Duration::from_secs(30), || {
        tray.id().is_none().then_some(())
    });
    ui.end();

    // A restart keeps the price and the low-power state.
    let _tray = launch(&home, &[]);
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

/// A notification server for the test (dunst, on the test's X display) and a D-Bus monitor
/// that records every Notify call on the session bus.
struct Notifications {
    _server: Proc,
    monitor: Proc,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Notifications {
    fn start() -> Notifications {
        let server = Proc(
            Command::new("dunst")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("dunst is needed (scripts/setup installs it): {e}")),
        );
        wait_for("a notification server", Duration::from_secs(30), || {
            gdbus(
                "org.freedesktop.Notifications",
                "/org/freedesktop/Notifications",
                "org.freedesktop.Notifications.GetServerInformation",
                &[],
            )
        });
        let mut monitor = Command::new("dbus-monitor")
            .args([
                "--session",
                "type='method_call',interface='org.freedesktop.Notifications',member='Notify'",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("dbus-monitor: {e}"));
        let stdout = monitor.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        Notifications {
            _server: server,
            monitor: Proc(monitor),
            lines,
        }
    }

    /// The `string "…"` arguments of Notify calls seen so far that mention low-power mode.
    fn low_power_bodies(&self, seen: &mut Vec<String>) {
        for line in self.lines.try_iter() {
            let line = line.trim();
            if let Some(s) = line.strip_prefix("string \"") {
                let s = s.trim_end_matches('"').to_string();
                if s.starts_with("Low-power mode") {
                    seen.push(s);
                }
            }
        }
        let _ = &self.monitor;
    }
}

#[test]
fn sustained_draw_engages_low_power_everywhere_once_and_a_manual_choice_stays() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // 40 W for 12 s, then 5 W for a minute: above 15 W for 3 s engages, below 12 W for 3 s
    // releases.
    let home = Home::with(
        "t,watts\n0,40\n12,5\n72,5\n",
        &json!({
            "low_power_threshold_w": 15,
            "low_power_engage_after_s": 3,
            "low_power_release_after_s": 3,
        }),
    );
    let notifications = Notifications::start();
    let driver = Driver::start(&home);
    let _tray = launch(&home, &[]);
    let ui = driver.session(&["--open-dashboard"]);
    ui.wait_ready();
    let tray = Tray::find();
    let mut posted = Vec::new();
    wait_for("auto-engage in the tray", Duration::from_secs(15), || {
        (tray.item("Low-power mode").toggle == Some(1)).then_some(())
    });
    wait_for(
        "auto-engage in the dashboard",
        Duration::from_secs(30),
        || {
            let status = ui.js("const s = document.getElementById('low-power-status'); return [document.getElementById('low-power').checked, s.dataset.reason, s.textContent]");
            (status[0] == true && status[1] == "auto-threshold").then_some(())
        },
    );
    assert!(
        ui.text("low-power-status")
            .starts_with("On · automatic, from the power draw"),
        "{}",
        ui.text("low-power-status")
    );
    assert_eq!(
        stored_low_power(&home),
        Some((true, "auto-threshold".to_string()))
    );
    let lp = home.api("/v1/low-power");
    assert_eq!(lp["enabled"], true, "{lp}");
    assert_eq!(lp["reason"], "auto-threshold");
    assert_eq!(lp["recommended_model"], "qwen3:1b");
    wait_for("one notification", Duration::from_secs(30), || {
        notifications.low_power_bodies(&mut posted);
        (!posted.is_empty()).then_some(())
    });
    assert_eq!(posted, ["Low-power mode on: above 15 W for 3 s"]);
    wait_for(
        "the icon in low-power colours",
        Duration::from_secs(30),
        || tray.icon_watts(&[40.0], true),
    );

    // The trace falls to 5 W at t = 8 s: released 3 s later, with its own notification.
    wait_for("auto-release", Duration::from_secs(15), || {
        (tray.item("Low-power mode").toggle == Some(0)).then_some(())
    });
    wait_for(
        "auto-release in the dashboard",
        Duration::from_secs(30),
        || (ui.js("return document.getElementById('low-power').checked") == false).then_some(()),
    );
    assert_eq!(
        stored_low_power(&home),
        Some((false, "auto-threshold".to_string()))
    );
    wait_for("the release notification", Duration::from_secs(30), || {
        notifications.low_power_bodies(&mut posted);
        (posted.len() == 2).then_some(())
    });
    assert_eq!(posted[1], "Low-power mode off: below 12 W for 3 s");

    // A manual engage survives the low trace.
    tray.click("Low-power mode");
    wait_for("manual engage", Duration::from_secs(30), || {
        (stored_low_power(&home) == Some((true, "manual".to_string()))).then_some(())
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(tray.item("Low-power mode").toggle, Some(1));
    assert_eq!(home.api("/v1/low-power")["enabled"], true);
    notifications.low_power_bodies(&mut posted);
    assert_eq!(posted.len(), 3, "{posted:?}");
    assert_eq!(
        ui.js("return document.getElementById('low-power-status').dataset.reason"),
        "manual"
    );
    write_menu_picture(&tray, "tray-menu-low-power.png");
    tray.click_quit();
    wait_for("the app to quit", Duration::from_secs(30), || {
        apps_running().is_empty().then_some(())
    });
}

#[test]
fn preferences_validate_inline_and_change_the_cost_live() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A steady 3600 W: one watt-hour a second, so cost grows fast enough to measure its rate.
    let home = Home::with(
        "t,watts\n0,3600\n",
        &json!({"low_power_auto": false, "low_power_threshold_w": 15}),
    );
    let driver = Driver::start(&home);
    let _tray = launch(&home, &[]);
    let ui = driver.session(&["--open-preferences"]);
    wait_for("the preferences to load", Duration::from_secs(20), || {
        (ui.js("return document.body.dataset.ready").as_str() == Some("true")).then_some(())
    });
    assert_eq!(
        ui.js("return document.getElementById('price_per_kwh').value"),
        "0.3"
    );
    // As typing then leaving the field does: one change event with the whole text.
    let change = |id: &str, text: &str| {
        ui.js(&format!(
            "document.getElementById('msg-{id}').textContent = '';\
             const e = document.getElementById('{id}'); e.value = {text:?};\
             e.dispatchEvent(new Event('change')); return 0"
        ));
    };
    let message = |id: &str| {
        wait_for("a message", Duration::from_secs(30), || {
            let m = ui.text(&format!("msg-{id}"));
            (!m.is_empty()).then_some(m)
        })
    };

    // Bad values: the message sits by the field, the field is marked, nothing is stored.
    change("price_per_kwh", "abc");
    assert_eq!(message("price_per_kwh"), "\"abc\" is not a number");
    assert_eq!(
        ui.js("return document.getElementById('price_per_kwh').getAttribute('aria-invalid')"),
        "true"
    );
    change("low_power_hysteresis_w", "20");
    assert_eq!(
        message("low_power_hysteresis_w"),
        "20 W must be at least 0 and below the threshold (15 W)"
    );
    change("interval_ms", "50");
    assert_eq!(message("interval_ms"), "50 ms is outside 100 ms – 60 s");
    let stored = home.stored();
    for key in ["price_per_kwh", "low_power_hysteresis_w", "interval_ms"] {
        assert_eq!(stored.get(key), None, "{key} was stored: {stored}");
    }
    ui.screenshot("preferences-error.png");

    // A price of 2 per kWh applies at once: the cost grows at 2 per kWh.
    let rate = || {
        let a = home.api("/v1/snapshot");
        std::thread::sleep(Duration::from_millis(2500));
        let b = home.api("/v1/snapshot");
        let dk =
            b["session_kwh"].as_f64().unwrap_or(0.0) - a["session_kwh"].as_f64().unwrap_or(0.0);
        let dc =
            b["session_cost"].as_f64().unwrap_or(0.0) - a["session_cost"].as_f64().unwrap_or(0.0);
        dc / dk
    };
    change("price_per_kwh", "2");
    assert_eq!(message("price_per_kwh"), "Saved");
    assert_eq!(home.stored()["price_per_kwh"], 2.0);
    let r = rate();
    assert!((r - 2.0).abs() < 1e-6, "cost grew at {r} per kWh, not 2");

    // A tariff over the whole week at 5 per kWh overrides it.
    ui.click("#add-tariff");
    wait_for("the tariff row", Duration::from_secs(30), || {
        (ui.js("return document.querySelectorAll('#tariff-rows tr').length") == 1).then_some(())
    });
    ui.js(
        "const row = document.querySelector('#tariff-rows tr');         row.querySelectorAll('.days input').forEach(b => { if (!b.checked) b.click(); });         const [from, to, price] = row.querySelectorAll('td:not(.days) input');         from.value = '00:00'; from.dispatchEvent(new Event('change'));         to.value = '24:00'; to.dispatchEvent(new Event('change'));         price.value = '5'; price.dispatchEvent(new Event('change')); return 0",
    );
    wait_for("the tariff to be stored", Duration::from_secs(30), || {
        let t = home.stored()["tariffs"].clone();
        (t[0]["price"] == 5.0 && t[0]["weekdays"].as_array().map(Vec::len) == Some(7)).then_some(())
    });
    let r = rate();
    assert!((r - 5.0).abs() < 1e-6, "cost grew at {r} per kWh, not 5");

    // Launch at login writes the autostart entry, and removes it again. (The auto-launch crate
    // writes to ~/.config/autostart whatever XDG_CONFIG_HOME says; HOME is the test's own.)
    let entry = home.path().join("home/.config/autostart/Wattbar.desktop");
    ui.click("#launch_at_login");
    wait_for("the autostart entry", Duration::from_secs(30), || {
        entry.exists().then_some(())
    });
    // The entry is made first; the preference is stored once the engine has taken it.
    wait_for(
        "launch at login to be stored",
        Duration::from_secs(30),
        || (home.stored()["launch_at_login"] == true).then_some(()),
    );
    ui.screenshot("preferences.png");
    ui.click("#launch_at_login");
    wait_for("the autostart entry to go", Duration::from_secs(30), || {
        (!entry.exists()).then_some(())
    });
    // The same preference changed through the local API, not the window: the app follows the
    // engine's published copy and writes the entry all the same.
    let token = std::fs::read_to_string(home.path().join("data/api-token"))
        .unwrap_or_else(|e| panic!("the API token: {e}"));
    let answer = wattbar_client::Client::running(&home.path().join("data"))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no engine's API in the lock file"))
        .with_token(token.trim())
        .put("/v1/preferences/launch_at_login", &json!(true))
        .unwrap_or_else(|e| panic!("PUT launch_at_login: {e}"));
    assert_eq!(answer["launch_at_login"], true, "{answer}");
    wait_for(
        "the autostart entry, asked through the API",
        Duration::from_secs(30),
        || entry.exists().then_some(()),
    );
    assert_eq!(home.stored()["launch_at_login"], true);
    ui.end();
}

#[test]
fn the_dashboard_follows_a_dark_desktop() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let driver = Driver::start_with(&home, &[("GTK_THEME", "Adwaita:dark")]);
    let _tray = launch(&home, &[]);
    let ui = driver.session(&["--open-dashboard"]);
    ui.wait_ready();
    assert_eq!(
        ui.js("return matchMedia('(prefers-color-scheme: dark)').matches"),
        true
    );
    let bg = ui.js("return getComputedStyle(document.body).backgroundColor");
    assert_eq!(bg, "rgb(23, 23, 26)", "the dark palette's background");
    wait_for("watts", Duration::from_secs(30), || {
        (ui.text("watts") != "—").then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    ui.screenshot("dashboard-dark.png");
    ui.end();
}

#[test]
fn the_windows_without_a_running_tray_say_so_and_exit() {
    // Another test's clean-up ends every wattbar-window it finds: not this one's while it waits.
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let mut cmd = Command::new(WINDOW);
    home.apply(&mut cmd);
    let out = cmd
        .arg("--open-dashboard")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Wattbar is not running") && err.contains("start `wattbar`"),
        "{err}"
    );
}

/// The dashboard opened again the moment the last window quits: the single-instance name is
/// still on the bus, and the window holding it leaves without taking the launch's arguments.
/// The launch starts again in its place instead of failing.
#[test]
fn a_window_opened_as_the_last_one_leaves_starts_in_its_place() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let mut app = launch(&home, &[]);
    let tray = Tray::find();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/desktop/leaving_instance.py");
    let mut leaving = Proc(
        Command::new("/usr/bin/python3")
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("the leaving window: {e}")),
    );
    assert_eq!(first_line(&mut leaving.0), "ready");

    let mut cmd = Command::new(WINDOW);
    home.apply(&mut cmd);
    let mut window = Proc(
        cmd.arg("--open-dashboard")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    // Asked, it left without answering: only being asked ends it.
    let left = wait_for(
        "the leaving window to be asked",
        Duration::from_secs(30),
        || leaving.0.try_wait().ok().flatten(),
    );
    assert!(left.success(), "{left:?}");
    wait_for("the dashboard", Duration::from_secs(60), || {
        visible_dashboard().then_some(())
    });
    assert!(
        window.0.try_wait().ok().flatten().is_none(),
        "the window ended"
    );

    quits_cleanly(&tray, &mut app);
    let ended = wait_for(
        "the window to go with the tray",
        Duration::from_secs(30),
        || window.0.try_wait().ok().flatten(),
    );
    let mut said = String::new();
    if let Some(mut err) = window.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut said);
    }
    assert!(ended.success(), "{ended:?}: {said}");
    assert!(said.contains("starting again (2 of 5)"), "{said}");
    assert!(!said.contains("cannot start"), "{said}");
}

#[test]
fn a_second_engine_without_an_api_keeps_the_tray_from_starting_with_its_pid() {
    // Another test's clean-up ends every wattbar it finds: not this one's while it runs.
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let cli = Path::new(WINDOW).with_file_name("wattbar-cli");
    let mut watch = Command::new(&cli);
    home.apply(&mut watch);
    let watch = Proc(
        watch
            .args(["watch", "--interval", "1s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", cli.display())),
    );
    let lock = home.path().join("data/engine.lock");
    wait_for(
        "wattbar-cli watch to hold the data folder",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(&lock)
                .ok()
                .filter(|t| t.contains(&format!("pid={}", watch.0.id())))
        },
    );
    let mut tray = Command::new(tray_exe());
    home.apply(&mut tray);
    let out = tray.output().unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("another Wattbar engine (pid {})", watch.0.id()))
            && err.contains("serves no API"),
        "{err}"
    );
}

#[test]
fn a_display_that_cannot_be_opened_is_said_not_a_panic() {
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(WINDOW)
        .env("WATTBAR_DATA_DIR", dir.path())
        .env("XDG_DATA_HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path())
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("DISPLAY", ":4242")
        .env("XAUTHORITY", dir.path().join("no-such-authority"))
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cannot open a window on the display (:4242)"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "{said}");
}

#[test]
fn version_and_help_print_and_exit_with_no_engine_started_and_unknown_flags_are_refused() {
    // The one version line every program prints: the workspace's version and the commit, which
    // the CLI's own test holds to the checkout's HEAD.
    let version = wattbar_release::LONG_VERSION;
    assert!(version.starts_with(env!("CARGO_PKG_VERSION")), "{version}");
    for exe in [tray_exe(), PathBuf::from(WINDOW)] {
        let name = exe.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let home = Home::new();
        let run = |args: &[&str]| {
            let mut cmd = Command::new(&exe);
            home.apply(&mut cmd);
            cmd.args(args).output().unwrap_or_else(|e| panic!("{e}"))
        };
        let out = run(&["--version"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} --version: {out:?}");
        assert_eq!(said.trim(), format!("{name} {version}"), "{name} --version");
        let out = run(&["--help"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} --help: {out:?}");
        assert!(
            said.contains("Usage:") && said.contains("--open-preferences"),
            "{name} --help: {said}"
        );
        let out = run(&["--bogus"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} --bogus: {out:?}");
        assert!(
            err.contains("--bogus") && err.contains("Usage:"),
            "{name} --bogus: {err}"
        );
        // No engine started: nothing was written where one keeps its lock, ledger and token.
        for folder in ["data", "runtime"] {
            let left: Vec<String> = std::fs::read_dir(home.path().join(folder))
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            let left: Vec<&String> = left.iter().filter(|f| *f != "preferences.json").collect();
            assert!(left.is_empty(), "{name} wrote {left:?} into {folder}");
        }
    }
}

/// A folder served over HTTP on loopback by Python's own server; the server and its URL.
fn http_folder(dir: &Path) -> (Proc, String) {
    use std::io::BufRead;
    let mut child = Command::new("python3")
        .args([
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
    let port = line
        .split(" port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line:?}"));
    (Proc(child), format!("http://127.0.0.1:{port}"))
}

#[test]
fn the_about_line_says_when_a_newer_signed_release_is_out() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let site = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (body, key) = wattbar_release::update::sign(
        &[5; 32],
        r#"{"version": "99.1.0", "released": "2027-02-01", "expires": "2100-01-01"}"#,
    );
    std::fs::write(site.path().join("latest.json"), body).unwrap_or_else(|e| panic!("{e}"));
    let (_server, url) = http_folder(site.path());
    let home = Home::with(
        TRACE,
        &json!({"low_power_auto": false, "update_manifest_url": format!("{url}/latest.json")}),
    );
    let mut cmd = Command::new(tray_exe());
    home.apply(&mut cmd);
    cmd.env("WATTBAR_UPDATE_TEST_KEY", key)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let _app = Proc(cmd.spawn().unwrap_or_else(|e| panic!("{e}")));
    let tray = Tray::find();
    let line = wait_for("the About line", Duration::from_secs(20), || {
        let line = tray.item_starting("Wattbar ");
        line.contains(" is out ").then_some(line)
    });
    assert_eq!(
        line,
        format!(
            "Wattbar 99.1.0 is out (this is {}): a new build from source: git pull && make release",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn a_left_click_on_the_tray_icon_opens_the_dashboard() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let home = Home::new();
    let mut app = launch(&home, &[]);
    let tray = Tray::find();
    assert_eq!(tray.backend, Backend::Sni);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", app.0.id()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !maps.contains("libgtk-3"),
        "the StatusNotifierItem mapped GTK"
    );
    assert!(!visible_dashboard());
    tray.activate();
    wait_for("the dashboard to open", Duration::from_secs(30), || {
        (visible_dashboard() && web_processes_of_the_app() > 0).then_some(())
    });
    quits_cleanly(&tray, &mut app);
    wait_for("the windows to close", Duration::from_secs(30), || {
        apps_running().is_empty().then_some(())
    });
}

#[test]
fn the_tray_shows_a_thinkpads_battery_health_and_what_running_on_it_wears() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The LGC 45N1153 capture, discharging at power_now 15.453 W: energy_full 67.49 Wh ÷
    // energy_full_design 99.46 Wh = 67.86 %, and a cycle_count of 0, which is not a count.
    // Its energy is the battery's: priced at 200 EUR ÷ (1,000 cycles × 0.09946 kWh) = 2.011
    // EUR a kWh of wear, and nothing for the grid.
    let home = Home::on_capture(
        "power_supply/thinkpad-lgc-45n1153-discharging-power",
        &json!({"low_power_auto": false, "battery_price": 200.0, "currency": "EUR"}),
    );
    let mut app = launch(&home, &[]);
    let tray = Tray::find();
    let battery = wait_for("the battery line", Duration::from_secs(30), || {
        Some(tray.item_starting("Battery ")).filter(|l| !l.is_empty())
    });
    assert_eq!(battery, "Battery 68 % health · cycles not reported");
    // 36 J (3 s at 15.5 W) is the first hundredth of a watt-hour the line can show.
    let session = wait_for("the battery's share", Duration::from_secs(30), || {
        Some(tray.item_starting("Session "))
            .filter(|l| l.contains(" · on battery ") && !l.contains("on battery 0.00 Wh"))
    });
    assert!(session.starts_with("Session "), "{session}");
    assert!(session.contains(" · 0.0000 EUR · on battery "), "{session}");
    assert!(session.ends_with(" EUR"), "{session}");
    let now = tray.item_starting("15.5 W");
    assert_eq!(now, "15.5 W · measured · power-supply · whole machine");
    write_menu_picture(&tray, "tray-menu-battery.png");
    quits_cleanly(&tray, &mut app);
}

/// A session bus of this test's own, with no StatusNotifierWatcher on it.
#[path = "desktop/private_bus.rs"]
mod private_bus;
use private_bus::PrivateBus;
#[path = "desktop/profiles_daemon.rs"]
mod profiles_daemon;

#[test]
fn the_tray_puts_back_the_power_profile_a_killed_sweep_left_and_says_so() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A sweep (pid 4242) was killed at power-saver; its journal says the profile was balanced.
    let bus = PrivateBus::start();
    let mut daemon = profiles_daemon::Daemon::start_at(
        &bus,
        Path::new(env!("CARGO_MANIFEST_DIR")),
        "power-saver",
    );
    let home = Home::new();
    let journal = home.dir.path().join("data/knobs.json");
    std::fs::write(
        &journal,
        r#"{"knob":"powermode","original":"balanced","pid":4242,"since":1765000000.0}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    sni_watcher();
    let mut cmd = Command::new(tray_exe());
    home.apply(&mut cmd);
    cmd.env("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut app = Proc(cmd.spawn().unwrap_or_else(|e| panic!("the tray: {e}")));
    daemon.wait_for("set balanced", Duration::from_secs(30));
    let tray = Tray::find();
    assert!(!journal.exists(), "the journal outlived its restore");
    quits_cleanly(&tray, &mut app);
    let mut log = String::new();
    if let Some(mut err) = app.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut log);
    }
    assert!(
        log.contains(
            "the power profile is back to balanced (power-saver before): a sweep (pid 4242) \
             ended without putting it back"
        ),
        "{log}"
    );
    assert_eq!(daemon.all_sets(), ["balanced"]);
}

#[test]
fn without_a_status_notifier_watcher_the_tray_falls_back_to_libappindicator() {
    require_desktop();
    let _one = ONE_APP_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bus = PrivateBus::start();
    let home = Home::new();
    let mut cmd = Command::new(tray_exe());
    home.apply(&mut cmd);
    cmd.env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut app = Proc(cmd.spawn().unwrap_or_else(|e| panic!("the tray: {e}")));
    let tray = Tray::find_on(Some(&bus.address));
    assert_eq!(tray.backend, Backend::AppIndicator);
    // The process started as `wattbar` is now the fallback program, started from beside it.
    let exe =
        std::fs::read_link(format!("/proc/{}/exe", app.0.id())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exe, tray_exe().with_file_name("wattbar-appindicator"));
    wait_for("a number in the icon", Duration::from_secs(30), || {
        tray.icon_watts(&TRACE_WATTS, false)
    });
    let labels: Vec<String> = tray.menu().into_iter().map(|i| i.label).collect();
    for wanted in ["Low-power mode", "Open dashboard", "Quit"] {
        assert!(labels.iter().any(|l| l == wanted), "{wanted} in {labels:?}");
    }
    quits_cleanly(&tray, &mut app);
    let mut log = String::new();
    if let Some(mut err) = app.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut log);
    }
    assert!(
        log.contains("the tray uses libappindicator: no StatusNotifierItem can be shown"),
        "{log}"
    );
}
