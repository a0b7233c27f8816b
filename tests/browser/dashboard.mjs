// Drives the dashboard that `wattbar-cli serve` serves, in Debian's Chromium, and prints what it
// saw as one JSON object. WATTBAR_URL, WATTBAR_TOKEN and SCREENSHOT come from the Rust test.
// With WATTBAR_LLM_PROXY (the address of `serve --llm-proxy`, e.g. http://127.0.0.1:11435) it also
// sends one request through the proxy with tests/llm/clients.mjs while the page is open (in
// low-power mode, routed), and waits for it in the Models panel and the last requests, without a
// reload.
import { launchBrowser, openDashboard, openPreferences } from "./common.mjs";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const url = process.env.WATTBAR_URL;
const token = process.env.WATTBAR_TOKEN;
const screenshot = process.env.SCREENSHOT;
const llmProxy = process.env.WATTBAR_LLM_PROXY;

const browser = await launchBrowser();
const report = {};
const errors = [];
try {
  const page = await openDashboard(browser, { url, token, width: 420 }, errors);
  await page.evaluate(() => { window.__loadedOnce = true; });
  // Every 100 ms while the page is open (batches are written every 10 s meanwhile): the session
  // never shows more than today, today than the month, the month than the lifetime.
  await page.evaluate(() => {
    window.__order = { checked: 0, broken: [] };
    const ids = ["session-kwh", "today-kwh", "month-kwh", "lifetime-kwh"];
    setInterval(() => {
      const raw = ids.map((id) => document.getElementById(id).dataset.value);
      if (raw.some((v) => v === "" || v === undefined)) return;
      const f = raw.map(Number);
      window.__order.checked += 1;
      if (f.some((x, i) => i > 0 && f[i - 1] > x + 1e-12)) window.__order.broken.push(f);
    }, 100);
  });
  await page.waitForFunction(() => document.getElementById("watts").textContent !== "—", null, { timeout: 10000 });
  report.first_watts = await page.textContent("#watts");
  report.transport = await page.getAttribute("body", "data-transport");
  // The replay steps to 31 W at t = 10 s; the stream must bring it without a reload.
  await page.waitForFunction(() => document.getElementById("watts").textContent === "31.0", null, { timeout: 25000 });
  report.later_watts = await page.textContent("#watts");
  report.same_page = await page.evaluate(() => window.__loadedOnce === true);
  // The proxy's keys, each with what it spent and has left of its budget.
  await page.waitForSelector("#keys-rows tr", { timeout: 10000 });
  report.keys = await page.$$eval("#keys-rows tr", (rows) => rows.map((r) => ({
    key: r.dataset.key,
    spent: r.querySelectorAll("td")[0].dataset.value,
    left: r.querySelectorAll("td")[1].dataset.value,
  })));
  report.quality = await page.textContent("#quality");
  report.source = await page.textContent("#source");
  report.scope = await page.textContent("#scope");
  await page.click("#low-power");
  await page.waitForFunction(
    () => document.getElementById("low-power").checked
      && document.getElementById("low-power-status").dataset.reason === "manual",
    null, { timeout: 10000 });
  report.low_power_after_toggle = await page.isChecked("#low-power");
  report.low_power_status = await page.textContent("#low-power-status");
  // With the token the preferences open in a tab of their own and save through the API: a
  // refused value is shown by its field and changes nothing; an accepted one is saved.
  const prefs = await openPreferences(page, errors);
  report.preferences_price_before = await prefs.inputValue("#price_per_kwh");
  await prefs.fill("#price_per_kwh", "-2");
  await prefs.press("#price_per_kwh", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-price_per_kwh").dataset.kind === "error", null, { timeout: 10000 });
  report.preferences_refused = await prefs.textContent("#msg-price_per_kwh");
  await prefs.fill("#price_per_kwh", "0.42");
  await prefs.press("#price_per_kwh", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-price_per_kwh").dataset.kind === "ok", null, { timeout: 10000 });
  report.preferences_saved = await prefs.textContent("#msg-price_per_kwh");
  // The Keys table: the key made before the engine started is listed; a budget that is no
  // budget is refused by its message; a right one makes a key whose secret is shown once.
  report.preference_keys_before = await prefs.$$eval("#key-rows tr", (rows) => rows.map((r) => r.dataset.key));
  await prefs.fill("#key-name", "aider");
  await prefs.fill("#key-budget", "5 parsecs/day");
  await prefs.click("#key-add");
  await prefs.waitForFunction(() => document.getElementById("msg-key").dataset.kind === "error", null, { timeout: 10000 });
  report.key_refused = await prefs.textContent("#msg-key");
  await prefs.fill("#key-budget", "200Wh/week");
  await prefs.check("#key-clamp");
  await prefs.click("#key-add");
  await prefs.waitForFunction(() => document.getElementById("msg-key").dataset.kind === "ok", null, { timeout: 10000 });
  report.key_secret = await prefs.textContent("#key-secret-value");
  report.preference_keys_after = await prefs.$$eval("#key-rows tr", (rows) => rows.map((r) => r.dataset.key));
  // Routing: the choice, a routes object and a cap, each saved by the schema or refused.
  await prefs.selectOption("#low_power_action", "route");
  await prefs.waitForFunction(() => document.getElementById("msg-low_power_action").dataset.kind === "ok", null, { timeout: 10000 });
  // A route is a row of the table: a served model too long to be a model's name (over 200
  // characters) is refused by the schema, then a right one saved.
  await prefs.click("#add-route");
  await prefs.fill("#route-from-0", "llama3");
  await prefs.fill("#route-to-0", "x".repeat(250));
  await prefs.press("#route-to-0", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-low_power_routes").dataset.kind === "error", null, { timeout: 10000 });
  report.routes_refused = await prefs.textContent("#msg-low_power_routes");
  await prefs.fill("#route-to-0", "qwen3:1b");
  await prefs.press("#route-to-0", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-low_power_routes").dataset.kind === "ok", null, { timeout: 10000 });
  report.route_choices = await prefs.$$eval("#model-choices option", (o) => o.map((x) => x.value));
  if (process.env.PREFERENCES_SCREENSHOT) await prefs.screenshot({ path: process.env.PREFERENCES_SCREENSHOT, fullPage: true });
  await prefs.fill("#low_power_max_tokens", "64");
  await prefs.press("#low_power_max_tokens", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-low_power_max_tokens").dataset.kind === "ok", null, { timeout: 10000 });
  // The wall meter: an address that is no plug's refused; one with a password saved, the
  // password kept apart and never shown back (the field says it is kept).
  await prefs.fill("#wall_meter_url", "ftp://plug.example");
  await prefs.press("#wall_meter_url", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-wall_meter").dataset.kind === "error", null, { timeout: 10000 });
  report.wall_meter_refused = await prefs.textContent("#msg-wall_meter");
  await prefs.fill("#wall_meter_url", "http://127.0.0.1:9");
  await prefs.fill("#wall_meter_password", "hunter2");
  await prefs.press("#wall_meter_password", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-wall_meter").dataset.kind === "ok"
    && document.getElementById("wall_meter_password").placeholder !== "", null, { timeout: 10000 });
  report.wall_meter_password_field = await prefs.inputValue("#wall_meter_password");
  report.wall_meter_password_placeholder = await prefs.getAttribute("#wall_meter_password", "placeholder");
  // MQTT: a broker address that is not one refused; then one saved with its password kept apart.
  // (Port 9 on loopback: the publisher's attempts are refused, which the form does not wait for.)
  await prefs.fill("#mqtt_url", "http://broker.example");
  await prefs.press("#mqtt_url", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-mqtt").dataset.kind === "error", null, { timeout: 10000 });
  report.mqtt_refused = await prefs.textContent("#msg-mqtt");
  await prefs.fill("#mqtt_url", "mqtt://ha@127.0.0.1:9");
  await prefs.fill("#mqtt_password", "hunter3");
  await prefs.press("#mqtt_password", "Tab");
  await prefs.waitForFunction(() => document.getElementById("msg-mqtt").dataset.kind === "ok"
    && document.getElementById("mqtt_password").placeholder !== "", null, { timeout: 10000 });
  report.mqtt_password_field = await prefs.inputValue("#mqtt_password");
  report.mqtt_password_placeholder = await prefs.getAttribute("#mqtt_password", "placeholder");
  await prefs.close();
  // "Save report" downloads the ledger's report of the range shown, drawn by the engine.
  const [download] = await Promise.all([
    page.waitForEvent("download", { timeout: 15000 }),
    page.click("#save-report"),
  ]);
  const svg = await readFile(await download.path(), "utf8");
  report.report_name = download.suggestedFilename();
  report.report_is_svg = svg.startsWith("<svg") && svg.includes("power (W)") && svg.includes("energy (kWh)");
  await page.waitForFunction(() => document.getElementById("report-status").textContent.startsWith("saved"), null, { timeout: 5000 });
  // The Models panel: its hint until a request was measured, then one row per model.
  await page.waitForSelector("#inference:not([hidden])", { timeout: 10000 });
  const models = () => page.evaluate(() => ({
    hint: document.getElementById("models-hint").hidden ? null
      : document.getElementById("models-hint").textContent.replace(/\s+/g, " ").trim(),
    rows: [...document.querySelectorAll("#models-rows tr")].map((tr) => tr.dataset.model),
    scopes: [...document.querySelectorAll("#models-rows tr [data-field=scope]")].map((b) => b.textContent),
    requests: [...document.querySelectorAll("#requests li")].map((li) => li.dataset.id),
  }));
  const before = await models();
  report.models_hint = before.hint;
  report.models = before.rows;
  if (llmProxy) {
    const run = promisify(execFile);
    const clients = fileURLToPath(new URL("../llm/clients.mjs", import.meta.url));
    await run("node", [clients, "ollama-generate-stream", llmProxy], { timeout: 30000 });
    await page.waitForFunction(
      (seen) => [...document.querySelectorAll("#requests li")].some((li) => !seen.includes(li.dataset.id)),
      before.requests, { timeout: 15000 });
    const after = await models();
    report.models_after_request = after.rows;
    report.model_scopes_after_request = after.scopes;
    report.last_request = (await page.textContent("#requests li")).replace(/\s+/g, " ").trim();
    report.last_request_routed_from = await page.getAttribute("#requests li [data-field=requested-model]", "data-value");
    await page.waitForFunction(() => document.getElementById("routing").dataset.requests === "1", null, { timeout: 10000 });
    report.routing = await page.textContent("#routing");
    // The served model was profiled (the Rust test kept one): its accuracy and joules per
    // correct answer sit beside its J/token.
    report.profiled = await page.$eval('#models-rows tr[data-model="qwen3:1b"]', (tr) => ({
      accuracy: tr.querySelector("[data-field=accuracy]")?.textContent,
      accuracy_value: tr.querySelector("[data-field=accuracy]")?.dataset.value,
      eval: tr.querySelector("[data-field=accuracy]")?.dataset.eval,
      joules_per_correct: tr.querySelector("[data-field=joules-per-correct]")?.dataset.value,
      class: tr.querySelector("[data-field=class]")?.dataset.value,
      class_title: tr.querySelector("[data-field=class]")?.title,
      class_text: tr.querySelector("[data-field=class]")?.textContent,
    }));
    // The proxy reads the upstream's /api/ps: the loaded model is listed with its cost unknown.
    await page.waitForSelector('#resident li[data-model="gemma3:latest"]', { timeout: 10000 });
    report.resident = await page.textContent('#resident li[data-model="gemma3:latest"]');
    // The programs of this machine, read by the engine every 10 s, on the same page.
    await page.waitForFunction(() => document.getElementById("programs-caption").dataset.value !== "",
      null, { timeout: 30000 });
    report.programs = await page.$$eval("#programs-rows tr", (rows) => rows.map((r) => r.dataset.program));
    report.programs_caption = await page.textContent("#programs-caption");
    report.same_page_after_request = await page.evaluate(() => window.__loadedOnce === true);
    // A model counted from its server's own /metrics, listed with its source once committed.
    const served = '#models-rows tr[data-source="server-metrics"]';
    await page.waitForSelector(served, { timeout: 60000 });
    report.server_model = await page.$eval(served, (tr) => ({
      model: tr.dataset.model,
      source: tr.querySelector("[data-field=source]").textContent,
      scope: tr.querySelector("[data-field=scope]").textContent,
      joules_per_token: tr.querySelectorAll("td")[1].dataset.value,
    }));
  }
  report.totals_order = await page.evaluate(() => window.__order);
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  // The same page in a wide window: cards side by side, charts with axes and a time scale.
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.waitForFunction(() => document.querySelectorAll("#history-chart .u-axis").length === 2, null, { timeout: 10000 });
  report.wide = await page.evaluate(() => {
    const cards = [...document.querySelectorAll("main > section")].filter((s) => !s.hidden);
    const box = (el) => el.getBoundingClientRect();
    const value = document.getElementById("today-kwh");
    const label = value.parentElement.querySelector("th");
    return {
      columns: new Set(cards.map((c) => Math.round(box(c).left))).size,
      history_axes: document.querySelectorAll("#history-chart .u-axis").length,
      watts_axes: document.querySelectorAll("#spark-watts .u-axis").length,
      label_to_value_px: Math.round(box(value).left - box(label).right),
    };
  });
  if (process.env.WIDE_SCREENSHOT) await page.screenshot({ path: process.env.WIDE_SCREENSHOT, fullPage: true });
} catch (e) {
  errors.push(String(e));
} finally {
  await browser.close();
}
if (errors.length) {
  console.error(errors.join("\n"));
  console.log(JSON.stringify(report));
  process.exit(1);
}
if (!report.same_page || report.transport !== "http") {
  console.error(`the page reloaded or did not use the HTTP transport: ${JSON.stringify(report)}`);
  process.exit(1);
}
if (report.models.length === 0 && !report.models_hint?.includes("OLLAMA_HOST=")) {
  console.error(`no models and no hint to point a client at the proxy: ${JSON.stringify(report)}`);
  process.exit(1);
}
if (llmProxy && (!report.same_page_after_request || report.models_after_request.length === 0)) {
  console.error(`the request through the proxy did not appear without a reload: ${JSON.stringify(report)}`);
  process.exit(1);
}
console.log(JSON.stringify(report));
