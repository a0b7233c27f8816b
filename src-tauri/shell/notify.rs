//! Desktop notifications (tauri-plugin-notification: D-Bus org.freedesktop.Notifications on
//! Linux, the Notification Center on macOS).

use tauri::AppHandle;
use tauri_plugin_notification::NotificationExt;
use wattbar_engine::budget::BudgetAlert;

pub fn budget(app: &AppHandle, alerts: &[BudgetAlert]) {
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
