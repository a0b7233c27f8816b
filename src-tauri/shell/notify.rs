//! Desktop notifications (tauri-plugin-notification: D-Bus org.freedesktop.Notifications on
//! Linux, the Notification Center on macOS). Without the `notifications` feature they are logged.

use tauri::AppHandle;
use wattbar_engine::budget::BudgetAlert;

pub fn budget(app: &AppHandle, alerts: &[BudgetAlert]) {
    for alert in alerts {
        post(app, "Wattbar budget", &alert.message);
    }
}

/// One notification per change of low-power mode, with its reason.
pub fn low_power(app: &AppHandle, message: &str) {
    post(app, "Wattbar", message);
}

#[cfg(feature = "notifications")]
fn post(app: &AppHandle, title: &str, body: &str) {
    use tauri_plugin_notification::NotificationExt;
    if let Err(e) = app.notification().builder().title(title).body(body).show() {
        tracing::warn!("could not show a notification ({body}): {e}");
    }
}

#[cfg(not(feature = "notifications"))]
fn post(_app: &AppHandle, title: &str, body: &str) {
    tracing::warn!("{title} (notifications are off in this build): {body}");
}
