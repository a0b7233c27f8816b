// The Keys table of the preferences: the proxy's keys with their budgets, made, rotated and
// removed through the engine. A new or rotated key's secret is shown once, here, and nowhere
// after.
import * as transport from "./transport.js";

const $ = (id) => document.getElementById(id);

function message(text, kind) {
  const el = $("msg-key");
  el.textContent = text;
  el.dataset.kind = kind;
}

function showSecret(secret) {
  $("key-secret-value").textContent = secret;
  $("key-secret").hidden = false;
}

function spent(k) {
  const s = k.status;
  if (!s) return "—";
  return `${Math.round(s.spent_joules)} J (${Math.round(100 * s.spent_joules / s.budget_joules)} %)`;
}

function button(text, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "secondary";
  b.textContent = text;
  b.addEventListener("click", action);
  return b;
}

async function refresh() {
  const listed = await transport.getKeys().catch((e) => { message(String(e.message || e), "error"); return null; });
  if (!listed) return;
  const rows = listed.keys.map((k) => {
    const tr = document.createElement("tr");
    tr.dataset.key = k.name;
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = `${k.name} (${k.shown}…)`;
    const budget = document.createElement("td");
    budget.textContent = [k.budget, k.money, !k.budget && !k.money ? "not limited" : null,
      k.scope, k.clamp ? "clamp" : null]
      .filter(Boolean).join(", ");
    const used = document.createElement("td");
    used.textContent = spent(k);
    const actions = document.createElement("td");
    actions.append(
      button("Rotate", () => act(transport.rotateKey(k.name), `A new secret for ${k.name}; the old one is refused now.`)),
      button("Remove", () => act(transport.removeKey(k.name), `${k.name} is removed; its secret is refused now.`)),
    );
    tr.append(th, budget, used, actions);
    return tr;
  });
  $("key-rows").replaceChildren(...rows);
}

async function act(call, said) {
  try {
    const answer = await call;
    if (answer && answer.secret) showSecret(answer.secret);
    else $("key-secret").hidden = true;
    message(said, "ok");
  } catch (e) {
    message(String(e.message || e), "error");
  }
  await refresh();
}

export function followKeys() {
  $("key-add").addEventListener("click", () => {
    const body = {
      name: $("key-name").value.trim(),
      budget: $("key-budget").value.trim() || null,
      money: $("key-money").value.trim() || null,
      scope: $("key-scope").value || null,
      clamp: $("key-clamp").checked,
      energy_line: $("key-energy-line").checked,
    };
    act(transport.addKey(body), `${body.name} is made.`).then(() => {
      if ($("msg-key").dataset.kind === "ok") $("key-name").value = "";
    });
  });
  return refresh();
}
