// The only module that knows how the dashboard talks to Wattbar. Inside the app: Tauri IPC.
import { STATE_CHANGED, CMD_GET_DASHBOARD, CMD_SET_PRICE, CMD_SET_LOW_POWER } from "./contract.js";

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

// Closes the dashboard window (the app and its tray keep running).
export function closeWindow() {
  return tauri.window.getCurrentWindow().close();
}

// Calls back with each published state. Returns a promise of the unsubscribe function.
export function onState(callback) {
  return tauri.event.listen(STATE_CHANGED, (event) => callback(event.payload));
}
