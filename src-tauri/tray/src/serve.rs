//! The local API and the inference proxy, on the tray's runtime.
//!
//! The API is always served on loopback, because the windows process reads and changes
//! everything through it: on `WATTBAR_API_LISTEN` (default 127.0.0.1:9471) when the preferences
//! switch it on, else (or when that port is taken) on a port of the system's choosing, which the
//! engine's lock file names for the windows to find.

use std::net::SocketAddr;
use tokio::net::TcpListener;
use wattbar_engine::EngineReader;
use wattbar_serve::api;

/// Where the tray serves the local API (`WATTBAR_API_LISTEN`; default 127.0.0.1:9471).
const API_LISTEN_ENV: &str = "WATTBAR_API_LISTEN";

/// Binds the API's listener. Never fails for a taken or refused address: the windows still need
/// one, so the tray falls back to a loopback port of the system's choosing and says why.
pub async fn bind_api(enabled: bool) -> std::io::Result<TcpListener> {
    if enabled {
        let listen =
            std::env::var(API_LISTEN_ENV).unwrap_or_else(|_| api::DEFAULT_LISTEN.to_string());
        match listen.parse::<SocketAddr>() {
            Ok(addr) if api::is_loopback(&addr) => match TcpListener::bind(addr).await {
                Ok(listener) => {
                    // Port 0 lands where the system chose: the log names that port.
                    let bound = listener.local_addr().unwrap_or(addr);
                    tracing::info!("local API on http://{bound}/");
                    return Ok(listener);
                }
                Err(e) => tracing::warn!(
                    "the local API cannot listen on {addr} ({e}): serving the windows on \
                     another loopback port"
                ),
            },
            Ok(addr) => {
                tracing::warn!(
                    "{API_LISTEN_ENV}={addr} is not loopback; the tray serves loopback only"
                )
            }
            Err(e) => tracing::warn!("{API_LISTEN_ENV}={listen:?}: {e}"),
        }
    }
    TcpListener::bind(("127.0.0.1", 0)).await
}

/// Serves the API until the process ends; a failure is logged.
pub async fn api(listener: TcpListener, engine: EngineReader, db_path: std::path::PathBuf) {
    let token = match wattbar_engine::home::paths::data_dir()
        .and_then(|d| wattbar_engine::home::secrets::load_or_create(&d))
    {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("the local API is off: {e}");
            return;
        }
    };
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
}

/// The inference proxy, from the preferences: listen address, and the upstream (else
/// `OLLAMA_HOST`, else 127.0.0.1:11434). A proxy that cannot start is logged; the tray goes on.
pub async fn llm_proxy(engine: EngineReader, prefs: wattbar_core::Preferences) {
    use wattbar_serve::proxy;
    let listen = prefs.llm_proxy_listen.clone();
    let text = prefs
        .llm_upstream
        .clone()
        .unwrap_or_else(|| proxy::default_upstream(std::env::var("OLLAMA_HOST").ok().as_deref()));
    let upstream = match proxy::Upstream::parse(&text) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!("the inference proxy is off: {e}");
            return;
        }
    };
    match listen.parse::<SocketAddr>() {
        Ok(a) if a.ip().is_loopback() => {}
        _ => {
            tracing::warn!(
                "the inference proxy is off: {listen} is not a loopback address, and the tray \
                 serves loopback only (wattbar-cli serve --allow-remote can serve beyond it)"
            );
            return;
        }
    }
    let listener = match TcpListener::bind(&listen).await {
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
        engine,
        &[],
        proxy::Origins::from_ollama_origins(std::env::var("OLLAMA_ORIGINS").ok().as_deref()),
        std::future::pending::<()>(),
    )
    .await;
    if let Err(e) = served {
        tracing::warn!("the inference proxy stopped: {e}");
    }
}
