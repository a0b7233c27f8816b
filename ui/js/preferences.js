// The preferences window: every field is saved as soon as it changes, validated by Wattbar's one
// schema; a refused value shows its message next to the field and changes nothing.
import * as transport from "./transport.js";
import { followFeed, showFeed } from "./feeds.js";
import { followKeys } from "./keys-prefs.js";

const $ = (id) => document.getElementById(id);
const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
let tariffs = [];

// A typed number (a decimal comma is fine), or the text as it is, so that the schema's own
// message explains what is wrong with it.
function numberOrText(text) {
  const n = Number(text.replace(",", "."));
  return text === "" || !Number.isFinite(n) ? text : n;
}

// What the field holds, as the schema takes it.
function valueOf(input) {
  const kind = input.dataset.kind;
  if (kind === "bool") return input.checked;
  const text = input.value.trim();
  if (kind === "text") return input.id === "currency" ? text.toUpperCase() : text;
  if (kind === "optional-text") return text === "" ? null : text;
  if (kind === "choice") return input.value;
  // Text that is not JSON goes as it is: the schema's message says what it wants.
  if (kind === "json") {
    if (text === "") return {};
    try { return JSON.parse(text); } catch { return text; }
  }
  if ((kind === "optional-number" || kind === "optional-integer") && text === "") return null;
  const value = numberOrText(text);
  return (kind === "integer" || kind === "optional-integer") && !Number.isInteger(value) ? text : value;
}

function show(input, value) {
  if (input.dataset.kind === "bool") input.checked = Boolean(value);
  else if (input.dataset.kind === "json") {
    const empty = !value || Object.keys(value).length === 0;
    input.value = empty ? "" : JSON.stringify(value);
  } else input.value = value === null || value === undefined ? "" : String(value);
}

function setMessage(key, text, kind) {
  const el = $(`msg-${key}`);
  if (el) { el.textContent = text; el.dataset.kind = kind; }
  const input = $(key);
  if (input) {
    if (kind === "error") input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
  }
}

// Changes reach the engine in the order they were made: each waits for the one before, and
// carries the value as it was when it was made, not as later edits leave it.
let lastSave = Promise.resolve();

function save(key, value) {
  const made = JSON.parse(JSON.stringify(value));
  const saved = lastSave.then(() => send(key, made));
  lastSave = saved;
  return saved;
}

async function send(key, value) {
  try {
    await transport.setPreference(key, value);
    setMessage(key, "Saved", "ok");
    return true;
  } catch (reason) {
    setMessage(key, reason && reason.message ? reason.message : String(reason), "error");
    return false;
  }
}

// A table cell with a "Remove" button for one row.
function removeCell(label, onClick) {
  const td = document.createElement("td");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "secondary";
  button.textContent = "Remove";
  button.setAttribute("aria-label", label);
  button.addEventListener("click", onClick);
  td.appendChild(button);
  return td;
}

function tariffRow(rule, index) {
  const tr = document.createElement("tr");
  const days = document.createElement("td");
  days.className = "days";
  for (const d of DAYS) {
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = rule.weekdays.includes(d);
    box.setAttribute("aria-label", `Tariff ${index + 1} on ${d}`);
    box.addEventListener("change", () => {
      rule.weekdays = DAYS.filter((x, i) => days.querySelectorAll("input")[i].checked);
      saveTariffs();
    });
    label.append(box, d.slice(0, 2));
    days.appendChild(label);
  }
  const cell = (field, type, label) => {
    const td = document.createElement("td");
    const input = document.createElement("input");
    input.type = type;
    input.value = String(rule[field]);
    input.setAttribute("aria-label", `Tariff ${index + 1} ${label}`);
    if (field === "price") input.inputMode = "decimal";
    input.addEventListener("change", () => {
      const v = input.value.trim();
      rule[field] = field === "price" ? numberOrText(v) : v;
      saveTariffs();
    });
    td.appendChild(input);
    return td;
  };
  const remove = removeCell(`Remove tariff ${index + 1}`, () => { tariffs.splice(index, 1); renderTariffs(); saveTariffs(); });
  tr.append(days, cell("from", "text", "from (hh:mm)"), cell("to", "text", "to (hh:mm, 24:00 for midnight)"), cell("price", "text", "price"), remove);
  return tr;
}

function renderTariffs() {
  $("tariff-rows").replaceChildren(...tariffs.map(tariffRow));
}

function saveTariffs() {
  return save("tariffs", tariffs);
}

// Routes: requested model → served model, one row each. A row is sent once both sides are
// filled; the schema says what is wrong with a name.
let routes = [];

function routeRow(route, index) {
  const tr = document.createElement("tr");
  const cell = (side, label, placeholder) => {
    const td = document.createElement("td");
    const input = document.createElement("input");
    input.id = `route-${side}-${index}`;
    input.value = route[side];
    input.placeholder = placeholder;
    input.spellcheck = false;
    input.setAttribute("list", "model-choices");
    input.setAttribute("aria-label", `Route ${index + 1}: ${label}`);
    input.addEventListener("change", () => {
      route[side] = input.value.trim();
      saveRoutes();
    });
    td.appendChild(input);
    return td;
  };
  const remove = removeCell(`Remove route ${index + 1}`, () => { routes.splice(index, 1); renderRoutes(); saveRoutes(true); });
  tr.append(cell("from", "requested model", "llama3.1:70b or *"), cell("to", "served model", "qwen3:1b"), remove);
  return tr;
}

function renderRoutes() {
  $("route-rows").replaceChildren(...routes.map(routeRow));
}

// `removed`: a row was taken out, so what is left is saved even when it is nothing.
function saveRoutes(removed = false) {
  const complete = routes.filter((r) => r.from !== "" && r.to !== "");
  if (complete.length < routes.length) {
    setMessage("low_power_routes", "Fill in both models of each route to save it", "info");
    if (complete.length === 0 && !removed) return Promise.resolve(false);
  }
  return save("low_power_routes", Object.fromEntries(complete.map((r) => [r.from, r.to])));
}

// The models the server has offered (measured or held), as choices for a route's two sides.
async function offerModels(prefs) {
  const names = new Set([prefs.low_power_model]);
  const dashboard = await transport.getDashboard().catch(() => null);
  const state = dashboard && dashboard.state;
  for (const m of (state && state.inference && state.inference.models) || []) names.add(m.model);
  for (const r of (state && state.resident) || []) names.add(r.model);
  $("model-choices").replaceChildren(...[...names].filter(Boolean).sort().map((name) => {
    const option = document.createElement("option");
    option.value = name;
    return option;
  }));
}

// The wall meter: one preference made of several fields. Secrets are never shown back: a field
// left empty keeps the one kept before, and is sent only when typed.
const SECRETS = [["wall_meter_password", "password"], ["wall_meter_token", "token"]];

function showWallMeter(meter) {
  $("wall_meter_url").value = meter ? meter.url : "";
  $("wall_meter_kind").value = meter && meter.kind ? meter.kind : "";
  $("wall_meter_channels").value = meter && meter.channels ? meter.channels.join(", ") : "";
  $("wall_meter_pin").value = meter && meter.tls_pin_sha256 ? meter.tls_pin_sha256 : "";
  showSecretsKept(meter);
}

function showSecretsKept(meter) {
  for (const [id] of SECRETS) $(id).placeholder = meter && meter.has_secret ? "kept (type to replace)" : "";
}

// Saves the wall meter as the form has it; a secret sent leaves the form once it is kept. What
// the user is typing elsewhere meanwhile is left alone.
async function saveWallMeter() {
  const value = wallMeterValue();
  if (!(await save("wall_meter", value))) return;
  for (const [id, key] of SECRETS) {
    if (value && value[key] && $(id).value.trim() === value[key]) $(id).value = "";
  }
  const saved = await transport.getPreferences().catch(() => null);
  if (saved) showSecretsKept(saved.wall_meter);
}

function wallMeterValue() {
  const url = $("wall_meter_url").value.trim();
  if (url === "") return null;
  const value = { url };
  const kind = $("wall_meter_kind").value;
  if (kind) value.kind = kind;
  const channels = $("wall_meter_channels").value.split(",").map((c) => c.trim()).filter(Boolean);
  if (channels.length) value.channels = channels;
  const pin = $("wall_meter_pin").value.trim();
  if (pin) value.tls_pin_sha256 = pin;
  const password = $("wall_meter_password").value;
  if (password) value.password = password;
  const token = $("wall_meter_token").value.trim();
  if (token) value.token = token;
  return value;
}

// MQTT and OTLP: one preference each, made of several fields. The broker's password is a secret
// as the wall meter's are: never shown back, sent only when typed.
function showIntegrations(prefs) {
  const mqtt = prefs.mqtt;
  $("mqtt_url").value = mqtt ? mqtt.url : "";
  $("mqtt_topic_prefix").value = mqtt && mqtt.topic_prefix ? mqtt.topic_prefix : "";
  $("mqtt_interval_s").value = mqtt ? mqtt.interval_ms / 1000 : 10;
  $("mqtt_password").placeholder = mqtt && mqtt.has_secret ? "kept (type to replace)" : "";
  const otlp = prefs.otlp;
  $("otlp_endpoint").value = otlp ? otlp.endpoint : "";
  $("otlp_interval_s").value = otlp ? otlp.interval_ms / 1000 : 60;
  $("otlp_headers").placeholder = otlp && otlp.has_secret ? "kept (type to replace)" : "Authorization=Basic%20…";
}

function seconds(id) {
  const s = Number($(id).value);
  return Number.isFinite(s) && s > 0 ? Math.round(s * 1000) : undefined;
}

async function saveMqtt() {
  const url = $("mqtt_url").value.trim();
  let value = null;
  if (url !== "") {
    value = { url, interval_ms: seconds("mqtt_interval_s") };
    const prefix = $("mqtt_topic_prefix").value.trim();
    if (prefix) value.topic_prefix = prefix;
    const password = $("mqtt_password").value;
    if (password) value.password = password;
  }
  if (!(await save("mqtt", value))) return;
  if (value && value.password && $("mqtt_password").value === value.password) $("mqtt_password").value = "";
  const saved = await transport.getPreferences().catch(() => null);
  if (saved) $("mqtt_password").placeholder = saved.mqtt && saved.mqtt.has_secret ? "kept (type to replace)" : "";
}

async function saveOtlp() {
  const endpoint = $("otlp_endpoint").value.trim();
  const value = endpoint === "" ? null : { endpoint, interval_ms: seconds("otlp_interval_s") };
  const headers = $("otlp_headers").value.trim();
  if (value && headers) value.headers = headers;
  if (!(await save("otlp", value))) return;
  if (headers && $("otlp_headers").value.trim() === headers) $("otlp_headers").value = "";
  const saved = await transport.getPreferences().catch(() => null);
  if (saved) showIntegrations(saved);
}

async function start() {
  let prefs;
  try {
    prefs = await transport.getPreferences();
  } catch (reason) {
    const el = $("load-error");
    el.hidden = false;
    el.textContent = `Preferences could not be read: ${reason}`;
    return;
  }
  for (const input of document.querySelectorAll("[data-key]")) {
    const key = input.dataset.key;
    show(input, prefs[key]);
    input.addEventListener("change", () => save(key, valueOf(input)));
  }
  routes = Object.entries(prefs.low_power_routes || {}).map(([from, to]) => ({ from, to }));
  renderRoutes();
  $("add-route").addEventListener("click", () => {
    routes.push({ from: "", to: "" });
    renderRoutes();
    $(`route-from-${routes.length - 1}`).focus();
  });
  offerModels(prefs);
  showWallMeter(prefs.wall_meter);
  for (const input of document.querySelectorAll("[data-wall]")) input.addEventListener("change", saveWallMeter);
  showIntegrations(prefs);
  for (const kind of ["price", "carbon"]) {
    showFeed(kind, prefs[`${kind}_feed`]);
    followFeed(kind, save, () => transport.getPreferences().catch(() => null));
  }
  for (const input of document.querySelectorAll("[data-mqtt]")) input.addEventListener("change", saveMqtt);
  for (const input of document.querySelectorAll("[data-otlp]")) input.addEventListener("change", saveOtlp);
  tariffs = prefs.tariffs.map((r) => ({ ...r, weekdays: [...r.weekdays] }));
  renderTariffs();
  $("add-tariff").addEventListener("click", () => {
    tariffs.push({ weekdays: ["mon", "tue", "wed", "thu", "fri"], from: "17:00", to: "21:00", price: prefs.price_per_kwh });
    renderTariffs();
    saveTariffs();
  });
  document.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "w") {
      event.preventDefault();
      transport.closeWindow();
    }
  });
  await followKeys();
  document.body.dataset.ready = "true";
}

start();
