// The only module that knows how the dashboard talks to Wattbar. Inside the app: Tauri IPC.
import {
  STATE_CHANGED, CMD_GET_DASHBOARD, CMD_SET_PRICE, CMD_SET_LOW_POWER, CMD_RESET_SESSION, CMD_GET_HISTORY,
} from "./contract.js";

const tauri = window.__TAURI__;

export function available() {
  return Boolean(tauri && tauri.core && tauri.event);
}

export function getDashboard() {
  return tauri.core.invoke(CMD_GET_DASHBOARD);
}

// Resolves with the price in force; rejects with the reason it was refused.
export function setPrice(input) {
  return tauri.core.invoke(CMD_SET_PRICE, { input });
}

export function setLowPower(enabled) {
  return tauri.core.invoke(CMD_SET_LOW_POWER, { enabled });
}

export function resetSession() {
  return tauri.core.invoke(CMD_RESET_SESSION);
}

// range: "1h", "24h" or "30d". Resolves with { range, step_seconds, points, kwh }.
export function getHistory(range) {
  return tauri.core.invoke(CMD_GET_HISTORY, { range });
}

// Closes the dashboard window (the app and its tray keep running).
export function closeWindow() {
  return tauri.window.getCurrentWindow().close();
}

// Calls back with each published state. Returns a promise of the unsubscribe function.
export function onState(callback) {
  return tauri.event.listen(STATE_CHANGED, (event) => callback(event.payload));
}
