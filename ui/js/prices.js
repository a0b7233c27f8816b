// "Prices today and tomorrow": the price feed's slots (and the carbon feed's) as bars from
// local midnight today to midnight after tomorrow, the slot in force marked, negative prices
// below the line, a slot the feed has not published left empty (never a bar of 0), and what the
// feed said when it gave nothing. From the state's `prices`.
import * as fmt from "./format.js";
import { $, setText } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 480;
const HEIGHT = 64;

function svg(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function midnight(unix) {
  const d = new Date(unix * 1000);
  d.setHours(0, 0, 0, 0);
  return d.getTime() / 1000;
}

function clock(unix) {
  return new Date(unix * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

// A price per kWh as people read it: cents or pence where the currency has them.
export function perKwh(value, currency) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  const minor = { EUR: "ct", GBP: "p", USD: "¢", CHF: "Rp." }[currency];
  if (minor) return `${(value * 100).toFixed(1)} ${minor}/kWh`;
  return `${value.toFixed(3)} ${currency ?? ""}/kWh`;
}

function strip(el, feed, now) {
  const from = midnight(now);
  const to = from + 2 * 86400;
  const slots = (feed.slots ?? []).filter((s) => s.end > from && s.start < to);
  const high = Math.max(0, ...slots.map((s) => s.value));
  const low = Math.min(0, ...slots.map((s) => s.value));
  const span = high - low || 1;
  const x = (t) => ((Math.min(Math.max(t, from), to) - from) / (to - from)) * WIDTH;
  const y = (v) => ((high - v) / span) * HEIGHT;
  const chart = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: "none", class: "strip" });
  for (const s of slots) {
    const current = s.start <= now && now < s.end;
    const top = Math.min(y(s.value), y(0));
    const bar = svg("rect", {
      x: x(s.start), width: Math.max(x(s.end) - x(s.start) - 0.5, 0.5),
      y: top, height: Math.max(Math.abs(y(s.value) - y(0)), 0.5),
      class: current ? "slot now" : s.value < 0 ? "slot negative" : "slot",
    });
    bar.dataset.start = String(s.start);
    bar.dataset.value = String(s.value);
    chart.append(bar);
  }
  chart.append(svg("line", { x1: 0, x2: WIDTH, y1: y(0), y2: y(0), class: "zero" }));
  chart.append(svg("line", { x1: x(from + 86400), x2: x(from + 86400), y1: 0, y2: HEIGHT, class: "midnight" }));
  chart.append(svg("line", { x1: x(now), x2: x(now), y1: 0, y2: HEIGHT, class: "now-line" }));
  const days = document.createElement("p");
  days.className = "strip-days";
  for (const text of ["Today", "Tomorrow"]) {
    const span = document.createElement("span");
    span.textContent = text;
    days.append(span);
  }
  el.replaceChildren(chart, days);
  el.dataset.slots = String(slots.length);
  return slots.length ? [low < 0 ? low : Math.min(...slots.map((s) => s.value)), high] : null;
}

function caption(feed, unit, range) {
  const parts = [`${feed.feed}: now ${feed.now === null || feed.now === undefined ? "no slot (the fallback)" : unit(feed.now)}`];
  if (range) parts.push(`${unit(range[0])} to ${unit(range[1])}`);
  const w = feed.cheapest_2h;
  if (w) parts.push(`lowest 2 h ahead ${clock(w.start)}–${clock(w.end)} at ${unit(w.mean)}`);
  if (feed.error) parts.push(`the feed gave nothing: ${feed.error}`);
  else if (feed.fetched_unix) parts.push(`asked ${clock(feed.fetched_unix)}`);
  return parts.join(" · ");
}

let shown = null;

export function renderPrices(prices, now) {
  const panel = $("prices-panel");
  const price = prices?.price ?? null;
  const carbon = prices?.carbon ?? null;
  panel.hidden = !price && !carbon;
  if (panel.hidden) return;
  // Drawn again when the slots, the slot in force or what the feed said change.
  const key = JSON.stringify([price?.fetched_unix, price?.now, price?.error, price?.slots?.length,
    carbon?.fetched_unix, carbon?.now, carbon?.error, Math.floor(now / 60)]);
  if (key === shown) return;
  shown = key;
  for (const [feed, id, unit] of [
    [price, "price", (v) => perKwh(v, price?.currency)],
    [carbon, "carbon", (v) => `${fmt.figure(v)} gCO₂/kWh`],
  ]) {
    const row = $(`${id}-strip-row`);
    row.hidden = !feed;
    if (!feed) continue;
    const range = strip($(`${id}-strip`), feed, now);
    setText($(`${id}-strip-caption`), caption(feed, unit, range));
  }
}
