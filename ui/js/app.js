// The dashboard: shows published state and sends the user's changes. Updates text in place.
import * as transport from "./transport.js";
import * as fmt from "./format.js";
import { $, setText } from "./dom.js";
import { renderInference, renderResident } from "./models.js";
import { renderPrograms } from "./programs.js";
import { renderKeys } from "./keys.js";
import { renderPrices } from "./prices.js";
import { renderBattery } from "./battery.js";

const WINDOW_SECONDS = 5 * 60;
let history = [];
// Session energy and cost over time, from the states received since the page opened.
let session = [];
let lowPowerBusy = false;

function renderUnavailable(list) {
  const box = $("unavailable-box");
  box.hidden = list.length === 0;
  setText($("unavailable-count"), String(list.length));
  const ul = $("unavailable");
  const key = JSON.stringify(list);
  if (ul.dataset.key === key) return;
  ul.dataset.key = key;
  ul.replaceChildren(...list.map((u) => {
    const li = document.createElement("li");
    li.textContent = `${u.source}: ${u.reason}`;
    return li;
  }));
}

// What the headline covers, said plainly: a sum of parts is not the machine.
function renderScope(state) {
  const el = $("scope");
  el.hidden = !state.scope;
  el.dataset.scope = state.scope ?? "";
  if (!state.scope) return;
  const what = state.scope_text ?? state.scope;
  const said = `${what.charAt(0).toUpperCase()}${what.slice(1)}, ${state.quality ?? "no reading"}`;
  if (state.quality === "calibrated" && state.bound_watts !== null && state.bound_watts !== undefined) {
    setText(el, `${said} ± ${fmt.watts(state.bound_watts)} W: the sensors, as learned against it while it read`);
    return;
  }
  setText(el, state.scope === "components" ? `${said}: not the whole machine` : said);
}

// With a wall meter live beside the sensors: how much of the socket's draw they see.
function renderGap(state) {
  const gap = $("scope-gap");
  const sensors = state.sensors_watts ?? null;
  const seen = state.wall_watts > 0 && sensors !== null ? sensors / state.wall_watts : null;
  gap.hidden = seen === null;
  if (seen !== null) {
    const what = state.sensors_scope_text ? ` (${state.sensors_scope_text}, ${fmt.watts(sensors)} W)` : "";
    setText(gap, `The sensors see ${Math.round(seen * 100)} % of the wall here${what}`);
  }
}

const SCOPE_NAMES = { wall: "at the wall", system: "of the whole machine", components: "of the sensors' parts" };
const scopeName = (scope) => SCOPE_NAMES[scope] ?? "of no recorded scope";

// Energy of two scopes is never added: the session says what its figures cover, since when,
// and what it measured in other scopes.
function renderSessionScope(state) {
  const el = $("session-scope");
  const others = state.session_other_scopes ?? [];
  const changes = state.session_scope_changes ?? [];
  el.hidden = !state.session_scope || (others.length === 0 && changes.length === 0);
  if (el.hidden) return;
  const last = changes[changes.length - 1];
  const since = last ? ` since ${new Date(last.unix * 1000).toLocaleTimeString()}` : "";
  const apart = others.map((o) => `${fmt.energy(o.kwh)} ${scopeName(o.scope)}`).join(", ");
  setText(el, `Measured ${scopeName(state.session_scope)}${since}.${apart ? ` Also this session, not added: ${apart}.` : ""}`);
}

// Totals in the headline's scope; what was measured in other scopes is listed, not added.
function renderTotalsScope(totals) {
  const el = $("totals-scope");
  const others = totals?.lifetime?.other_scopes ?? [];
  el.hidden = others.length === 0;
  if (el.hidden) return;
  const apart = others.map((o) => `${fmt.energy(o.kwh)} ${scopeName(o.scope)}`).join(", ");
  setText(el, `Totals ${scopeName(totals.lifetime.scope)}; over its lifetime also ${apart}, not added.`);
}

function renderBreakdown(items) {
  const body = $("breakdown-rows");
  const key = JSON.stringify(items.map((i) => [i.domain, i.device, i.source, i.quality]));
  if (body.dataset.key !== key) {
    body.dataset.key = key;
    body.replaceChildren(...items.map(() => {
      const tr = document.createElement("tr");
      for (let i = 0; i < 3; i++) tr.appendChild(document.createElement("td"));
      return tr;
    }));
  }
  items.forEach((item, n) => {
    const cells = body.children[n].children;
    setText(cells[0], item.device ? `${item.domain} ${item.device}` : item.domain);
    setText(cells[1], `${fmt.watts(item.watts)} W`, item.watts ?? "");
    setText(cells[2], `${item.quality} · ${item.source}`);
  });
}

// In a wide window (a browser on the `serve` UI) the dashboard is a grid of cards and its
// charts have axes and a time scale; at the tray window's width they stay small lines.
const WIDE = window.matchMedia("(min-width: 900px)");

// A y-axis tick: small figures (a session's first kWh, its cost) to two significant digits,
// never rounded to a row of zeros.
function tick(v) {
  if (v === 0 || v === null) return "0";
  return Math.abs(v) < 1 ? String(Number(v.toPrecision(2))) : String(Number(v.toFixed(1)));
}

// uPlot line charts. A null value is a hole in the line: absent, never zero. `unit` labels the
// y axis in a wide window.
function chart(el, stroke, unit) {
  const width = () => Math.max(120, el.clientWidth || 300);
  const small = el.classList.contains("small");
  const wide = WIDE.matches;
  const css = getComputedStyle(document.documentElement);
  const muted = css.getPropertyValue("--muted").trim() || "#6b6b73";
  const line = css.getPropertyValue("--line").trim() || "#e4e4ea";
  const axis = (extra) => ({ stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 }, font: "11px system-ui, sans-serif", ...extra });
  const plot = new uPlot({
    width: width(),
    height: wide ? (small ? 120 : 200) : (small ? 28 : 60),
    cursor: { show: wide, x: true, y: false, points: { show: false } }, legend: { show: false }, select: { show: false },
    scales: { x: { time: true }, y: { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
    axes: wide ? [axis({}), axis({ label: unit, labelSize: 16, size: 64, values: (u, splits) => splits.map(tick) })] : [{ show: false }, { show: false }],
    // Points only where there are few, so a single stored minute is still visible.
    series: [{}, { stroke, width: 1.5, spanGaps: false, points: { show: (u) => u.data[0].length <= 60, size: 4 } }],
  }, [[], []], el);
  const resized = new ResizeObserver(() => plot.setSize({ width: width(), height: plot.height }));
  resized.observe(el);
  // Taken down with the chart when it is made again across the breakpoint.
  plot.resized = resized;
  return plot;
}

const charts = {};
function makeCharts() {
  const stroke = accent();
  charts.watts = chart($("spark-watts"), stroke, "W");
  charts.kwh = chart($("spark-kwh"), stroke, "kWh");
  charts.cost = chart($("spark-cost"), stroke, "cost");
  charts.history = chart($("history-chart"), stroke, "W");
}
function accent() {
  return getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#c98f00";
}

function series(points, key) {
  return [points.map((p) => p.t), points.map((p) => p[key])];
}

let sparkPending = false;
let sparkDrawn = -Infinity;
let sessionDrawn = -Infinity;
// The big number follows every sample; the charts are redrawn every 5 s (the watts line keeps
// every sample and moves on in 5 s steps): each redraw is a repaint in WebKit, and under Xvfb,
// where WebKit paints in software, redrawing the line every second cost more than the numbers.
const SPARK_REDRAW_MS = 5000;
function renderSpark() {
  // At most one redraw per frame, and none while the window is hidden.
  if (sparkPending || document.hidden) return;
  if (performance.now() - sparkDrawn < SPARK_REDRAW_MS && history.length >= 10) return;
  sparkPending = true;
  requestAnimationFrame((now) => {
    sparkPending = false;
    sparkDrawn = now;
    charts.watts.setData(series(history, "watts"));
    if (now - sessionDrawn >= SPARK_REDRAW_MS || session.length < 10) {
      sessionDrawn = now;
      charts.kwh.setData(series(session, "kwh"));
      charts.cost.setData(series(session, "cost"));
    }
  });
}

const RANGE_SECONDS = { "1h": 3600, "24h": 86400, "30d": 30 * 86400 };
let historyRange = "1h";

async function loadHistory() {
  try {
    const h = await transport.getHistory(historyRange);
    const end = Date.now() / 1000;
    // One scope on one line: the wall's watts and the sensors' are different quantities.
    const points = h.points.filter((p) => (p.scope ?? null) === (h.scope ?? null)).map((p) => ({ t: p.t, watts: p.mean_watts }));
    // The data first (it rescales), then the x range: the whole tab, however few points.
    charts.history.setData(series(points, "watts"));
    charts.history.setScale("x", { min: end - RANGE_SECONDS[historyRange], max: end });
    setText($("history-kwh"), fmt.energy(h.kwh), h.kwh);
    setText($("history-points"), fmt.plural(h.points.length, "point", "points"), h.points.length);
  } catch (reason) {
    setText($("history-kwh"), `history unavailable: ${reason}`);
  }
}

// The report of the range shown: power, energy and cost per day, energy per model.
async function saveReport() {
  const button = $("save-report");
  button.disabled = true;
  setText($("report-status"), "drawing…");
  try {
    const where = await transport.saveReport(historyRange, RANGE_SECONDS[historyRange]);
    setText($("report-status"), `saved: ${where}`);
  } catch (reason) {
    setText($("report-status"), `no report: ${reason.message || reason}`);
  } finally {
    button.disabled = false;
  }
}

function selectRange(range) {
  historyRange = range;
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.range === range));
  }
  loadHistory();
}

let resetTimer = null;
async function resetClicked() {
  const button = $("reset-session");
  if (button.dataset.armed !== "true") {
    button.dataset.armed = "true";
    button.textContent = "Click again to reset";
    resetTimer = setTimeout(() => { button.dataset.armed = "false"; button.textContent = "Reset session"; }, 4000);
    return;
  }
  clearTimeout(resetTimer);
  button.dataset.armed = "false";
  button.textContent = "Reset session";
  try {
    await transport.resetSession();
  } catch (reason) {
    message(`Session not reset. ${reason}`, "error");
  }
}

function render(state) {
  setText($("watts"), fmt.watts(state.watts), state.watts ?? "");
  const q = $("quality");
  setText(q, state.quality ?? "no reading");
  q.dataset.quality = state.quality ?? "";
  setText($("source"), state.source ?? "no source");
  renderScope(state);
  renderGap(state);
  // A stalled counter is listed with the sources that give nothing: its domain comes from the
  // next source meanwhile.
  renderUnavailable(state.unavailable.concat((state.stalled || []).map((s) => ({
    source: `${s.source} (${s.domain}${s.device ? ` ${s.device}` : ""})`,
    reason: s.reason,
  }))));
  renderBreakdown(state.breakdown);
  setText($("session-kwh"), fmt.energy(state.session_kwh), state.session_kwh);
  setText($("session-cost"), fmt.money(state.session_cost, state.currency), state.session_cost);
  // Energy a price feed had no slot for was priced at the fixed price: the cost says so.
  const fallback = state.session_fallback_kwh ?? 0;
  const note = $("session-cost-note");
  note.hidden = !(fallback > 0 && state.prices?.price);
  if (!note.hidden) setText(note, `${fmt.energy(fallback)} of it at the fixed price: the feed had no price then`);
  const carbon = state.carbon_g;
  $("carbon-row").hidden = carbon === null || carbon === undefined;
  if (carbon !== null && carbon !== undefined) setText($("session-carbon"), `${carbon.toFixed(1)} g CO₂`, carbon);
  if (state.totals) {
    for (const key of ["today", "month", "lifetime"]) {
      const t = state.totals[key];
      setText($(`${key}-kwh`), fmt.energy(t.kwh), t.kwh);
      setText($(`${key}-cost`), fmt.money(t.cost, state.currency), t.cost);
    }
  }
  renderSessionScope(state);
  renderTotalsScope(state.totals);
  setText($("price-value"), `${state.price_per_kwh} ${state.currency}/kWh`, state.price_per_kwh);
  renderLowPower(state.low_power);
  renderInference(state.inference, state.inflight, state.server_models, state.profiles,
    state.energy_classes);
  renderKeys(state.keys, state.currency);
  renderResident(state.resident, state.currency);
  renderPrograms(state.programs);
  renderPrices(state.prices, state.at ?? Date.now() / 1000);
  const os = $("os-low-power");
  os.hidden = state.os_low_power_mode === null || state.os_low_power_mode === undefined;
  if (!os.hidden) setText(os, `macOS Low Power Mode: ${state.os_low_power_mode ? "on" : "off"}`);
  const notice = $("notice");
  notice.hidden = !state.notice;
  setText(notice, state.notice ?? "");
}

const REASONS = {
  manual: "switched by hand",
  "auto-threshold": "automatic, from the power draw",
  battery: "automatic, on battery",
};

function renderLowPower(lp) {
  if (!lowPowerBusy) $("low-power").checked = lp.enabled;
  const status = $("low-power-status");
  const since = lp.since ? ` since ${new Date(lp.since * 1000).toLocaleTimeString()}` : "";
  const why = lp.reason ? ` · ${REASONS[lp.reason] ?? lp.reason}` : "";
  setText(status, `${lp.enabled ? "On" : "Off"}${why}${since}`);
  status.dataset.reason = lp.reason ?? "";
  status.dataset.enabled = String(lp.enabled);
  setText($("recommendation"), lp.recommendation);
  // What routing did, once it is chosen or has routed anything.
  const routing = $("routing");
  const r = lp.routed ?? { requests: 0 };
  routing.hidden = lp.action !== "route" && r.requests === 0;
  const j = r.energy_joules;
  // Below a watt-hour in joules: a few answers would all read 0.00 Wh.
  const energy = j === null || j === undefined ? ""
    : `, ${j < 3600 ? `${fmt.figure(j)} J` : fmt.energy(j / 3.6e6)}`;
  const unmeasured = r.unmeasured > 0 ? ` (${r.unmeasured} not measured)` : "";
  setText(routing, `${lp.action === "route" ? "Routes to the low-power model while on" : "Advises only"}`
    + ` · ${r.requests} request${r.requests === 1 ? "" : "s"} routed${energy}${unmeasured}`);
  routing.dataset.requests = String(r.requests);
}

function onState(state) {
  if (state.at !== null && (history.length === 0 || history[history.length - 1].t < state.at)) {
    history.push({ t: state.at, watts: state.watts });
    const oldest = state.at - WINDOW_SECONDS;
    while (history.length && history[0].t < oldest) history.shift();
    if (session.length && state.session_kwh < session[session.length - 1].kwh) session = [];
    session.push({ t: state.at, kwh: state.session_kwh, cost: state.session_cost });
    if (session.length > 3600) session.shift();
    renderSpark();
  }
  render(state);
}

function message(text, kind) {
  const el = $("price-message");
  el.textContent = text;
  el.dataset.kind = kind;
}

async function savePrice(event) {
  event.preventDefault();
  try {
    const price = await transport.setPrice($("price-input").value);
    message(`Saved: ${price} per kWh from now on`, "ok");
  } catch (reason) {
    message(`Not saved. ${reason}`, "error");
  }
}

async function toggleLowPower() {
  const box = $("low-power");
  lowPowerBusy = true;
  try {
    await transport.setLowPower(box.checked);
  } catch (reason) {
    box.checked = !box.checked;
    message(`Low-power mode unchanged. ${reason}`, "error");
  } finally {
    lowPowerBusy = false;
  }
}

async function start() {
  if (!transport.available()) {
    setText($("source"), "no connection to Wattbar");
    return;
  }
  document.body.dataset.transport = transport.kind;
  makeCharts();
  // Across the breakpoint the charts are made again, with or without axes, and redrawn.
  WIDE.addEventListener("change", () => {
    for (const c of Object.values(charts)) { c.resized.disconnect(); c.destroy(); }
    makeCharts();
    sparkDrawn = -Infinity;
    sessionDrawn = -Infinity;
    renderSpark();
    loadHistory();
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) renderSpark(); });
  $("price-form").hidden = !transport.can.price;
  const prefsButton = $("open-preferences");
  prefsButton.hidden = !transport.can.preferences;
  prefsButton.addEventListener("click", () => transport.openPreferences());
  $("price-form").addEventListener("submit", savePrice);
  $("low-power").addEventListener("change", toggleLowPower);
  $("reset-session").addEventListener("click", resetClicked);
  $("save-report").addEventListener("click", saveReport);
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => selectRange(tab.dataset.range));
  }
  setInterval(() => { if (!document.hidden) loadHistory(); }, 30000);
  // A battery's figures change by the day: asked at start and every ten minutes.
  const loadBattery = () => transport.getBattery().then(renderBattery, () => renderBattery(null));
  setInterval(() => { if (!document.hidden) loadBattery(); }, 600000);
  document.addEventListener("keydown", (event) => {
    // Ctrl+W (Linux) and Cmd+W (macOS) close the dashboard, as in any small utility window.
    if (transport.can.closeWindow && (event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "w") {
      event.preventDefault();
      transport.closeWindow();
    }
  });
  await transport.onState(onState);
  const init = await transport.getDashboard();
  history = init.history.slice();
  $("price-input").value = String(init.state.price_per_kwh);
  if (init.state.at !== null) {
    session.push({ t: init.state.at, kwh: init.state.session_kwh, cost: init.state.session_cost });
  }
  renderSpark();
  render(init.state);
  await loadHistory();
  await loadBattery();
  document.body.dataset.ready = "true";
}

start().catch((reason) => {
  const notice = $("notice");
  notice.hidden = false;
  notice.textContent = `The dashboard could not start: ${reason}`;
  document.body.dataset.failed = String(reason);
});
