// Opens the dashboard `wattbar-cli serve` serves on a laptop's power_supply capture, in Debian's
// Chromium, and prints what the battery panel shows as one JSON object; SCREENSHOT: where the
// panel's picture goes. With WATTBAR_TOKEN it then gives BAT0 a price of its own in the
// preferences tab, a wrong one first. WATTBAR_URL and WATTBAR_TOKEN come from the Rust test.
import { launchBrowser, openDashboard, openPreferences } from "./common.mjs";

const url = process.env.WATTBAR_URL;
const token = process.env.WATTBAR_TOKEN;
const screenshot = process.env.SCREENSHOT;

const browser = await launchBrowser();
const report = {};
const errors = [];
try {
  const page = await openDashboard(browser, { url, token, width: 520 }, errors);
  await page.waitForSelector("#battery-panel:not([hidden]) .battery-now", { timeout: 15000 });
  report.now = await page.$$eval(".battery-now", (els) => els.map((e) => e.textContent));
  report.trend = await page.$$eval(".battery-trend", (els) => els.map((e) => e.textContent));
  report.days = await page.$$eval(".battery-row .strip-box", (els) => els.map((e) => Number(e.dataset.days)));
  const panel = await page.$("#battery-panel");
  if (screenshot && panel) await panel.screenshot({ path: screenshot });
  if (token) {
    const prefs = await openPreferences(page, errors);
    report.prices_before = await prefs.inputValue("#battery_prices");
    const setPrices = async (text, kind) => {
      await prefs.fill("#battery_prices", text);
      await prefs.press("#battery_prices", "Tab");
      await prefs.waitForFunction((k) => document.getElementById("msg-battery_prices").dataset.kind === k,
        kind, { timeout: 10000 });
      return prefs.textContent("#msg-battery_prices");
    };
    report.prices_refused = await setPrices('{"BAT0": {"price": -5}}', "error");
    report.prices_saved = await setPrices('{"BAT0": {"price": 120, "rated_cycles": 500}}', "ok");
  }
} finally {
  await browser.close();
}
report.errors = errors;
console.log(JSON.stringify(report));
