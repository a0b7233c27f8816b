//! The Wattbar tray: the engine, the tray icon and its menu, notifications, launch at login, the
//! local API and the inference proxy, in one process with no web view.
//!
//! The dashboard and preferences windows are a process of their own (`wattbar-window`, the Tauri
//! app), started when a window is asked for and ended when its last window closes. An idle tray
//! therefore never loads WebKit, JavaScriptCore, GL or what they pull in. The windows talk to this
//! engine through its local API, which the tray always serves on loopback: where the preferences
//! switch the API off, on a port of the system's choosing that only the lock file names.
//!
//! Threads: a small tokio runtime serves the API and the proxy and follows the engine's
//! published state at most once a second (posting its notifications, following its
//! launch-at-login preference, deciding what the tray shows: [`display`]); the toolkit's event
//! loop on the main thread takes the tray's clicks and is woken only to show what changed, which
//! at rest is once every few seconds, not every sample. At 10 Hz the tray still shows the latest
//! state once a second, so nothing is lost.

mod autostart;
mod display;
mod format;
pub mod icon_render;
mod menu;
mod notify;
mod serve;
mod tray;
mod windows;

use menu::MenuId;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tao::event::{Event, StartCause};
use tao::event_loop::{ControlFlow, EventLoopBuilder, EventLoopProxy};
use wattbar_engine::{build_chain, ChainOptions, Command, EngineConfig, EngineHandle};

/// How often the ledger is written (`WATTBAR_BATCH_INTERVAL`, e.g. `1s`; default 10 s).
const BATCH_ENV: &str = "WATTBAR_BATCH_INTERVAL";
/// The tray's command line. `--help` and `--version` print and exit, and a flag it does not know
/// is refused with the usage, before any engine, lock or folder is touched.
#[derive(clap::Parser, Debug)]
#[command(
    name = "wattbar",
    version,
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
/// The tray refreshes at most this often.
const REFRESH_PERIOD: Duration = Duration::from_secs(1);

/// What wakes the event loop.
#[derive(Debug)]
enum Wake {
    /// What the tray shows changed.
    Show(Box<display::Shown>),
    /// A menu item was clicked.
    Menu(String),
    /// The engine has published what a click asked for: show it now.
    Taken,
    /// The engine has stopped (Quit, SIGTERM): leave.
    Exit,
}

/// Runs the tray until the user quits; returns the process's exit status.
pub fn run() -> std::process::ExitCode {
    let launch = <Launch as clap::Parser>::parse();
    wattbar_engine::logging::init("info");
    // The tray draws through GTK but never through GL; GTK 3 would still open GL on X11 to pick
    // visuals, loading Mesa (and LLVM, in software). A value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("GDK_GL").is_none() {
        std::env::set_var("GDK_GL", "disable");
    }
    match start(&launch) {
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

fn start(launch: &Launch) -> Result<Started, Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("wattbar-io")
        .enable_all()
        .build()?;
    let data_dir = wattbar_engine::paths::data_dir()?;
    if let Some(holder) = wattbar_engine::lock::EngineLock::holder(&data_dir) {
        // A second launch (from a menu, say) shows the running engine's dashboard (a tray's, or
        // `wattbar-cli serve`'s), or the preferences it names. An engine without an API has no
        // windows to offer: say who it is rather than count the machine twice.
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
        return Ok(Started::HandedOver);
    }
    let prefs_path = wattbar_engine::paths::preferences_path()?;
    // A value the schema refuses keeps its default and stays in the file as written; a file
    // that is not preferences at all is set aside, and the menu says so (the engine's notice).
    let (prefs, problems, prefs_notice) = wattbar_engine::prefs_file::load_or_set_aside(
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
    let db_path = wattbar_engine::paths::database_path()?;
    let mut config = EngineConfig::new(prefs.clone()).with_store(db_path.clone());
    config.notice = prefs_notice;
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
    for (asked, window) in [
        (launch.open_dashboard, windows::Window::Dashboard),
        (launch.open_preferences, windows::Window::Preferences),
    ] {
        if asked {
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
        #[cfg(unix)]
        self.runtime
            .spawn(on_terminate(Arc::clone(&self.engine), proxy.clone()));

        let App { runtime, engine } = self;
        let mut shown: Option<tray::Tray> = None;
        let display = Arc::new(Mutex::new(display::Display::default()));
        runtime.spawn(follow(
            engine.subscribe(),
            Arc::clone(&display),
            proxy.clone(),
        ));
        event_loop.run(move |event, _, control_flow| {
            if matches!(*control_flow, ControlFlow::ExitWithCode(_)) {
                return;
            }
            match event {
                // macOS wants the icon made once the loop runs; the same place suits Linux.
                Event::NewEvents(StartCause::Init) => match tray::Tray::build() {
                    Ok(mut t) => {
                        let next = lock(&display).next(&engine.current(), Instant::now(), true);
                        show(&mut t, &display, next);
                        shown = Some(t);
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
                        // What the click changed shows as soon as the engine has published it,
                        // whatever the display's deadbands: a reset session reads 0.00 Wh at once.
                        if let Some(taken) = clicked(&engine, id) {
                            runtime.spawn(wake_when_taken(
                                engine.subscribe(),
                                taken,
                                proxy.clone(),
                            ));
                        }
                    }
                    None => {}
                },
                Event::UserEvent(Wake::Taken) => {
                    if let Some(t) = shown.as_mut() {
                        let next = lock(&display).next(&engine.current(), Instant::now(), true);
                        show(t, &display, next);
                    }
                }
                Event::UserEvent(Wake::Show(next)) => {
                    if let Some(t) = shown.as_mut() {
                        show(t, &display, Some(*next));
                    }
                }
                Event::UserEvent(Wake::Exit) => {
                    *control_flow = ControlFlow::ExitWithCode(0);
                    return;
                }
                _ => {}
            }
            *control_flow = ControlFlow::Wait;
        })
    }
}

/// Shows what the display decided; where the tray could not, the next state is shown whole.
fn show(tray: &mut tray::Tray, display: &Mutex<display::Display>, next: Option<display::Shown>) {
    if let Some(next) = next {
        if let Err(e) = tray.apply(&next) {
            tracing::warn!("could not update the tray: {e}");
            lock(display).forget();
        }
    }
}

fn lock(display: &Mutex<display::Display>) -> std::sync::MutexGuard<'_, display::Display> {
    display.lock().unwrap_or_else(|e| e.into_inner())
}

/// Follows the engine's published state, at most once per [`REFRESH_PERIOD`] (the latest state
/// each time): posts its notifications, follows launch at login, and wakes the event loop only
/// when what the tray shows changed.
async fn follow(
    mut published: tokio::sync::watch::Receiver<Arc<wattbar_engine::Published>>,
    display: Arc<Mutex<display::Display>>,
    proxy: EventLoopProxy<Wake>,
) {
    let mut follower = Follower::new(&published.borrow_and_update());
    // One timer, one wake a second: the engine publishes at least that often.
    let mut ticks = tokio::time::interval(REFRESH_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match published.has_changed() {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => return,
        }
        let p = Arc::clone(&published.borrow_and_update());
        follower.follow(&p);
        let next = lock(&display).next(&p, Instant::now(), false);
        if let Some(next) = next {
            if proxy.send_event(Wake::Show(Box::new(next))).is_err() {
                return;
            }
        }
    }
}

/// How long the tray waits for the engine to publish what a click asked for.
const CLICK_TAKEN_WITHIN: Duration = Duration::from_secs(2);

/// Whether a published state shows what a click asked for.
type Taken = Box<dyn Fn(&wattbar_engine::Published) -> bool + Send + Sync>;

/// Wakes the event loop once the engine has published what a click asked for (or gave up).
async fn wake_when_taken(
    mut rx: tokio::sync::watch::Receiver<Arc<wattbar_engine::Published>>,
    taken: Taken,
    proxy: EventLoopProxy<Wake>,
) {
    let _ = tokio::time::timeout(CLICK_TAKEN_WITHIN, rx.wait_for(|p| taken(p))).await;
    let _ = proxy.send_event(Wake::Taken);
}

/// What the tray does beside drawing, following the engine's published state: one notification
/// per budget alert and per change of low-power mode, and the launch-at-login entry.
struct Follower {
    alerts_seen: u64,
    low_power_seen: u64,
    notice_seen: Option<String>,
    entry: autostart::Entry,
}

impl Follower {
    /// Every budget alert of this run is news; a low-power state the engine started in (restored
    /// from the ledger) is not.
    fn new(at_start: &wattbar_engine::Published) -> Follower {
        Follower {
            alerts_seen: 0,
            low_power_seen: at_start.low_power_seq,
            notice_seen: None,
            entry: autostart::Entry::default(),
        }
    }

    fn follow(&mut self, published: &wattbar_engine::Published) {
        if published.alert_seq > self.alerts_seen {
            self.alerts_seen = published.alert_seq;
            notify::budget(&published.alerts);
        }
        for message in unseen(&published.low_power_events, self.low_power_seen) {
            notify::low_power(message);
        }
        self.low_power_seen = self.low_power_seen.max(published.low_power_seq);
        if published.notice != self.notice_seen {
            self.notice_seen.clone_from(&published.notice);
            if let Some(message) = &published.notice {
                notify::notice(message);
            }
        }
        // Only a change touches the system's entry (a file).
        if let Err(message) = self.entry.follow(published.prefs.launch_at_login) {
            tracing::warn!("{message}");
        }
    }
}

/// The events numbered after `seen`, oldest first: each change of low-power mode and what it
/// did are posted, however many came between two readings.
fn unseen(events: &[(u64, String)], seen: u64) -> impl Iterator<Item = &str> {
    events
        .iter()
        .filter(move |(seq, _)| *seq > seen)
        .map(|(_, m)| m.as_str())
}

/// Asks for what a click on an item asks for; for a change of the engine's state, returns how
/// to recognise the state that shows it.
fn clicked(engine: &EngineHandle, id: MenuId) -> Option<Taken> {
    let (sent, taken): (_, Taken) = match id {
        MenuId::LowPower => {
            let on = !engine.current().low_power.enabled;
            (
                engine.send(Command::SetLowPower(on)),
                Box::new(move |p| p.low_power.enabled == on),
            )
        }
        MenuId::ResetSession => {
            let before = engine.current().session.started_unix;
            (
                engine.send(Command::ResetSession),
                Box::new(move |p| p.session.started_unix != before),
            )
        }
        MenuId::OpenDashboard => {
            report(windows::open(windows::Window::Dashboard));
            return None;
        }
        MenuId::Preferences => {
            report(windows::open(windows::Window::Preferences));
            return None;
        }
        MenuId::Now
        | MenuId::Session
        | MenuId::Today
        | MenuId::LastAnswer
        | MenuId::Top
        | MenuId::Quit => return None,
    };
    match sent {
        Ok(()) => Some(taken),
        Err(e) => {
            tracing::warn!("the engine did not take the click: {e}");
            None
        }
    }
}

fn report(opened: Result<(), windows::WindowError>) {
    if let Err(e) = opened {
        tracing::warn!("{e}");
    }
}

/// A logout or `kill` sends SIGTERM: write the last batch, then exit cleanly.
#[cfg(unix)]
async fn on_terminate(engine: Arc<EngineHandle>, proxy: EventLoopProxy<Wake>) {
    use tokio::signal::unix::{signal, SignalKind};
    if let Ok(mut term) = signal(SignalKind::terminate()) {
        term.recv().await;
        if let Err(e) = engine.shutdown().await {
            tracing::error!("the last batch could not be written: {e}");
        }
        let _ = proxy.send_event(Wake::Exit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_since_the_last_reading_is_posted_in_order() {
        let events = [
            (4, "Low-power mode on: sustained draw".to_string()),
            (5, "Low-power mode unloaded gemma3:latest".to_string()),
        ];
        assert_eq!(
            unseen(&events, 3).collect::<Vec<_>>(),
            vec![
                "Low-power mode on: sustained draw",
                "Low-power mode unloaded gemma3:latest"
            ]
        );
        assert_eq!(unseen(&events, 5).count(), 0);
    }
}
