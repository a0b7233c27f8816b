// The only module that knows how the dashboard talks to Wattbar: Tauri IPC inside the app, the
// local HTTP API (fetch, and Server-Sent Events from /v1/stream) in a browser. Both deliver the
// same payloads; nothing else in the UI knows which one is in use.
import {
  STATE_CHANGED, CMD_GET_DASHBOARD, CMD_SET_PRICE, CMD_SET_LOW_POWER, CMD_RESET_SESSION, CMD_GET_HISTORY,
  CMD_GET_BATTERY,
  CMD_SAVE_REPORT,
  CMD_GET_PREFERENCES, CMD_SET_PREFERENCE, CMD_OPEN_PREFERENCES,
  CMD_GET_KEYS, CMD_ADD_KEY, CMD_REMOVE_KEY, CMD_ROTATE_KEY,
} from "./contract.js";

const tauri = window.__TAURI__;
const ipc = Boolean(tauri && tauri.core && tauri.event);
const TOKEN_KEY = "wattbar-token";

// "ipc" in the app, "http" in a browser.
export const kind = ipc ? "ipc" : "http";

export function available() {
  return ipc || location.protocol === "http:" || location.protocol === "https:";
}


// The API token for writes, from the page's #token=… (then kept for this tab only).
function token() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}
token();

// What this transport can do beyond reading. A browser edits the preferences through the API
// once it has the token (the engine validates and saves them as it does the app's); the
// dashboard's quick price field and closing the window are the app's.
export const can = { preferences: ipc || Boolean(token()), price: ipc, closeWindow: ipc };

async function http(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    const t = token();
    if (!t) throw new Error("this needs the API token: open the page as /#token=<the output of wattbar-cli token>");
    headers.Authorization = `Bearer ${t}`;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

export function getDashboard() {
  return ipc ? tauri.core.invoke(CMD_GET_DASHBOARD) : http("GET", "/v1/dashboard");
}

// Resolves with the price in force; rejects with the reason it was refused.
export function setPrice(input) {
  if (!ipc) return Promise.reject(new Error("set the price in Wattbar's preferences"));
  return tauri.core.invoke(CMD_SET_PRICE, { input });
}

export function setLowPower(enabled) {
  return ipc ? tauri.core.invoke(CMD_SET_LOW_POWER, { enabled }) : http("PUT", "/v1/low-power", { enabled });
}

export function resetSession() {
  return ipc ? tauri.core.invoke(CMD_RESET_SESSION) : http("POST", "/v1/session/reset");
}

// range: "1h", "24h" or "30d". Resolves with { range, step_seconds, points, kwh }.
export function getHistory(range) {
  return ipc ? tauri.core.invoke(CMD_GET_HISTORY, { range })
    : http("GET", `/v1/history?range=${encodeURIComponent(range)}`);
}

// Resolves with { now, history, trends } (/v1/battery).
export function getBattery() {
  return ipc ? tauri.core.invoke(CMD_GET_BATTERY) : http("GET", "/v1/battery");
}

// Saves the report (the ledger's SVG) of the last `range` ("1h", "24h" or "30d"): in the app to
// the Downloads folder, in a browser as a download. Resolves with where it went.
export async function saveReport(range, seconds) {
  if (ipc) return tauri.core.invoke(CMD_SAVE_REPORT, { range });
  const to = Date.now() / 1000;
  const response = await fetch(`/v1/report.svg?from=${to - seconds}&to=${to}`);
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    throw new Error(data.error || `${response.status} ${response.statusText}`);
  }
  const disposition = response.headers.get("Content-Disposition") || "";
  const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || "wattbar-report.svg";
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return name;
}

// Every preference, as stored.
export function getPreferences() {
  return ipc ? tauri.core.invoke(CMD_GET_PREFERENCES) : http("GET", "/v1/preferences");
}

// Sets one preference; resolves with all of them, rejects with the message for that field.
export function setPreference(key, value) {
  if (ipc) return tauri.core.invoke(CMD_SET_PREFERENCE, { key, value });
  return http("PUT", `/v1/preferences/${encodeURIComponent(key)}`, value);
}

// The proxy's keys ({ keys: [...] }, never a secret); adding or rotating one resolves with its
// secret, shown once.
export function getKeys() {
  return ipc ? tauri.core.invoke(CMD_GET_KEYS) : http("GET", "/v1/keys");
}

export function addKey(body) {
  return ipc ? tauri.core.invoke(CMD_ADD_KEY, { body }) : http("POST", "/v1/keys", body);
}

export function removeKey(name) {
  return ipc ? tauri.core.invoke(CMD_REMOVE_KEY, { name })
    : http("DELETE", `/v1/keys/${encodeURIComponent(name)}`);
}

export function rotateKey(name) {
  return ipc ? tauri.core.invoke(CMD_ROTATE_KEY, { name })
    : http("POST", `/v1/keys/${encodeURIComponent(name)}/rotate`);
}

// In a browser the preferences open in a tab of their own, which inherits this tab's token.
export function openPreferences() {
  if (ipc) return tauri.core.invoke(CMD_OPEN_PREFERENCES);
  window.open("preferences.html", "wattbar-preferences");
  return Promise.resolve();
}

// Closes this window (the app and its tray keep running).
export function closeWindow() {
  if (ipc) return tauri.window.getCurrentWindow().close();
  window.close();
  return Promise.resolve();
}

// Calls back with each published state. Returns a promise of the unsubscribe function.
export function onState(callback) {
  if (ipc) return tauri.event.listen(STATE_CHANGED, (event) => callback(event.payload));
  const source = new EventSource("/v1/stream");
  source.addEventListener("state", (event) => callback(JSON.parse(event.data)));
  return Promise.resolve(() => source.close());
}
