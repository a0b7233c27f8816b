//! Wattbar's windows: the dashboard and the preferences, a thin Tauri shell in a process of its
//! own (`wattbar-window`).
//!
//! The tray (`wattbar`) starts this process when a window is asked for; it ends when its last
//! window closes, so an idle tray holds no web view. It is single-instance: started again, it
//! shows the window asked for in the running one; where that one was quitting and never took the
//! arguments, the new start takes its place (`start_again`). Presentation only: the engine is the
//! tray's (or `wattbar-cli serve`'s), reached through its local API ([`engine::Engine`]);
//! commands ask it, and its `/v1/stream` becomes the dashboard's [`events::STATE_CHANGED`]
//! events. When the engine goes away (Quit in the tray), the windows go with it.

mod commands;
mod engine;
pub mod events;
mod windows;

use tauri::{Emitter, Manager, RunEvent};

/// Command-line flag: open the dashboard (the default when no window is named).
pub const OPEN_DASHBOARD_FLAG: &str = "--open-dashboard";
/// Command-line flag: open the preferences.
pub const OPEN_PREFERENCES_FLAG: &str = "--open-preferences";

/// The windows' command line. `--help` and `--version` print and exit, and a flag it does not
/// know is refused with the usage, before a display or an engine is looked for. A second launch
/// hands its arguments to the first ([`open_named`]).
#[derive(clap::Parser, Debug)]
#[command(
    name = "wattbar-window",
    version = wattbar_release::LONG_VERSION,
    about = "Wattbar's dashboard and preferences, for the tray or `wattbar-cli serve` that runs"
)]
struct Launch {
    /// Open the dashboard (what opens when nothing is named; it wins over --open-preferences)
    #[arg(long)]
    open_dashboard: bool,
    /// Open the preferences instead of the dashboard
    #[arg(long)]
    open_preferences: bool,
}

impl Launch {
    /// What a launch with `args` (the program's name first) asks for; a launch the first
    /// instance cannot read opens the dashboard.
    fn of(args: &[String]) -> Launch {
        <Launch as clap::Parser>::try_parse_from(args).unwrap_or(Launch {
            open_dashboard: true,
            open_preferences: false,
        })
    }
}

/// What the commands reach.
pub struct AppState {
    pub engine: engine::Engine,
}

/// Opens the window a launch names: the preferences for [`OPEN_PREFERENCES_FLAG`], else the
/// dashboard.
fn open_named(app: &tauri::AppHandle, launch: &Launch) {
    let opened = if launch.open_preferences && !launch.open_dashboard {
        windows::open_preferences(app)
    } else {
        windows::open_dashboard(app)
    };
    if let Err(e) = opened {
        tracing::warn!("could not open the window: {e}");
    }
}

fn setup(
    app: &mut tauri::App,
    engine: engine::Engine,
    launch: &Launch,
) -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(target_os = "macos")]
    app.set_activation_policy(tauri::ActivationPolicy::Accessory);

    // The engine's states, for the dashboard, on a thread of their own (the stream blocks).
    let handle = app.handle().clone();
    let stream = engine.clone();
    std::thread::Builder::new()
        .name("engine-stream".into())
        .spawn(move || {
            let why = engine::follow(&stream, |state| {
                if windows::dashboard_visible(&handle) {
                    if let Err(e) = handle.emit_to(windows::DASHBOARD, events::STATE_CHANGED, state)
                    {
                        tracing::warn!("could not update the dashboard: {e}");
                    }
                }
            });
            tracing::info!("the windows close: {why}");
            handle.exit(0);
        })?;
    app.manage(AppState { engine });
    open_named(app.handle(), launch);
    Ok(())
}

/// Runs the windows until the last one closes or the engine goes away.
pub fn run() {
    let launch = <Launch as clap::Parser>::parse();
    wattbar_engine::logging::init("info");
    // WebKitGTK's accelerated compositing redraws the whole page through GL, in software where
    // there is no GPU driver: for this small page it doubled the open dashboard's CPU (2.7 % vs
    // 1.4 % of a core, scripts/measure-idle under Xvfb). Plain rendering is enough for it; a
    // value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("WEBKIT_DISABLE_COMPOSITING_MODE").is_none() {
        std::env::set_var("WEBKIT_DISABLE_COMPOSITING_MODE", "1");
    }
    // tao panics when GTK cannot open the display (DISPLAY set, no X authority): say so.
    #[cfg(target_os = "linux")]
    if let Err(e) = gtk::init() {
        let display = std::env::var("WAYLAND_DISPLAY")
            .or_else(|_| std::env::var("DISPLAY"))
            .unwrap_or_else(|_| "none set".into());
        eprintln!(
            "wattbar-window: cannot open a window on the display ({display}): {e}. \
             Is the session's display reachable (DISPLAY, XAUTHORITY)?"
        );
        std::process::exit(1);
    }
    let engine = match engine::find() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("wattbar-window: {e}");
            std::process::exit(1);
        }
    };
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| {
            open_named(app, &Launch::of(&argv));
        }))
        .invoke_handler(tauri::generate_handler![
            commands::get_dashboard,
            commands::set_price,
            commands::set_low_power,
            commands::reset_session,
            commands::get_history,
            commands::get_battery,
            commands::save_report,
            commands::get_preferences,
            commands::set_preference,
            commands::open_preferences,
            commands::get_keys,
            commands::add_key,
            commands::remove_key,
            commands::rotate_key
        ])
        .setup(move |app| setup(app, engine, &launch))
        .build(tauri::generate_context!());
    match app {
        // The last window closed: the process ends, and with it the web view.
        Ok(app) => app.run(|_app, _event: RunEvent| {}),
        Err(e) => {
            #[cfg(unix)]
            if e.to_string().contains(FORWARD_FAILED) {
                start_again();
            }
            eprintln!("wattbar-window: cannot start: {e}");
            std::process::exit(1);
        }
    }
}

/// What the single-instance plugin says when the instance that holds its name on the session bus
/// did not take this launch's arguments.
#[cfg(unix)]
const FORWARD_FAILED: &str = "failed to forward arguments to the running instance";
/// How many times a launch starts again in the place of an instance that left without answering.
#[cfg(unix)]
const STARTS: u32 = 5;
/// How long it lets that instance go first.
#[cfg(unix)]
const LEAVING_GRACE: std::time::Duration = std::time::Duration::from_millis(300);
/// Which start this is, handed to the next one.
#[cfg(unix)]
const START_VAR: &str = "WATTBAR_WINDOW_START";

/// The instance found was quitting (its name still on the bus while it went, as when the
/// dashboard is opened again right after Quit): this process becomes a new start of itself, the
/// same pid and arguments, a moment later. Returns only where it may not (the tries are spent:
/// a live instance that never answers is then said).
#[cfg(unix)]
fn start_again() {
    use std::os::unix::process::CommandExt;
    let this: u32 = std::env::var(START_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    if this >= STARTS {
        return;
    }
    eprintln!(
        "wattbar-window: the running window left without answering: starting again \
         ({} of {STARTS})",
        this + 1
    );
    std::thread::sleep(LEAVING_GRACE);
    let again = std::env::current_exe().map(|exe| {
        std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(START_VAR, (this + 1).to_string())
            .exec()
    });
    let (Ok(e) | Err(e)) = again;
    eprintln!("wattbar-window: cannot start again: {e}");
}
