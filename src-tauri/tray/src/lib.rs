//! The Wattbar tray: the engine, the tray icon and its menu, notifications, launch at login, the
//! local API and the inference proxy, in one process with no web view.
//!
//! The dashboard and preferences windows are a process of their own (`wattbar-window`, the Tauri
//! app), started when a window is asked for and ended when its last window closes. An idle tray
//! therefore never loads WebKit, JavaScriptCore, GL or what they pull in. The windows talk to this
//! engine through its local API, which the tray always serves on loopback: where the preferences
//! switch the API off, on a port of the system's choosing that only the lock file names.
//!
//! Threads: a small tokio runtime serves the API and the proxy and runs the tray's one deciding
//! task ([`brain`]): it follows the engine's published state at most once a second and its
//! low-power events as they happen, takes the clicks, posts the notifications, follows the
//! launch-at-login preference and decides what the tray shows ([`display`]). The main thread is
//! woken only to draw what changed, which at rest is once every few seconds, not every sample.
//! At 10 Hz the tray still shows the latest state once a second, so nothing is lost.
//!
//! The icon: on Linux a StatusNotifierItem of the tray's own ([`sni`], over D-Bus from the same
//! runtime), so no toolkit is started, wherever a StatusNotifierWatcher answers (KDE, GNOME's
//! AppIndicator extension, waybar, …); without one, libappindicator on GTK's event loop, and the
//! log says which. On macOS the status bar, through `tray-icon` on the toolkit's event loop.

mod about;
mod autostart;
mod brain;
mod display;
mod format;
pub mod icon_render;
mod menu;
mod notify;
mod serve;
#[cfg(target_os = "linux")]
mod sni;
mod tray;
#[cfg(target_os = "linux")]
pub mod trim;
mod windows;

use menu::MenuId;
use std::sync::Arc;
use tao::event::{Event, StartCause};
use tao::event_loop::{ControlFlow, EventLoopBuilder};
use wattbar_engine::{build_chain, ChainOptions, EngineConfig, EngineHandle};

/// How often the ledger is written (`WATTBAR_BATCH_INTERVAL`, e.g. `1s`; default 10 s).
const BATCH_ENV: &str = "WATTBAR_BATCH_INTERVAL";
/// The tray's command line. `--help` and `--version` print and exit, and a flag it does not know
/// is refused with the usage, before any engine, lock or folder is touched.
#[derive(clap::Parser, Debug)]
#[command(
    name = "wattbar",
    version = wattbar_release::LONG_VERSION,
    about = "Wattbar in the tray: the watts the machine draws now, its energy and cost"
)]
struct Launch {
    /// Open the dashboard once started (a second launch opens it in the running tray)
    #[arg(long)]
    open_dashboard: bool,
    /// Open the preferences once started, or in the running tray
    #[arg(long)]
    open_preferences: bool,
}
/// What wakes the event loop.
#[derive(Debug)]
enum Wake {
    /// What the tray shows changed.
    Show(Box<display::Shown>),
    /// A menu item was clicked.
    Menu(String),
    /// The About line changed.
    About(String),
    /// Quit was chosen in the StatusNotifierItem's menu: write the last batch, then leave.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Quit,
    /// The engine has stopped (Quit, SIGTERM): leave.
    Exit,
}

/// Runs the tray until the user quits; returns the process's exit status. On Linux the tray is
/// a StatusNotifierItem, and where the desktop has no StatusNotifierWatcher this program becomes
/// `wattbar-appindicator` (exec, before any engine starts), so no GTK is linked into this one.
pub fn run() -> std::process::ExitCode {
    let launch = begin();
    #[cfg(target_os = "linux")]
    return status_notifier_tray(&launch);
    #[cfg(not(target_os = "linux"))]
    toolkit_tray(&launch)
}

/// The toolkit's tray (`tray-icon`: libappindicator on Linux, the status bar on macOS) on its
/// event loop: `wattbar-appindicator`'s whole program on Linux, the tray itself on macOS.
pub fn run_toolkit() -> std::process::ExitCode {
    toolkit_tray(&begin())
}

fn begin() -> Launch {
    let launch = <Launch as clap::Parser>::parse();
    wattbar_engine::logging::init("info");
    launch
}

fn failed(e: &dyn std::fmt::Display) -> std::process::ExitCode {
    eprintln!("wattbar: {e}");
    std::process::ExitCode::FAILURE
}

fn toolkit_tray(launch: &Launch) -> std::process::ExitCode {
    // The tray draws through GTK but never through GL; GTK 3 would still open GL on X11 to pick
    // visuals, loading Mesa (and LLVM, in software). A value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("GDK_GL").is_none() {
        std::env::set_var("GDK_GL", "disable");
    }
    let started = io_runtime().map_err(Into::into).and_then(|runtime| {
        if hand_over(launch)? {
            return Ok(None);
        }
        start(launch, runtime).map(Some)
    });
    match started {
        Ok(Some(app)) => app.run_toolkit(),
        Ok(None) => std::process::ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

/// The tray as a StatusNotifierItem ([`sni`]): the item is registered before the engine starts,
/// so a desktop without a watcher hands over to `wattbar-appindicator` having counted nothing.
#[cfg(target_os = "linux")]
fn status_notifier_tray(launch: &Launch) -> std::process::ExitCode {
    let runtime = match io_runtime() {
        Ok(r) => r,
        Err(e) => return failed(&e),
    };
    match hand_over(launch) {
        Ok(true) => return std::process::ExitCode::SUCCESS,
        Ok(false) => {}
        Err(e) => return failed(&e),
    }
    let (post, posted) = std::sync::mpsc::channel::<Wake>();
    let (tell, told) = tokio::sync::mpsc::unbounded_channel();
    let quit = post.clone();
    let started = runtime.block_on(sni::start(tell.clone(), move || {
        let _ = quit.send(Wake::Quit);
    }));
    let item = match started {
        Ok(item) => item,
        Err(why) => {
            tracing::info!(
                "the tray uses libappindicator: no StatusNotifierItem can be shown ({why})"
            );
            drop(runtime);
            return failed(&become_fallback());
        }
    };
    tracing::info!("the tray is a StatusNotifierItem (ksni): no GTK in this process");
    match start(launch, runtime) {
        Ok(app) => app.run_sni(
            item,
            Channels {
                post,
                posted,
                tell,
                told,
            },
        ),
        Err(e) => failed(&e),
    }
}

/// The program beside this one that shows the tray through libappindicator.
#[cfg(target_os = "linux")]
pub const FALLBACK_PROGRAM: &str = "wattbar-appindicator";

/// Replaces this process with [`FALLBACK_PROGRAM`] from the same folder, with the same
/// arguments, and returns only why it could not.
#[cfg(target_os = "linux")]
fn become_fallback() -> String {
    use std::os::unix::process::CommandExt;
    let program = match std::env::current_exe() {
        Ok(me) => me.with_file_name(FALLBACK_PROGRAM),
        Err(e) => return format!("cannot find {FALLBACK_PROGRAM}: this program's path: {e}"),
    };
    let e = std::process::Command::new(&program)
        .args(std::env::args_os().skip(1))
        .exec();
    format!(
        "no StatusNotifierItem can be shown and {} could not be started: {e}",
        program.display()
    )
}

/// The tray's one small runtime: the API, the proxy, the StatusNotifierItem and the deciding
/// task.
fn io_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("wattbar-io")
        .enable_all()
        .build()
}

struct App {
    runtime: tokio::runtime::Runtime,
    engine: Arc<EngineHandle>,
    /// Low-power events from the engine's start on: none is missed before the tray runs.
    events: tokio::sync::broadcast::Receiver<wattbar_engine::stages::low_power::LowPowerEvent>,
}

/// What the StatusNotifierItem's main thread and its deciding task speak over.
#[cfg(target_os = "linux")]
struct Channels {
    post: std::sync::mpsc::Sender<Wake>,
    posted: std::sync::mpsc::Receiver<Wake>,
    tell: tokio::sync::mpsc::UnboundedSender<brain::Told>,
    told: tokio::sync::mpsc::UnboundedReceiver<brain::Told>,
}

/// Where another engine records into this data folder, a second launch (from a menu, say) shows
/// the running engine's dashboard (a tray's, or `wattbar-cli serve`'s), or the preferences it
/// names, and this one ends: `Ok(true)`. An engine without an API has no windows to offer: say
/// who it is rather than count the machine twice.
fn hand_over(launch: &Launch) -> Result<bool, Box<dyn std::error::Error>> {
    let data_dir = wattbar_engine::home::paths::data_dir()?;
    let Some(holder) = wattbar_engine::home::lock::EngineLock::holder(&data_dir) else {
        return Ok(false);
    };
    if holder.api.is_none() {
        return Err(format!(
            "another Wattbar engine{} records into {} and serves no API \
             (wattbar-cli watch?): stop it, then start wattbar again",
            holder
                .pid
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default(),
            data_dir.display()
        )
        .into());
    }
    windows::open(if launch.open_preferences {
        windows::Window::Preferences
    } else {
        windows::Window::Dashboard
    })?;
    Ok(true)
}

fn start(
    launch: &Launch,
    runtime: tokio::runtime::Runtime,
) -> Result<App, Box<dyn std::error::Error>> {
    wattbar_serve::net::raise_open_files_limit();
    // A setting a sweep changed and could not put back (a kill -9, a power loss) is put back
    // at the next start of any Wattbar program, which says so.
    let data_dir = wattbar_engine::home::paths::data_dir()?;
    match runtime.block_on(wattbar_engine::knobs::restore_left_over(&data_dir)) {
        Some(Ok(done)) => tracing::warn!("{done}"),
        Some(Err(e)) => tracing::warn!("a sweep's setting is not back yet: {e}"),
        None => {}
    }
    let prefs_path = wattbar_engine::home::paths::preferences_path()?;
    // A value the schema refuses keeps its default and stays in the file as written; a file
    // that is not preferences at all is set aside, and the menu says so (the engine's notice).
    let (prefs, problems, prefs_notice) = wattbar_engine::home::prefs_file::load_or_set_aside(
        &prefs_path,
        wattbar_engine::unix_now() as u64,
    )?;
    for problem in problems {
        tracing::warn!("stored preference refused, default used: {problem}");
    }
    if let Some(n) = &prefs_notice {
        tracing::warn!("{n}");
    }
    let api = runtime.block_on(serve::bind_api(prefs.api_enabled))?;
    let db_path = wattbar_engine::home::paths::database_path()?;
    let mut config = EngineConfig::new(prefs.clone())
        .with_store(db_path.clone())
        .finding_model_servers()
        .resting_when_unwatched();
    config.notice = prefs_notice;
    if let Some(batch) = std::env::var(BATCH_ENV)
        .ok()
        .and_then(|v| wattbar_core::prefs::parse_duration(&v).ok())
    {
        config.batch_interval = batch;
    }
    config.advice_file = wattbar_engine::home::paths::advice_path().ok();
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
    // MQTT and OTLP as the preferences say, until the engine stops.
    runtime.spawn(wattbar_serve::integrations::follow(
        engine.reader(),
        wattbar_serve::integrations::Follow {
            mqtt: true,
            otlp: true,
        },
        std::future::pending(),
    ));
    #[cfg(target_os = "linux")]
    runtime.spawn(trim::at_rest());
    for (asked, window) in [
        (launch.open_dashboard, windows::Window::Dashboard),
        (launch.open_preferences, windows::Window::Preferences),
    ] {
        if asked {
            report(windows::open(window));
        }
    }
    Ok(App {
        runtime,
        events: engine.reader().low_power_events(),
        engine: Arc::new(engine),
    })
}

impl App {
    /// The StatusNotifierItem's main thread: it waits for what to draw, and for Quit.
    #[cfg(target_os = "linux")]
    fn run_sni(self, item: ksni::Handle<sni::Item>, channels: Channels) -> std::process::ExitCode {
        let Channels {
            post,
            posted,
            tell,
            told,
        } = channels;
        let App {
            runtime,
            engine,
            events,
        } = self;
        let on_exit = post.clone();
        runtime.spawn(on_terminate(Arc::clone(&engine), move || {
            let _ = on_exit.send(Wake::Exit);
        }));
        let (drawer, about_drawer) = (post.clone(), post);
        runtime.spawn(brain::run(
            Arc::clone(&engine),
            events,
            told,
            move |next| drawer.send(Wake::Show(Box::new(next))).is_ok(),
            move |line| about_drawer.send(Wake::About(line)).is_ok(),
        ));
        let _ = tell.send(brain::Told::Built);
        let code = loop {
            match posted.recv() {
                Ok(Wake::Show(next)) => {
                    runtime.block_on(item.update(move |i| i.show(*next)));
                }
                Ok(Wake::About(line)) => {
                    runtime.block_on(item.update(move |i| i.set_about(line)));
                }
                Ok(Wake::Quit) => {
                    let written = runtime.block_on(engine.shutdown());
                    if let Err(e) = &written {
                        tracing::error!("the last batch could not be written: {e}");
                    }
                    break u8::from(written.is_err());
                }
                Ok(Wake::Menu(_)) => {}
                Ok(Wake::Exit) | Err(_) => break 0,
            }
        };
        runtime.block_on(item.shutdown());
        std::process::ExitCode::from(code)
    }

    /// The toolkit's tray (`tray-icon`: libappindicator on Linux, the status bar on macOS) on
    /// its event loop.
    fn run_toolkit(self) -> std::process::ExitCode {
        let event_loop = EventLoopBuilder::<Wake>::with_user_event().build();
        let proxy = event_loop.create_proxy();
        {
            let proxy = std::sync::Mutex::new(proxy.clone());
            muda::MenuEvent::set_event_handler(Some(move |event: muda::MenuEvent| {
                let proxy = proxy.lock().unwrap_or_else(|e| e.into_inner());
                let _ = proxy.send_event(Wake::Menu(event.id.0));
            }));
        }
        #[cfg(unix)]
        {
            let proxy = std::sync::Mutex::new(proxy.clone());
            self.runtime
                .spawn(on_terminate(Arc::clone(&self.engine), move || {
                    let proxy = proxy.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = proxy.send_event(Wake::Exit);
                }));
        }

        let App {
            runtime,
            engine,
            events,
        } = self;
        let mut shown: Option<tray::Tray> = None;
        let (tell, told) = tokio::sync::mpsc::unbounded_channel();
        let drawer = proxy.clone();
        let about_drawer = proxy.clone();
        runtime.spawn(brain::run(
            Arc::clone(&engine),
            events,
            told,
            move |next| drawer.send_event(Wake::Show(Box::new(next))).is_ok(),
            move |line| about_drawer.send_event(Wake::About(line)).is_ok(),
        ));
        event_loop.run(move |event, _, control_flow| {
            if matches!(*control_flow, ControlFlow::ExitWithCode(_)) {
                return;
            }
            match event {
                // macOS wants the icon made once the loop runs; the same place suits Linux.
                Event::NewEvents(StartCause::Init) => match tray::Tray::build() {
                    Ok(t) => {
                        shown = Some(t);
                        let _ = tell.send(brain::Told::Built);
                    }
                    Err(e) => {
                        eprintln!("wattbar: cannot show the tray icon: {e}");
                        if let Err(e) = runtime.block_on(engine.shutdown()) {
                            eprintln!("wattbar: the last batch could not be written: {e}");
                        }
                        *control_flow = ControlFlow::ExitWithCode(1);
                        return;
                    }
                },
                Event::UserEvent(Wake::Menu(id)) => match MenuId::parse(&id) {
                    Some(MenuId::Quit) => {
                        let written = runtime.block_on(engine.shutdown());
                        if let Err(e) = &written {
                            tracing::error!("the last batch could not be written: {e}");
                        }
                        *control_flow = ControlFlow::ExitWithCode(i32::from(written.is_err()));
                        return;
                    }
                    Some(id) => {
                        if id == MenuId::LowPower {
                            if let Some(t) = shown.as_mut() {
                                t.low_power_clicked();
                            }
                        }
                        let _ = tell.send(brain::Told::Clicked(id));
                    }
                    None => {}
                },
                Event::UserEvent(Wake::Show(next)) => {
                    if let Some(t) = shown.as_mut() {
                        if let Err(e) = t.apply(&next) {
                            tracing::warn!("could not update the tray: {e}");
                            let _ = tell.send(brain::Told::NotShown);
                        }
                    }
                }
                Event::UserEvent(Wake::About(line)) => {
                    if let Some(t) = shown.as_ref() {
                        t.set_about(&line);
                    }
                }
                Event::UserEvent(Wake::Exit | Wake::Quit) => {
                    *control_flow = ControlFlow::ExitWithCode(0);
                    return;
                }
                _ => {}
            }
            *control_flow = ControlFlow::Wait;
        })
    }
}

fn report(opened: Result<(), windows::WindowError>) {
    if let Err(e) = opened {
        tracing::warn!("{e}");
    }
}

/// A logout or `kill` sends SIGTERM: write the last batch, then `exit` (tell the main thread).
#[cfg(unix)]
async fn on_terminate(engine: Arc<EngineHandle>, exit: impl FnOnce() + Send + 'static) {
    use tokio::signal::unix::{signal, SignalKind};
    if let Ok(mut term) = signal(SignalKind::terminate()) {
        term.recv().await;
        if let Err(e) = engine.shutdown().await {
            tracing::error!("the last batch could not be written: {e}");
        }
        exit();
    }
}
