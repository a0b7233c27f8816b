//! Commands the windows invoke. Each asks the engine through its local API ([`Engine`]): it owns
//! the preferences and validates, saves and publishes every change; a refused value changes
//! nothing and comes back with its message.
//!
//! Rule: every command that calls the engine is `async` and makes its call on the blocking pool,
//! never on the main thread that draws the windows.

use crate::engine::{ApiError, Engine};
use crate::AppState;
use serde::Serialize;
use serde_json::{json, Value};
use tauri::{AppHandle, Manager, State};
use wattbar_core::Price;

/// Runs a call to the engine off the main thread.
async fn call<T: Send + 'static>(
    state: &State<'_, AppState>,
    f: impl FnOnce(&Engine) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let engine = state.engine.clone();
    tauri::async_runtime::spawn_blocking(move || f(&engine))
        .await
        .map_err(|e| ApiError::Unreachable {
            url: engine_url(state),
            why: e.to_string(),
        })?
}

fn engine_url(state: &State<'_, AppState>) -> String {
    state.engine.base().to_string()
}

fn text(e: ApiError) -> String {
    crate::engine::message(&e)
}

/// The dashboard's first payload: the state now and the last minutes of watts.
#[tauri::command]
pub async fn get_dashboard(state: State<'_, AppState>) -> Result<Value, String> {
    let payload = call(&state, |e| e.get("/v1/dashboard"))
        .await
        .map_err(text)?;
    // scripts/measure-dashboard-open times the opening to this line.
    tracing::debug!("dashboard answered");
    Ok(payload)
}

/// Sets the price from what was typed. Returns the price now in force, or why it was refused.
#[tauri::command]
pub async fn set_price(input: String, state: State<'_, AppState>) -> Result<f64, String> {
    let price = Price::parse_input(&input).map_err(|e| e.to_string())?;
    let body = json!(price.per_kwh());
    call(&state, move |e| {
        e.write("PUT", "/v1/preferences/price_per_kwh", Some(&body))
    })
    .await
    .map_err(text)?;
    Ok(price.per_kwh())
}

/// Every preference, with the schema's key names.
#[tauri::command]
pub async fn get_preferences(state: State<'_, AppState>) -> Result<Value, String> {
    call(&state, |e| e.get("/v1/preferences"))
        .await
        .map_err(text)
}

/// A refused preference: the field it belongs to and the message to show next to it.
#[derive(Debug, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// Sets one preference: validated by the one schema, stored and applied by the engine. Returns
/// every preference, or the field's message.
#[tauri::command]
pub async fn set_preference(
    key: String,
    value: Value,
    state: State<'_, AppState>,
) -> Result<Value, FieldError> {
    let path = format!("/v1/preferences/{key}");
    call(&state, move |e| e.write("PUT", &path, Some(&value)))
        .await
        .map_err(|e| FieldError {
            field: match &e {
                ApiError::Refused {
                    field: Some(field), ..
                } => field.clone(),
                _ => key.clone(),
            },
            message: crate::engine::message(&e),
        })
}

#[tauri::command]
pub fn open_preferences(app: AppHandle) -> Result<(), String> {
    crate::windows::open_preferences(&app).map_err(|e| e.to_string())
}

/// Turns low-power mode on or off by hand; the engine records the choice and publishes it.
#[tauri::command]
pub async fn set_low_power(enabled: bool, state: State<'_, AppState>) -> Result<bool, String> {
    let body = json!({ "enabled": enabled });
    call(&state, move |e| {
        e.write("PUT", "/v1/low-power", Some(&body))
    })
    .await
    .map_err(text)?;
    Ok(enabled)
}

/// Ends the session and starts another; lifetime and history stay.
#[tauri::command]
pub async fn reset_session(state: State<'_, AppState>) -> Result<(), String> {
    call(&state, |e| e.write("POST", "/v1/session/reset", None))
        .await
        .map(|_| ())
        .map_err(text)
}

/// Draws the ledger's report of the last `range` (`1h`, `24h` or `30d`) and saves it as an SVG
/// in the Downloads folder, or the home folder where none is configured. Resolves with where it
/// went.
#[tauri::command]
pub async fn save_report(
    range: String,
    app: AppHandle,
    state: State<'_, AppState>,
) -> Result<String, String> {
    let (seconds, _) = wattbar_engine::store::range(&range)?;
    // With no Downloads folder configured (no user-dirs.dirs, as on many minimal desktops), the
    // home folder, which is what `xdg-user-dir DOWNLOAD` answers there.
    let dir = app
        .path()
        .download_dir()
        .or_else(|_| app.path().home_dir())
        .map_err(|e| e.to_string())?;
    let now = wattbar_engine::unix_now();
    let path = format!("/v1/report.svg?from={}&to={now}", now - seconds);
    let svg = call(&state, move |e| e.get_text(&path))
        .await
        .map_err(text)?;
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

/// Stored history for `range`: `1h` and `24h` by minute, `30d` by hour.
#[tauri::command]
pub async fn get_history(range: String, state: State<'_, AppState>) -> Result<Value, String> {
    wattbar_engine::store::range(&range)?;
    let path = format!("/v1/history?range={range}");
    call(&state, move |e| e.get(&path)).await.map_err(text)
}

/// Each battery's health now, by the day and its trend (`/v1/battery`).
#[tauri::command]
pub async fn get_battery(state: State<'_, AppState>) -> Result<Value, String> {
    call(&state, |e| e.get("/v1/battery")).await.map_err(text)
}

/// The proxy's keys and where each budget stands; never a secret.
#[tauri::command]
pub async fn get_keys(state: State<'_, AppState>) -> Result<Value, String> {
    call(&state, |e| e.get("/v1/keys")).await.map_err(text)
}

/// Makes a key (`{name, budget, scope, clamp, energy_line}`); answers its secret, shown once.
#[tauri::command]
pub async fn add_key(body: Value, state: State<'_, AppState>) -> Result<Value, String> {
    call(&state, move |e| e.write("POST", "/v1/keys", Some(&body)))
        .await
        .map_err(text)
}

/// A key's name as a path segment; one that is no name is refused here.
fn key_path(name: &str, then: &str) -> Result<String, String> {
    wattbar_engine::keys::stored::check_name(name)?;
    Ok(format!("/v1/keys/{name}{then}"))
}

/// Removes a key: its secret is refused from then on.
#[tauri::command]
pub async fn remove_key(name: String, state: State<'_, AppState>) -> Result<Value, String> {
    let path = key_path(&name, "")?;
    call(&state, move |e| e.delete(&path)).await.map_err(text)
}

/// Gives a key a new secret, answered once; the old one is refused from then on.
#[tauri::command]
pub async fn rotate_key(name: String, state: State<'_, AppState>) -> Result<Value, String> {
    let path = key_path(&name, "/rotate")?;
    call(&state, move |e| e.write("POST", &path, None))
        .await
        .map_err(text)
}
