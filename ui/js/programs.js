// "Top programs": which programs draw the watts over the last process window, with their energy
// since the engine started and today, from the state's `programs`.
import * as fmt from "./format.js";
import { $, setText } from "./dom.js";

function cell(text, value) {
  const td = document.createElement("td");
  td.textContent = text;
  td.dataset.value = value === undefined || value === null ? "" : String(value);
  return td;
}

function row(p) {
  const tr = document.createElement("tr");
  tr.dataset.program = p.program;
  const th = document.createElement("th");
  th.scope = "row";
  th.textContent = p.serving?.length ? `${p.program} (${p.serving.join(", ")})` : p.program;
  const mark = p.quality === "estimated" ? "≈" : p.quality === "heuristic" ? "~" : "";
  // The GPU's part, where a GPU said this program used it.
  const gpu = p.gpu_watts > 0 ? ` (GPU ${fmt.watts(p.gpu_watts)})` : "";
  tr.append(th,
    cell(`${mark}${fmt.watts(p.watts)}${gpu}`, p.watts),
    cell(fmt.energy(p.joules / 3.6e6), p.joules),
    cell(fmt.energy(p.today_joules / 3.6e6), p.today_joules));
  return tr;
}

let shownAt = null;

export function renderPrograms(top) {
  const panel = $("programs-panel");
  if (!top) {
    panel.hidden = true;
    return;
  }
  panel.hidden = false;
  const caption = $("programs-caption");
  if (top.unavailable) {
    $("programs").hidden = true;
    setText(caption, `Not measured: ${top.unavailable}`);
    return;
  }
  const key = `${top.at}`;
  if (key === shownAt) return;
  shownAt = key;
  const table = $("programs");
  table.hidden = top.programs.length === 0;
  $("programs-rows").replaceChildren(...top.programs.map(row));
  if (top.at === null || top.at === undefined) {
    setText(caption, "The first reading of the programs comes about 10 s after the engine starts.");
    return;
  }
  if (top.programs.length === 0) {
    setText(caption, "No program has a share: the CPU's draw is not measured apart here, so all"
      + ` ${fmt.watts(top.unattributed_watts)} W is unattributed.`, top.at);
    return;
  }
  setText(caption, `Not any program's: idle ${fmt.watts(top.idle_watts)} W, unattributed`
    + ` ${fmt.watts(top.unattributed_watts)} W. Over the last ${fmt.fixed(top.window_seconds, 0)} s;`
    + ` ${top.method}.${top.gpu_note ? ` ${top.gpu_note}.` : ""}`, top.at);
}
