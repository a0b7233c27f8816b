//! The dashboard and preferences windows: created on demand, destroyed on close; the process
//! ends with the last one. On macOS the dashboard closes when it loses focus, like a menu-bar
//! popover.

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindow, WebviewWindowBuilder};

pub const DASHBOARD: &str = "dashboard";
pub const PREFERENCES: &str = "preferences";

fn focus(window: &WebviewWindow) -> Result<(), tauri::Error> {
    window.show()?;
    window.unminimize()?;
    window.set_focus()
}

pub fn open_dashboard(app: &AppHandle) -> Result<(), tauri::Error> {
    if let Some(window) = app.get_webview_window(DASHBOARD) {
        return focus(&window);
    }
    let window = WebviewWindowBuilder::new(app, DASHBOARD, WebviewUrl::App("index.html".into()))
        .title("Wattbar")
        .inner_size(440.0, 640.0)
        .min_inner_size(360.0, 480.0)
        .build()?;
    #[cfg(target_os = "macos")]
    {
        let w = window.clone();
        window.on_window_event(move |event| {
            if let tauri::WindowEvent::Focused(false) = event {
                let _ = w.close();
            }
        });
    }
    #[cfg(not(target_os = "macos"))]
    let _ = window;
    Ok(())
}

pub fn open_preferences(app: &AppHandle) -> Result<(), tauri::Error> {
    if let Some(window) = app.get_webview_window(PREFERENCES) {
        return focus(&window);
    }
    WebviewWindowBuilder::new(app, PREFERENCES, WebviewUrl::App("preferences.html".into()))
        .title("Wattbar Preferences")
        .inner_size(520.0, 720.0)
        .min_inner_size(420.0, 480.0)
        .build()?;
    Ok(())
}

/// Whether the dashboard is open and shown: only then is state sent to it.
pub fn dashboard_visible(app: &AppHandle) -> bool {
    app.get_webview_window(DASHBOARD)
        .is_some_and(|w| w.is_visible().unwrap_or(false) && !w.is_minimized().unwrap_or(false))
}
