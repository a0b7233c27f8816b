// "Keys": each key the inference proxy issued, what it spent against its budget in the window
// now, and when the window resets, from the state's `keys` (never a secret).
import * as fmt from "./format.js";
import { $, setText } from "./dom.js";

function cell(text, value) {
  const td = document.createElement("td");
  td.textContent = text;
  td.dataset.value = value === undefined || value === null ? "" : String(value);
  return td;
}

// Joules in the unit of `scale` (the budget), so that spent and budget read side by side:
// "0.2 of 13.9 Wh", "120 J of 900 J".
function joules(j, scale) {
  return scale >= 3600 ? fmt.energy(j / 3.6e6) : `${fmt.fixed(j, 0)} J`;
}

function resets(unix) {
  return new Date(unix * 1000).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" });
}

function moneyRow(tr, th, m, currency) {
  tr.append(th,
    cell(`${fmt.money(m.spent_joules, currency)} of ${fmt.money(m.budget_joules, currency)}`, m.spent_joules),
    cell(fmt.money(m.remaining_joules, currency), m.remaining_joules),
    cell(resets(m.resets_at), m.resets_at));
  return tr;
}

function row(k, currency) {
  const tr = document.createElement("tr");
  tr.dataset.key = k.name;
  const th = document.createElement("th");
  th.scope = "row";
  th.textContent = k.name;
  const s = k.status;
  if (!s && k.money_status) return moneyRow(tr, th, k.money_status, currency);
  if (!s) {
    tr.append(th, cell("not limited", ""), cell("—", ""), cell("—", ""));
    return tr;
  }
  const share = s.budget_joules > 0 ? s.spent_joules / s.budget_joules : 0;
  const meter = document.createElement("meter");
  meter.min = 0;
  meter.max = 1;
  meter.low = 0.8;
  meter.high = 0.95;
  meter.optimum = 0;
  meter.value = Math.min(share, 1);
  meter.title = `${fmt.fixed(100 * share, 0)} % of the budget`;
  const budget = s.budget_joules;
  const spent = cell(`${joules(s.spent_joules, budget)} of ${joules(budget, budget)} `, s.spent_joules);
  spent.append(meter);
  tr.append(th, spent, cell(joules(s.remaining_joules, budget), s.remaining_joules),
    cell(resets(s.resets_at), s.resets_at));
  return tr;
}

let shown = null;

export function renderKeys(keys, currency) {
  const panel = $("keys-panel");
  if (!keys || keys.length === 0) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  const json = JSON.stringify(keys.map((k) => [k.name, k.status, k.money_status]));
  if (json === shown) return;
  shown = json;
  $("keys-rows").replaceChildren(...keys.map((k) => row(k, currency)));
  setText($("keys-caption"), "Held for requests in flight counts as spent until they end."
    + " Each key's budget resets at the start of its UTC day, week or month.");
}
