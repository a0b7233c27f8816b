//! Commands the dashboard invokes. Each validates with wattbar-core, stores, then tells the
//! engine; a refused value changes nothing.

use crate::events::{DashboardPayload, HistoryPayload, StatePayload};
use crate::settings;
use crate::AppState;
use std::sync::Arc;
use tauri::{AppHandle, Manager, State};
use wattbar_core::Price;
use wattbar_engine::store::Store;
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
pub fn set_price(input: String, state: State<'_, AppState>) -> Result<f64, String> {
    let price = Price::parse_input(&input).map_err(|e| e.to_string())?;
    settings::save(
        &state.store,
        settings::PRICE_PER_KWH,
        serde_json::json!(price.per_kwh()),
    )?;
    state
        .engine
        .send(Command::SetPrice(price))
        .map_err(|e| e.to_string())?;
    Ok(price.per_kwh())
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

/// Stored history for `range`: `1h` and `24h` by minute, `30d` by hour.
#[tauri::command]
pub fn get_history(range: String, state: State<'_, AppState>) -> Result<HistoryPayload, String> {
    let (seconds, step) = wattbar_engine::view::range(&range)?;
    let now = wattbar_engine::unix_now();
    if !state.db_path.exists() {
        return Ok(HistoryPayload::new(range, step, Vec::new()));
    }
    let store = Store::open_read_only(&state.db_path).map_err(|e| e.to_string())?;
    let points = store
        .history(now - seconds, now + 1.0, step)
        .map_err(|e| e.to_string())?;
    Ok(HistoryPayload::new(range, step, points))
}
