//! The Wattbar tray app: a thin Tauri shell over wattbar-engine.
//!
//! Presentation only. The engine samples and publishes; this crate shows the published state in
//! the tray and the dashboard, and turns clicks into engine commands and stored preferences.

mod autostart;
mod commands;
pub mod events;
mod format;
pub mod icon_render;
mod menu;
mod notify;
mod tray;
mod windows;

use tauri::{Emitter, Manager, RunEvent};
use wattbar_engine::{build_chain, ChainOptions, EngineConfig, EngineHandle};

/// Command-line flag: open the dashboard at start (used by tests and by a second launch).
pub const OPEN_DASHBOARD_FLAG: &str = "--open-dashboard";
/// Command-line flag: open the preferences at start.
pub const OPEN_PREFERENCES_FLAG: &str = "--open-preferences";

/// What the commands reach. Preferences are the engine's: windows read its published copy and
/// ask it for changes, which it saves.
pub struct AppState {
    pub engine: EngineHandle,
    /// The launch-at-login entry, made to follow the preference.
    pub autostart: std::sync::Arc<autostart::Entry>,
}

/// How often the ledger is written (`WATTBAR_BATCH_INTERVAL`, e.g. `1s`; default 5 s).
const BATCH_ENV: &str = "WATTBAR_BATCH_INTERVAL";
/// The tray and the dashboard refresh at most this often.
const REFRESH_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);
/// Where the app serves the local API (`WATTBAR_API_LISTEN`; default 127.0.0.1:9471).
const API_LISTEN_ENV: &str = "WATTBAR_API_LISTEN";

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
}

fn setup(app: &mut tauri::App) -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(target_os = "macos")]
    app.set_activation_policy(tauri::ActivationPolicy::Accessory);

    let prefs_path = wattbar_engine::paths::preferences_path()?;
    // A value the schema refuses keeps its default and stays in the file as written.
    let (prefs, problems) = wattbar_engine::prefs_file::load(&prefs_path)?;
    for problem in problems {
        tracing::warn!("stored preference refused, default used: {problem}");
    }
    let chain = build_chain(&ChainOptions::from_env())?;
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
    if prefs.api_enabled {
        config.api = Some(
            std::env::var(API_LISTEN_ENV)
                .unwrap_or_else(|_| wattbar_engine::api::DEFAULT_LISTEN.to_string()),
        );
    }
    // A second engine on the same data folder (`wattbar-cli serve`, say) is refused with who
    // holds it: the app says so and stops rather than count the machine twice.
    let engine =
        tauri::async_runtime::block_on(async move { wattbar_engine::spawn(chain, config) })?;
    let mut rx = engine.subscribe();
    if prefs.api_enabled {
        start_api(engine.reader(), db_path.clone());
    }
    if prefs.llm_proxy_enabled {
        start_llm_proxy(engine.reader(), &prefs);
    }
    let entry = std::sync::Arc::new(autostart::Entry::default());
    if let Err(e) = entry.follow(app.handle(), prefs.launch_at_login) {
        tracing::warn!("{e}");
    }
    app.manage(AppState {
        engine,
        autostart: entry.clone(),
    });

    let mut tray = tray::Tray::build(app.handle())?;
    let handle = app.handle().clone();
    tauri::async_runtime::spawn(async move {
        let mut alerts_seen = 0;
        let mut low_power_seen = 0;
        let mut shown_at = tokio::time::Instant::now();
        loop {
            let published = rx.borrow_and_update().clone();
            tray.show(&published);
            if published.alert_seq > alerts_seen {
                alerts_seen = published.alert_seq;
                notify::budget(&handle, &published.alerts);
            }
            if published.low_power_seq > low_power_seen {
                low_power_seen = published.low_power_seq;
                if let Some(message) = &published.low_power_event {
                    notify::low_power(&handle, message);
                }
            }
            if let Err(e) = entry.follow(&handle, published.prefs.launch_at_login) {
                tracing::warn!("{e}");
            }
            if windows::dashboard_visible(&handle) {
                let payload = events::StatePayload::from(published.as_ref());
                if let Err(e) = handle.emit_to(windows::DASHBOARD, events::STATE_CHANGED, payload) {
                    tracing::warn!("could not update the dashboard: {e}");
                }
            }
            if rx.changed().await.is_err() {
                break;
            }
            // At most one refresh a second, whatever the sampling interval: the next pass shows
            // the latest state, so nothing is lost, only coalesced. A change of low-power mode
            // (a click) is shown at once.
            // Samples a second apart arrive a hair early or late: no timer (and no wake-up of its
            // own) unless the engine runs clearly faster than the refresh, as while it measures
            // a request.
            let urgent = rx.borrow().low_power_seq != low_power_seen;
            if !urgent && shown_at.elapsed() < REFRESH_PERIOD.mul_f64(0.9) {
                tokio::time::sleep_until(shown_at + REFRESH_PERIOD).await;
            }
            shown_at = tokio::time::Instant::now();
        }
    });

    #[cfg(unix)]
    {
        // A logout or `kill` sends SIGTERM: write the last batch, then exit cleanly.
        let handle = app.handle().clone();
        tauri::async_runtime::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut term) = signal(SignalKind::terminate()) {
                term.recv().await;
                if let Some(state) = handle.try_state::<AppState>() {
                    state.engine.shutdown().await;
                }
                handle.exit(0);
            }
        });
    }

    if std::env::args().any(|a| a == OPEN_DASHBOARD_FLAG) {
        windows::open_dashboard(app.handle())?;
    }
    if std::env::args().any(|a| a == OPEN_PREFERENCES_FLAG) {
        windows::open_preferences(app.handle())?;
    }
    Ok(())
}

/// Serves the local API for routers and scrapers, as `wattbar-cli serve` does. A port already in
/// use (a `serve` running beside the app) is logged, not fatal.
/// The inference proxy, from the preferences: listen address, and the upstream (else
/// `OLLAMA_HOST`, else 127.0.0.1:11434). A proxy that cannot start is logged; the app goes on.
fn start_llm_proxy(engine: wattbar_engine::EngineReader, prefs: &wattbar_core::Preferences) {
    use wattbar_engine::inference::proxy;
    let listen = prefs.llm_proxy_listen.clone();
    let text = prefs
        .llm_upstream
        .clone()
        .unwrap_or_else(|| proxy::default_upstream(std::env::var("OLLAMA_HOST").ok().as_deref()));
    tauri::async_runtime::spawn(async move {
        let upstream = match proxy::Upstream::parse(&text) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("the inference proxy is off: {e}");
                return;
            }
        };
        match listen.parse::<std::net::SocketAddr>() {
            Ok(a) if a.ip().is_loopback() => {}
            _ => {
                tracing::warn!(
                    "the inference proxy is off: {listen} is not a loopback address, and the app \
                     serves loopback only (wattbar-cli serve --allow-remote can serve beyond it)"
                );
                return;
            }
        }
        let listener = match tokio::net::TcpListener::bind(&listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("the inference proxy is off: cannot listen on {listen}: {e}");
                return;
            }
        };
        tracing::info!("inference proxy on http://{listen} → {upstream}");
        let served = proxy::serve(
            listener,
            upstream,
            engine.tracker(),
            &[],
            std::future::pending::<()>(),
        )
        .await;
        if let Err(e) = served {
            tracing::warn!("the inference proxy stopped: {e}");
        }
    });
}

fn start_api(engine: wattbar_engine::EngineReader, db_path: std::path::PathBuf) {
    use wattbar_engine::api;
    let listen = std::env::var(API_LISTEN_ENV).unwrap_or_else(|_| api::DEFAULT_LISTEN.to_string());
    tauri::async_runtime::spawn(async move {
        let addr: std::net::SocketAddr = match listen.parse() {
            Ok(a) if api::is_loopback(&a) => a,
            Ok(a) => {
                tracing::warn!(
                    "{API_LISTEN_ENV}={a} is not loopback; the app serves loopback only"
                );
                return;
            }
            Err(e) => {
                tracing::warn!("{API_LISTEN_ENV}={listen:?}: {e}");
                return;
            }
        };
        let token = match wattbar_engine::paths::data_dir()
            .and_then(|d| wattbar_engine::token::load_or_create(&d))
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("the local API is off: {e}");
                return;
            }
        };
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("the local API is off: cannot listen on {addr}: {e}");
                return;
            }
        };
        tracing::info!("local API on http://{addr}/");
        let config = api::ApiConfig {
            token,
            extra_hosts: Vec::new(),
            db_path: Some(db_path),
            ui_dir: api::find_ui_dir(None),
            ..api::ApiConfig::default()
        };
        if let Err(e) = api::serve(listener, engine, config, std::future::pending()).await {
            tracing::warn!("the local API stopped: {e}");
        }
    });
}

/// Runs the app until the user quits.
pub fn run() {
    init_tracing();
    // WebKitGTK's accelerated compositing redraws the whole page through GL, in software where
    // there is no GPU driver: for this small page it doubled the open dashboard's CPU (2.7 % vs
    // 1.4 % of a core, scripts/measure-idle under Xvfb). Plain rendering is enough for it; a
    // value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("WEBKIT_DISABLE_COMPOSITING_MODE").is_none() {
        std::env::set_var("WEBKIT_DISABLE_COMPOSITING_MODE", "1");
    }
    // Without compositing nothing here draws through GL, yet GTK 3 opens GL on X11 as it opens
    // the display, only to pick visuals: that loads Mesa and, in software, LLVM (32 MiB of the
    // tray's proportional memory at rest, before any window exists). A value set by the user wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("GDK_GL").is_none() {
        std::env::set_var("GDK_GL", "disable");
    }
    let builder = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _argv, _cwd| {
            if let Err(e) = windows::open_dashboard(app) {
                tracing::warn!("could not open the dashboard: {e}");
            }
        }))
        .plugin(tauri_plugin_autostart::init(
            tauri_plugin_autostart::MacosLauncher::LaunchAgent,
            None,
        ))
        .plugin(tauri_plugin_positioner::init());
    #[cfg(feature = "notifications")]
    let builder = builder.plugin(tauri_plugin_notification::init());
    let app = builder
        .invoke_handler(tauri::generate_handler![
            commands::get_dashboard,
            commands::set_price,
            commands::set_low_power,
            commands::reset_session,
            commands::get_history,
            commands::save_report,
            commands::get_preferences,
            commands::set_preference,
            commands::open_preferences
        ])
        .setup(setup)
        .build(tauri::generate_context!());
    match app {
        Ok(app) => app.run(|_app, event| {
            // Closing the dashboard must not quit: the tray lives on. Quit asks with a code.
            if let RunEvent::ExitRequested {
                api, code: None, ..
            } = event
            {
                api.prevent_exit();
            }
        }),
        Err(e) => {
            eprintln!("wattbar: cannot start: {e}");
            std::process::exit(1);
        }
    }
}
