// Drives the dashboard that `wattbar-cli serve` serves, in Debian's Chromium, and prints what it
// saw as one JSON object. WATTBAR_URL, WATTBAR_TOKEN and SCREENSHOT come from the Rust test.
import { chromium } from "playwright-core";

const url = process.env.WATTBAR_URL;
const token = process.env.WATTBAR_TOKEN;
const screenshot = process.env.SCREENSHOT;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";

const browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
const report = {};
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 420, height: 900 } });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(`${url}/#token=${token}`);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15000 });
  await page.evaluate(() => { window.__loadedOnce = true; });
  await page.waitForFunction(() => document.getElementById("watts").textContent !== "—", null, { timeout: 10000 });
  report.first_watts = await page.textContent("#watts");
  report.transport = await page.getAttribute("body", "data-transport");
  // The replay steps to 31 W at t = 10 s; the stream must bring it without a reload.
  await page.waitForFunction(() => document.getElementById("watts").textContent === "31.0", null, { timeout: 25000 });
  report.later_watts = await page.textContent("#watts");
  report.same_page = await page.evaluate(() => window.__loadedOnce === true);
  report.quality = await page.textContent("#quality");
  report.source = await page.textContent("#source");
  await page.click("#low-power");
  await page.waitForFunction(
    () => document.getElementById("low-power").checked
      && document.getElementById("low-power-status").dataset.reason === "manual",
    null, { timeout: 10000 });
  report.low_power_after_toggle = await page.isChecked("#low-power");
  report.low_power_status = await page.textContent("#low-power-status");
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
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
console.log(JSON.stringify(report));
