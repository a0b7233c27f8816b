//! The Wattbar tray: the engine, the tray icon and its menu, notifications, launch at login, the
//! local API and the inference proxy, in one process with no web view.
//!
//! The dashboard and preferences windows are a process of their own (`wattbar-window`, the Tauri
//! app), started when a window is asked for and ended when its last window closes. An idle tray
//! therefore never loads WebKit, JavaScriptCore, GL or what they pull in. The windows talk to this
//! engine through its local API, which the tray always serves on loopback: where the preferences
//! switch the API off, on a port of the system's choosing that only the lock file names.
//!
//! Threads: the toolkit's event loop on the main thread draws the tray and takes its clicks; a
//! small tokio runtime serves the API and the proxy and follows the engine's published state
//! (notifications, launch at login), waking the event loop at most once a second to redraw.

mod autostart;
mod format;
pub mod icon_render;
mod menu;
mod notify;
mod serve;
mod tray;
mod windows;

use menu::MenuId;
use std::sync::Arc;
use std::time::Duration;
use tao::event::{Event, StartCause};
use tao::event_loop::{ControlFlow, EventLoopBuilder, EventLoopProxy};
use wattbar_engine::{
    build_chain, ChainOptions, Command, EngineConfig, EngineHandle, EngineReader,
};

/// How often the ledger is written (`WATTBAR_BATCH_INTERVAL`, e.g. `1s`; default 5 s).
const BATCH_ENV: &str = "WATTBAR_BATCH_INTERVAL";
/// Command-line flag: open the dashboard once started (a second launch opens it anyway).
pub const OPEN_DASHBOARD_FLAG: &str = "--open-dashboard";
/// Command-line flag: open the preferences once started, or in the running tray.
pub const OPEN_PREFERENCES_FLAG: &str = "--open-preferences";
/// The tray refreshes at most this often.
const REFRESH_PERIOD: Duration = Duration::from_secs(1);

/// What wakes the event loop.
#[derive(Debug)]
enum Wake {
    /// The engine published a state worth showing.
    State,
    /// A menu item was clicked.
    Menu(String),
    /// The engine has stopped (Quit, SIGTERM): leave.
    Exit,
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs the tray until the user quits; returns the process's exit status.
pub fn run() -> std::process::ExitCode {
    init_tracing();
    // The tray draws through GTK but never through GL; GTK 3 would still open GL on X11 to pick
    // visuals, loading Mesa (and LLVM, in software). A value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("GDK_GL").is_none() {
        std::env::set_var("GDK_GL", "disable");
    }
    match start() {
        Ok(Started::Tray(app)) => app.run(),
        Ok(Started::HandedOver) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wattbar: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

enum Started {
    Tray(App),
    /// Another tray records into this data folder: its dashboard was asked for instead.
    HandedOver,
}

struct App {
    runtime: tokio::runtime::Runtime,
    engine: Arc<EngineHandle>,
}

fn start() -> Result<Started, Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("wattbar-io")
        .enable_all()
        .build()?;
    let prefs_path = wattbar_engine::paths::preferences_path()?;
    // A value the schema refuses keeps its default and stays in the file as written.
    let (prefs, problems) = wattbar_engine::prefs_file::load(&prefs_path)?;
    for problem in problems {
        tracing::warn!("stored preference refused, default used: {problem}");
    }
    let data_dir = wattbar_engine::paths::data_dir()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let asked = |flag: &str| args.iter().any(|a| a == flag);
    if wattbar_engine::lock::EngineLock::holder(&data_dir).is_some() {
        // A second launch (from a menu, say) shows the running tray's dashboard, or the
        // preferences it names.
        windows::open(if asked(OPEN_PREFERENCES_FLAG) {
            windows::Window::Preferences
        } else {
            windows::Window::Dashboard
        })?;
        return Ok(Started::HandedOver);
    }
    let api = runtime.block_on(serve::bind_api(prefs.api_enabled))?;
    let db_path = wattbar_engine::paths::database_path()?;
    let mut config = EngineConfig::new(prefs.clone()).with_store(db_path.clone());
    if let Some(batch) = std::env::var(BATCH_ENV)
        .ok()
        .and_then(|v| wattbar_core::prefs::parse_duration(&v).ok())
    {
        config.batch_interval = batch;
    }
    config.advice_file = wattbar_engine::paths::advice_path().ok();
    config.preferences_file = Some(prefs_path);
    config.api = Some(api.local_addr()?.to_string());
    let chain = build_chain(&ChainOptions::from_env())?;
    // A second engine on the same data folder (`wattbar-cli serve`, say) is refused with who
    // holds it: the tray says so and stops rather than count the machine twice.
    let engine = runtime.block_on(async { wattbar_engine::spawn(chain, config) })?;
    runtime.spawn(serve::api(api, engine.reader(), db_path));
    if prefs.llm_proxy_enabled {
        runtime.spawn(serve::llm_proxy(engine.reader(), prefs.clone()));
    }
    for (flag, window) in [
        (OPEN_DASHBOARD_FLAG, windows::Window::Dashboard),
        (OPEN_PREFERENCES_FLAG, windows::Window::Preferences),
    ] {
        if asked(flag) {
            report(windows::open(window));
        }
    }
    Ok(Started::Tray(App {
        runtime,
        engine: Arc::new(engine),
    }))
}

impl App {
    fn run(self) -> std::process::ExitCode {
        let event_loop = EventLoopBuilder::<Wake>::with_user_event().build();
        let proxy = event_loop.create_proxy();
        {
            let proxy = std::sync::Mutex::new(proxy.clone());
            muda::MenuEvent::set_event_handler(Some(move |event: muda::MenuEvent| {
                let proxy = proxy.lock().unwrap_or_else(|e| e.into_inner());
                let _ = proxy.send_event(Wake::Menu(event.id.0));
            }));
        }
        self.runtime
            .spawn(follow(self.engine.reader(), proxy.clone()));
        #[cfg(unix)]
        self.runtime
            .spawn(on_terminate(Arc::clone(&self.engine), proxy.clone()));

        let App { runtime, engine } = self;
        let mut shown: Option<tray::Tray> = None;
        event_loop.run(move |event, _, control_flow| {
            *control_flow = ControlFlow::Wait;
            match event {
                // macOS wants the icon made once the loop runs; the same place suits Linux.
                Event::NewEvents(StartCause::Init) => match tray::Tray::build() {
                    Ok(mut t) => {
                        t.show(&engine.current());
                        shown = Some(t);
                    }
                    Err(e) => {
                        eprintln!("wattbar: cannot show the tray icon: {e}");
                        runtime.block_on(engine.shutdown());
                        *control_flow = ControlFlow::ExitWithCode(1);
                    }
                },
                Event::UserEvent(Wake::State) => {
                    if let Some(t) = shown.as_mut() {
                        t.show(&engine.current());
                    }
                }
                Event::UserEvent(Wake::Menu(id)) => match MenuId::parse(&id) {
                    Some(MenuId::Quit) => {
                        runtime.block_on(engine.shutdown());
                        *control_flow = ControlFlow::ExitWithCode(0);
                    }
                    Some(id) => {
                        if id == MenuId::LowPower {
                            if let Some(t) = shown.as_mut() {
                                t.low_power_clicked();
                            }
                        }
                        // The engine publishes what the click changed, which redraws.
                        clicked(&engine, id);
                    }
                    None => {}
                },
                Event::UserEvent(Wake::Exit) => *control_flow = ControlFlow::ExitWithCode(0),
                _ => {}
            }
        })
    }
}

/// What a click on an item asks for.
fn clicked(engine: &EngineHandle, id: MenuId) {
    let sent = match id {
        MenuId::LowPower => {
            let on = engine.current().low_power.enabled;
            engine.send(Command::SetLowPower(!on))
        }
        MenuId::ResetSession => engine.send(Command::ResetSession),
        MenuId::OpenDashboard => {
            return report(windows::open(windows::Window::Dashboard));
        }
        MenuId::Preferences => {
            return report(windows::open(windows::Window::Preferences));
        }
        MenuId::Now | MenuId::Session | MenuId::Today | MenuId::LastAnswer | MenuId::Quit => return,
    };
    if let Err(e) = sent {
        tracing::warn!("the engine did not take the click: {e}");
    }
}

fn report(opened: Result<(), windows::WindowError>) {
    if let Err(e) = opened {
        tracing::warn!("{e}");
    }
}

/// Follows the engine's published state: notifications and launch at login here, off the event
/// loop; the tray is woken to redraw at most once a [`REFRESH_PERIOD`], except for a change of
/// low-power mode (a click), which is shown at once. Nothing is lost by coalescing: each redraw
/// shows the latest state.
async fn follow(engine: EngineReader, proxy: EventLoopProxy<Wake>) {
    let mut rx = engine.subscribe();
    let mut alerts_seen = 0;
    let mut low_power_seen = rx.borrow().low_power_seq;
    let mut entry = autostart::Entry::default();
    let mut shown_at = tokio::time::Instant::now();
    loop {
        let published = rx.borrow_and_update().clone();
        if published.alert_seq > alerts_seen {
            alerts_seen = published.alert_seq;
            notify::budget(&published.alerts);
        }
        let urgent = published.low_power_seq != low_power_seen;
        if urgent {
            low_power_seen = published.low_power_seq;
            if let Some(message) = &published.low_power_event {
                notify::low_power(message);
            }
        }
        // Only a change touches the system's entry (a file), so this stays on the runtime.
        if let Err(message) = entry.follow(published.prefs.launch_at_login) {
            tracing::warn!("{message}");
        }
        // Samples a second apart arrive a hair early or late: no timer of its own unless the
        // engine runs clearly faster than the refresh, as while it measures a request.
        if !urgent && shown_at.elapsed() < REFRESH_PERIOD.mul_f64(0.9) {
            tokio::time::sleep_until(shown_at + REFRESH_PERIOD).await;
        }
        shown_at = tokio::time::Instant::now();
        if proxy.send_event(Wake::State).is_err() || rx.changed().await.is_err() {
            break;
        }
    }
}

/// A logout or `kill` sends SIGTERM: write the last batch, then exit cleanly.
#[cfg(unix)]
async fn on_terminate(engine: Arc<EngineHandle>, proxy: EventLoopProxy<Wake>) {
    use tokio::signal::unix::{signal, SignalKind};
    if let Ok(mut term) = signal(SignalKind::terminate()) {
        term.recv().await;
        engine.shutdown().await;
        let _ = proxy.send_event(Wake::Exit);
    }
}
