// "Battery": each battery's health now, its health by the day as dots, and the straight line
// through them to 80 % with the day it gets there (or why there is none). From /v1/battery.
// A figure the gauge does not report is said so, never drawn as 0 or 100 %.
import { $, setText } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 480;
const HEIGHT = 96;
const DAY = 86400;

function svg(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function dayNumber(text) {
  return Date.parse(`${text}T00:00:00Z`) / 1000 / DAY;
}

function nowLine(b) {
  const parts = [b.battery];
  parts.push(b.health_percent === null || b.health_percent === undefined
    ? "health not reported" : `${b.health_percent.toFixed(0)} % health`);
  const c = b.cycles?.count;
  parts.push(c === undefined ? "cycles not reported" : `${c} cycle${c === 1 ? "" : "s"}`);
  if (b.full !== null && b.full !== undefined && b.design !== null && b.design !== undefined) {
    parts.push(`holds ${(b.full / 3600).toFixed(1)} of ${(b.design / 3600).toFixed(1)} Wh (${b.energy_from_text})`);
  }
  return parts.join(" · ");
}

function trendCaption(trend) {
  if (!trend) return "No history kept yet.";
  switch (trend.state) {
    case "not_enough_history":
      return `Not enough history for a trend: ${trend.days} of 30 days.`;
    case "falling": {
      const passed = trend.worn_on_day <= Math.floor(Date.now() / 1000 / DAY);
      const when = `${passed ? "passed" : "reaches"} 80 % around ${trend.worn_on ?? "—"}`;
      return `Falling ${(trend.per_year * -100).toFixed(1)} points a year: ${when} (a straight line through ${trend.days} days).`;
    }
    default:
      return `Not falling over ${trend.days} days: no date to give.`;
  }
}

// Health by the day from 70 % (or below the lowest seen) to the highest seen (at least 100 %),
// the trend line to 80 %.
function chart(el, days, trend) {
  const points = days.filter((d) => d.ratio !== null && d.ratio !== undefined)
    .map((d) => ({ x: dayNumber(d.day), y: d.ratio }));
  const first = points.length ? points[0].x : 0;
  const worn = trend?.state === "falling" && trend.worn_on ? dayNumber(trend.worn_on) : null;
  const last = Math.max(first + 30, ...points.map((p) => p.x), worn ?? -Infinity);
  const high = Math.max(1, ...points.map((p) => p.y));
  const low = Math.min(0.7, ...points.map((p) => p.y - 0.02));
  const x = (d) => ((d - first) / (last - first || 1)) * WIDTH;
  const y = (r) => ((high - Math.max(r, low)) / (high - low)) * HEIGHT;
  const box = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: "none", class: "strip" });
  box.append(svg("line", { x1: 0, x2: WIDTH, y1: y(0.8), y2: y(0.8), class: "zero" }));
  for (const p of points) {
    box.append(svg("circle", { cx: x(p.x), cy: y(p.y), r: 1.5, class: "slot" }));
  }
  if (worn !== null && points.length) {
    // The fitted line, through 80 % on the day it gets there, from the first day to the later
    // of that day and the last.
    const at = (d) => 0.8 + (trend.per_year / 365) * (d - worn);
    const end = Math.max(worn, last);
    box.append(svg("line", { x1: x(first), y1: y(at(first)), x2: x(end), y2: y(at(end)), class: "now-line" }));
  }
  el.replaceChildren(box);
  el.dataset.days = String(points.length);
}

export function renderBattery(body) {
  const panel = $("battery-panel");
  const now = body?.now ?? [];
  const history = body?.history ?? [];
  panel.hidden = now.length === 0 && history.length === 0;
  if (panel.hidden) return;
  const names = [...new Set([...now.map((b) => b.battery), ...history.map((d) => d.battery)])];
  const rows = names.map((name) => {
    const row = document.createElement("div");
    row.className = "battery-row";
    row.dataset.battery = name;
    const line = document.createElement("p");
    line.className = "battery-now";
    const current = now.find((b) => b.battery === name);
    setText(line, current ? nowLine(current) : `${name} · not seen now`);
    const plot = document.createElement("div");
    plot.className = "strip-box";
    plot.setAttribute("role", "img");
    plot.setAttribute("aria-label", `${name}: health by the day`);
    chart(plot, history.filter((d) => d.battery === name), body.trends?.[name]);
    const caption = document.createElement("p");
    caption.className = "caption battery-trend";
    setText(caption, trendCaption(body.trends?.[name]));
    row.append(line, plot, caption);
    return row;
  });
  $("battery-rows").replaceChildren(...rows);
}
