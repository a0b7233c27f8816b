//! The dashboard window: created on demand, destroyed on close, so that an idle tray costs
//! no web process.

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

pub const DASHBOARD: &str = "dashboard";

pub fn open_dashboard(app: &AppHandle) -> Result<(), tauri::Error> {
    if let Some(window) = app.get_webview_window(DASHBOARD) {
        window.show()?;
        window.unminimize()?;
        return window.set_focus();
    }
    WebviewWindowBuilder::new(app, DASHBOARD, WebviewUrl::App("index.html".into()))
        .title("Wattbar")
        .inner_size(440.0, 600.0)
        .min_inner_size(360.0, 480.0)
        .build()?;
    Ok(())
}
