//! Desktop notifications (notify-rust: D-Bus `org.freedesktop.Notifications` on Linux, the
//! Notification Center on macOS). Posting talks to another process, so it runs on a thread of
//! its own, never on the event loop. Without the `notifications` feature they are logged.

use wattbar_engine::budget::BudgetAlert;

pub fn budget(alerts: &[BudgetAlert]) {
    for alert in alerts {
        post("Wattbar budget", &alert.message);
    }
}

/// What the engine needs the user to know (preferences set aside, a ledger not being written),
/// once per new notice.
pub fn notice(message: &str) {
    post("Wattbar", message);
}

/// The price in force crossed `price_notify_above`, either way.
pub fn price(message: &str) {
    post("Wattbar price", message);
}

/// One notification per change of low-power mode, with its reason.
pub fn low_power(message: &str) {
    post("Wattbar", message);
}

#[cfg(feature = "notifications")]
fn post(title: &str, body: &str) {
    let (title, body) = (title.to_string(), body.to_string());
    let posted = std::thread::Builder::new()
        .name("notification".into())
        .spawn(move || {
            let shown = notify_rust::Notification::new()
                .appname("Wattbar")
                .summary(&title)
                .body(&body)
                .show();
            if let Err(e) = shown {
                tracing::warn!("could not show a notification ({body}): {e}");
            }
        });
    if let Err(e) = posted {
        tracing::warn!("could not post a notification: {e}");
    }
}

#[cfg(not(feature = "notifications"))]
fn post(title: &str, body: &str) {
    tracing::warn!("{title} (notifications are off in this build): {body}");
}
