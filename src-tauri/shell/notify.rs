//! Desktop notifications (tauri-plugin-notification: D-Bus org.freedesktop.Notifications on
//! Linux, the Notification Center on macOS). Without the `notifications` feature they are logged.

use tauri::AppHandle;
use wattbar_engine::budget::BudgetAlert;

#[cfg(feature = "notifications")]
pub fn budget(app: &AppHandle, alerts: &[BudgetAlert]) {
    use tauri_plugin_notification::NotificationExt;
    for alert in alerts {
        if let Err(e) = app
            .notification()
            .builder()
            .title("Wattbar budget")
            .body(&alert.message)
            .show()
        {
            tracing::warn!("could not show a notification ({}): {e}", alert.message);
        }
    }
}

#[cfg(not(feature = "notifications"))]
pub fn budget(_app: &AppHandle, alerts: &[BudgetAlert]) {
    for alert in alerts {
        tracing::warn!(
            "budget alert (notifications are off in this build): {}",
            alert.message
        );
    }
}
