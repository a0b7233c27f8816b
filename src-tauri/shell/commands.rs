//! Commands the dashboard invokes. Each asks the engine, which owns the preferences: it
//! validates with the one schema, saves and publishes; a refused value changes nothing.
//!
//! Rule: a command that waits on the engine or reads the ledger is `async`, so Tauri runs it on
//! its async runtime, never on the main thread that draws the tray and the windows.

use crate::events::{DashboardPayload, HistoryPayload, StatePayload};
use crate::AppState;
use serde::Serialize;
use std::sync::Arc;
use tauri::{AppHandle, Manager, State};
use wattbar_core::{Preferences, Price};
use wattbar_engine::{Command, Published};

pub fn current(app: &AppHandle) -> Option<Arc<Published>> {
    app.try_state::<AppState>().map(|s| s.engine.current())
}

#[tauri::command]
pub fn get_dashboard(state: State<'_, AppState>) -> DashboardPayload {
    DashboardPayload {
        state: StatePayload::from(state.engine.current().as_ref()),
        history: state.engine.recent(),
    }
}

/// Sets the price from what was typed. Returns the price now in force, or why it was refused.
#[tauri::command]
pub async fn set_price(input: String, app: AppHandle) -> Result<f64, String> {
    let price = Price::parse_input(&input).map_err(|e| e.to_string())?;
    apply_preference(&app, "price_per_kwh", serde_json::json!(price.per_kwh())).await?;
    Ok(price.per_kwh())
}

/// Every preference, with the schema's key names.
#[tauri::command]
pub fn get_preferences(state: State<'_, AppState>) -> Preferences {
    state.engine.current().prefs.clone()
}

/// A refused preference: the field it belongs to and the message to show next to it.
#[derive(Debug, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Sets one preference. Validated by the one schema in core; stored; applied at once. Returns
/// every preference, or the field's message.
#[tauri::command]
pub async fn set_preference(
    key: String,
    value: serde_json::Value,
    app: AppHandle,
) -> Result<Preferences, FieldError> {
    apply_preference(&app, &key, value)
        .await
        .map_err(|message| FieldError {
            field: key.clone(),
            message,
        })
}

/// How long a window waits for the engine to take a change.
const ENGINE_REPLY: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn apply_preference(
    app: &AppHandle,
    key: &str,
    value: serde_json::Value,
) -> Result<Preferences, String> {
    let reader = app
        .try_state::<AppState>()
        .ok_or_else(|| "Wattbar is still starting".to_string())?
        .engine
        .reader();
    // The engine takes changes one at a time, each from the last, and answers once it has saved
    // and published it.
    let prefs = tokio::time::timeout(ENGINE_REPLY, reader.set_preference(key, value))
        .await
        .map_err(|_| "Wattbar's engine did not answer".to_string())?
        .map_err(|e| match e {
            wattbar_engine::Error::Invalid(e) => message_of(&e),
            other => other.to_string(),
        })?;
    if key == "launch_at_login" {
        if let Some(state) = app.try_state::<AppState>() {
            state.autostart.follow(app, prefs.launch_at_login)?;
        }
    }
    Ok(prefs)
}

/// The message without the field name, which the form shows by the field itself.
fn message_of(e: &wattbar_core::Error) -> String {
    match e {
        wattbar_core::Error::Invalid { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[tauri::command]
pub fn open_preferences(app: AppHandle) -> Result<(), String> {
    crate::windows::open_preferences(&app).map_err(|e| e.to_string())
}

#[tauri::command]
pub fn set_low_power(enabled: bool, app: AppHandle) -> Result<bool, String> {
    apply_low_power(&app, enabled)
}

/// Shared by the tray and the dashboard: the engine records the manual choice in the store and
/// publishes it.
pub fn apply_low_power(app: &AppHandle, enabled: bool) -> Result<bool, String> {
    let state = app
        .try_state::<AppState>()
        .ok_or_else(|| "Wattbar is still starting".to_string())?;
    state
        .engine
        .send(Command::SetLowPower(enabled))
        .map_err(|e| e.to_string())?;
    Ok(enabled)
}

#[tauri::command]
pub fn reset_session(app: AppHandle) -> Result<(), String> {
    apply_reset(&app)
}

/// Ends the session and starts another; lifetime and history stay.
pub fn apply_reset(app: &AppHandle) -> Result<(), String> {
    let state = app
        .try_state::<AppState>()
        .ok_or_else(|| "Wattbar is still starting".to_string())?;
    state
        .engine
        .send(Command::ResetSession)
        .map_err(|e| e.to_string())
}

/// Draws the ledger's report of the last `range` (`1h`, `24h` or `30d`) and saves it as an SVG
/// in the Downloads folder, or the home folder where none is configured. Resolves with where it
/// went.
#[tauri::command]
pub async fn save_report(range: String, app: AppHandle) -> Result<String, String> {
    let (seconds, _) = wattbar_engine::view::range(&range)?;
    let reader = app
        .try_state::<AppState>()
        .ok_or("the engine is not running")?
        .engine
        .reader();
    // With no Downloads folder configured (no user-dirs.dirs, as on many minimal desktops), the
    // home folder, which is what `xdg-user-dir DOWNLOAD` answers there.
    let dir = app
        .path()
        .download_dir()
        .or_else(|_| app.path().home_dir())
        .map_err(|e| e.to_string())?;
    let now = wattbar_engine::unix_now();
    let svg = reader
        .report_svg(now - seconds, now)
        .await
        .map_err(|e| e.to_string())?;
    tauri::async_runtime::spawn_blocking(move || {
        let name = format!(
            "wattbar-report-{range}-{}.svg",
            chrono::Local::now().format("%Y-%m-%d-%H%M")
        );
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(name);
        std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.display().to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Stored history for `range`: `1h` and `24h` by minute, `30d` by hour, through the engine.
#[tauri::command]
pub async fn get_history(
    range: String,
    state: State<'_, AppState>,
) -> Result<HistoryPayload, String> {
    let (seconds, step) = wattbar_engine::view::range(&range)?;
    let now = wattbar_engine::unix_now();
    let points = state
        .engine
        .reader()
        .history(now - seconds, now + 1.0, step)
        .await
        .map_err(|e| e.to_string())?;
    Ok(HistoryPayload::new(range, step, points))
}
