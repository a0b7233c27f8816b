// The inference panel: figures per model and the last requests through the inference proxy.
// Its tables are rebuilt only when the engine's inference view changes (its seq moves once per
// finished request or new idle baseline), not on every sample; the in-flight count is one line of
// text and follows every state. Unknown figures read "—", never 0.
import * as fmt from "./format.js";
import { $, setText } from "./dom.js";

// What is on screen: the view's seq and its last record, so that an engine restarted with the
// same seq but other records is still redrawn.
let shownKey = null;

const STATUS = { ok: "ok", cancelled: "cancelled", error: "error", remote: "cloud" };

// An element with attributes (null and undefined ones left out) and children (text or nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, String(value));
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

// A figure's cell: the text, and the raw number (empty when unknown) for tests and tools.
function cell(text, value, ...more) {
  return el("td", { "data-value": value ?? "" }, text, ...more);
}

// Every request of the model ran on a cloud model: nothing was drawn here.
function onlyRemote(m) {
  return m.requests > 0 && (m.requests_by_status?.remote ?? 0) === m.requests;
}

// What the model's energy covers: a model measured at the wall and on the CPU package has a row
// for each, never one sum of both.
function scopeBadge(m) {
  const scope = m.scope ?? "unrecorded";
  return el("span", { class: "badge scope", "data-field": "scope", "data-value": m.scope ?? "",
    title: "What this energy covers: wall, system (the whole machine) or components (parts only)" },
  scope);
}

// The model's newest graded profile (`wattbar-cli profile`): its accuracy and joules per correct
// answer, with the evaluation and the 95 % interval in the title; "—" for a model never profiled.
function profileCells(profile) {
  if (!profile) return [cell("—", null), cell("—", null)];
  const named = (td, name) => { td.dataset.field = name; return td; };
  const graded = profile.correct + profile.incorrect;
  const acc = cell(profile.accuracy === null || profile.accuracy === undefined
    ? "—" : `${fmt.fixed(profile.accuracy * 100, 0)}\u00a0%`, profile.accuracy);
  acc.title = `${profile.correct} of ${graded} correct on ${profile.eval} (graded by `
    + `${(profile.graders ?? []).join(", ")}), ${new Date(profile.at * 1000).toLocaleDateString()}`;
  acc.dataset.eval = profile.eval;
  const perCorrect = cell(fmt.figure(profile.joules_per_correct_answer), profile.joules_per_correct_answer);
  perCorrect.title = profile.joules_per_correct_answer === null || profile.joules_per_correct_answer === undefined
    ? "No correct answer: no joules per correct answer"
    : `${fmt.figure(profile.avg_per_query_energy_joules)} J a query over ${profile.queries} queries`;
  return [named(acc, "accuracy"), named(perCorrect, "joules-per-correct")];
}

// The model's energy class A–G (from its newest profile in the row's scope, else in any) as a
// badge under its name, with what it rests on in its title; none for a model never profiled.
function classBadge(c) {
  if (!c) return null;
  const per = c.per === "correct_answer" ? "a correct answer" : "a query";
  const step = "ABCDEFG".indexOf(c.class ?? "");
  const limit = step < 0 ? "" : step < 6 ? `${c.class} is up to ${fmt.figure(c.limits[step])} J`
    : `G is above ${fmt.figure(c.limits[5])} J`;
  return el("span", { class: "badge energy-class", "data-field": "class", "data-value": c.class ?? "",
    title: c.class
      ? `${fmt.figure(c.joules)} J ${per} on ${c.eval}, ${c.scope ?? "scope unrecorded"} (${limit})`
      : c.why },
  c.class ? `class ${c.class}` : "no class");
}

function modelRow(m, best, profile, classed) {
  const name = el("th", { scope: "row" }, m.model, " ", scopeBadge(m));
  const badge = classBadge(classed);
  if (badge) name.append(" ", badge);
  if (best) name.append(" ", el("span", { class: "badge best" }, "most efficient"));
  // Requests that did not end in a local answer, under the name (the narrow window has no room
  // beside the count).
  const others = Object.entries(m.requests_by_status ?? {})
    .filter(([status]) => status !== "ok")
    .map(([status, n]) => `${n} ${STATUS[status] ?? status}`)
    .concat(m.partial_requests > 0 ? [`${m.partial_requests} partly measured`] : [])
    .join(", ");
  if (others) name.append(el("small", {}, others));
  const energy = onlyRemote(m)
    ? el("td", { class: "remote", "data-value": "" }, "ran remotely")
    : cell(fmt.figure(m.joules_per_token), m.joules_per_token,
      el("small", { class: "net", "data-value": m.net_joules_per_token ?? "" },
        `net ${fmt.figure(m.net_joules_per_token)}`));
  return el("tr", { "data-model": m.model, "data-scope": m.scope ?? "", "data-best": best ? "true" : null },
    name,
    cell(fmt.count(m.requests), m.requests),
    energy,
    cell(fmt.figure(m.tokens_per_second), m.tokens_per_second),
    cell(fmt.figure(m.tokens_per_second_per_watt), m.tokens_per_second_per_watt),
    cell(fmt.fixed(m.score, 1), m.score),
    ...profileCells(profile));
}

// One field of a request's line: its text, and its raw number for tests and tools.
function field(name, text, value) {
  return el("span", { "data-field": name, "data-value": value ?? "" }, text);
}

// The energy and how far it may be from the truth (the bound), when known.
function energyField(r) {
  const f = field("energy", `${fmt.figure(r.energy_joules)} J`, r.energy_joules);
  const bound = r.energy_bound_joules;
  const shown = fmt.bound(bound);
  if (r.energy_joules !== null && r.energy_joules !== undefined && shown) {
    f.append(` ${shown}`);
    f.setAttribute("data-bound", String(bound));
    f.title = "Within this many joules of the truth: power that changed inside a sampling interval the request only partly covered, and the allowance for an estimate.";
  }
  return f;
}

function requestItem(r) {
  const start = new Date(r.start * 1000);
  const fields = r.status === "remote"
    ? [el("span", { "data-field": "energy", class: "remote" }, "ran remotely")]
    : [energyField(r),
      field("joules-per-token", `${fmt.figure(r.joules_per_token)} J/token`, r.joules_per_token)];
  // Its energy is a share: other requests ran in its window.
  if (r.status !== "remote" && r.shared_by > 1) {
    const shared = field("shared", `shared by ${r.shared_by}`, r.shared_by);
    shared.title = `Up to ${r.shared_by} requests ran at once in its window, so its energy is a share;`
      + ` ${fmt.figure(r.held_before_joules)} J of the window was already held by requests recorded before it.`;
    fields.push(shared);
  }
  fields.push(
    // Counted from the stream's chunks (the server gave no count): about one token a chunk.
    field("tokens", `${r.tokens_source === "counted" ? "≈" : ""}${fmt.count(r.completion_tokens)} tokens`,
      r.completion_tokens),
    field("tokens-per-second", `${fmt.figure(r.tokens_per_second)} tok/s`, r.tokens_per_second),
    field("wall", `${fmt.fixed(r.wall_seconds, 2)} s`, r.wall_seconds));
  // Text separators, so that a screen reader pauses between the figures too.
  const line = fields.flatMap((f, n) => (n === 0 ? [f] : [" · ", f]));
  return el("li", { "data-id": r.id, "data-status": r.status },
    el("div", { class: "head" },
      el("time", { datetime: start.toISOString() }, start.toLocaleTimeString()), " ",
      el("span", { class: "model" }, r.model), " ",
      // Low-power mode sent it here: the model the client asked for.
      r.requested_model
        ? el("span", { class: "badge routed", "data-field": "requested-model", "data-value": r.requested_model,
          title: `Low-power mode sent this request for ${r.requested_model} to ${r.model}.` },
          `routed from ${r.requested_model}`)
        : null,
      r.requested_model ? " " : null,
      el("span", { class: "badge status", "data-status": r.status }, STATUS[r.status] ?? r.status),
      r.partial
        ? el("span", { class: "badge partial", "data-field": "covered", "data-value": r.covered,
          title: "Less than 90 % of this request was measured: its energy is what was measured, and it has no J/token or score." },
          ` ${fmt.fixed((r.covered ?? 0) * 100, 0)} % measured`)
        : null),
    el("div", { class: "line" }, ...line),
    r.error ? el("div", { class: "error" }, r.error) : null);
}

// A model's figures from its server's own /metrics counters, read per window with no proxy:
// no requests, rates or score are known there.
function serverModelRow(m) {
  const name = el("th", { scope: "row" }, m.model, " ",
    el("span", { class: "badge source", "data-field": "source", "data-value": m.source,
      title: `From ${m.server}: the server's own token counters, read once per 10 s window beside the energy measured in it.` },
    "server metrics"), " ", scopeBadge(m));
  return el("tr", { "data-model": m.model, "data-source": m.source, "data-server": m.server,
    "data-scope": m.scope ?? "" },
    name,
    cell("—", null),
    cell(fmt.figure(m.joules_per_token), m.joules_per_token),
    cell("—", null),
    cell("—", null),
    cell("—", null),
    cell("—", null),
    cell("—", null));
}

function renderModels(inference, serverModels, profiles, classes) {
  const models = inference.models ?? [];
  const shown = models.length + serverModels.length;
  $("models-hint").hidden = shown > 0;
  $("models").hidden = shown === 0;
  $("models-rows").replaceChildren(
    // The most efficient is chosen within the newest records' scope: its newest row (the rows
    // come newest first), not its rows of other scopes.
    ...models.map((m, i) => modelRow(m, m.model === inference.most_efficient_model
      && models.findIndex((o) => o.model === m.model) === i,
    // The profiles come newest first: the model's newest, of whichever evaluation.
    profiles.find((p) => p.model === m.model),
    classes.find((c) => c.model === m.model && (c.scope ?? null) === (m.scope ?? null))
      ?? classes.find((c) => c.model === m.model))),
    ...serverModels.map(serverModelRow));
  const scale = $("models-scale");
  scale.hidden = models.length === 0;
  // The ceiling is a preference, shown as the user set it.
  let text = `Score 0–10: 10 is ${inference.ceiling} tokens/s per W or more.`;
  if (inference.score !== null && inference.score !== undefined) {
    text += ` Last answers: ${fmt.figure(inference.tokens_per_second_per_watt)} tokens/s per W,`
      + ` score ${fmt.fixed(inference.score, 1)}.`;
  }
  setText(scale, text);
}

function renderBaseline(inference) {
  const line = $("baseline");
  const b = inference.baseline;
  if (b) {
    const spread = b.spread_watts ? ` ± ${fmt.watts(b.spread_watts)}` : "";
    setText(line, `Idle baseline ${fmt.watts(b.watts)}${spread} W — ${b.method}`);
  } else if ((inference.models ?? []).length > 0) {
    setText(line, "Idle baseline not taken yet: net J/token follows once the machine has idled a while.");
  } else {
    setText(line, "");
  }
  line.hidden = line.textContent === "";
  line.dataset.watts = b ? String(b.watts) : "";
}

function duration(seconds) {
  const m = Math.floor(seconds / 60);
  return m >= 60 ? `${Math.floor(m / 60)} h ${m % 60} min` : `${m} min`;
}

function residentItem(r, currency) {
  const known = r.idle_watts !== null && r.idle_watts !== undefined;
  const name = r.loaded ? `${r.model} (loaded)` : r.model;
  let text;
  if (known) {
    const within = r.uncertainty_watts ? ` ± ${fmt.watts(r.uncertainty_watts)}` : "";
    const today = r.idle_joules_today === null || r.idle_joules_today === undefined
      ? "not yet priced"
      : fmt.energy(r.idle_joules_today / 3.6e6);
    text = `Keeping ${name} costs about ${fmt.money(r.cost_per_day, currency)}/day`
      + ` (${fmt.watts(r.idle_watts)}${within} W at idle; today ${duration(r.idle_seconds_today)}`
      + ` resident and idle, ${today}).`;
  } else {
    text = `${name}: what keeping it loaded costs is ${r.method}.`;
  }
  return el("li", { "data-model": r.model, "data-idle-watts": known ? String(r.idle_watts) : "",
    title: known ? r.method : "" }, text);
}

let residentKey = null;

// resident: what each model the server holds (or held today) costs by staying loaded.
export function renderResident(resident, currency) {
  const list = $("resident");
  const rows = resident ?? [];
  const key = JSON.stringify([rows, currency]);
  if (key === residentKey) return;
  residentKey = key;
  list.hidden = rows.length === 0;
  list.replaceChildren(...rows.map((r) => residentItem(r, currency)));
}

function renderRequests(recent) {
  $("requests-box").hidden = recent.length === 0;
  $("requests").replaceChildren(...recent.map(requestItem));
}

// inference: the state's inference view (absent from an engine without one: the panel stays
// hidden); inflight: requests now passing through the proxy; serverModels: the models counted
// from their servers' own /metrics; profiles: each model's newest graded profile, newest first.
export function renderInference(inference, inflight, serverModels, profiles, classes) {
  const panel = $("inference");
  panel.hidden = !inference;
  if (!inference) return;
  const n = inflight ?? 0;
  const flying = $("inflight");
  flying.hidden = !(n > 0);
  setText(flying, `${n} ${n === 1 ? "request" : "requests"} in flight`, n);
  const servers = serverModels ?? [];
  const graded = profiles ?? [];
  const classed = classes ?? [];
  const key = JSON.stringify([inference.seq, inference.last?.id ?? "", servers, graded.map((p) => p.at),
    classed.map((c) => c.at)]);
  if (key === shownKey) return;
  shownKey = key;
  renderModels(inference, servers, graded, classed);
  renderBaseline(inference);
  renderRequests(inference.recent ?? []);
  panel.dataset.seq = String(inference.seq);
}
