// Opens the dashboard `wattbar-cli serve` serves with a price feed set, in Debian's Chromium,
// and prints what the price strip shows as one JSON object; SCREENSHOT: where the panel's
// picture goes. With WATTBAR_TOKEN it then sets an ENTSO-E feed with its token in the
// preferences tab. WATTBAR_URL and WATTBAR_TOKEN come from the Rust test.
import { launchBrowser, openDashboard, openPreferences } from "./common.mjs";

const url = process.env.WATTBAR_URL;
const token = process.env.WATTBAR_TOKEN;
const screenshot = process.env.SCREENSHOT;

const browser = await launchBrowser();
const report = {};
const errors = [];
try {
  const page = await openDashboard(browser, { url, token, width: 520 }, errors);
  await page.waitForFunction(() => Number(document.getElementById("price-strip")?.dataset.slots) > 0,
    null, { timeout: 15000 });
  report.slots = Number(await page.getAttribute("#price-strip", "data-slots"));
  report.now_slots = await page.$$eval("#price-strip .slot.now", (els) => els.map((e) => Number(e.dataset.start)));
  report.negative = await page.$$eval("#price-strip .slot.negative", (els) => els.length);
  report.caption = await page.textContent("#price-strip-caption");
  report.page_now = await page.evaluate(() => Date.now() / 1000);
  const panel = await page.$("#prices-panel");
  if (screenshot && panel) await panel.screenshot({ path: screenshot });
  if (token) {
    const prefs = await openPreferences(page, errors);
    report.form_source_before = await prefs.inputValue("#price_feed_source");
    report.form_area_before = await prefs.inputValue("#price_feed_area0");
    await prefs.selectOption("#price_feed_source", "entsoe");
    report.token_shown = await prefs.isVisible("#price_feed_token");
    report.area_label = await prefs.textContent("#price_feed_area0_label");
    // A loopback address where nothing listens: the test never asks the vendor.
    await prefs.fill("#price_feed_url", "http://127.0.0.1:9");
    await prefs.fill("#price_feed_area0", "10Y1001A1001A82H");
    await prefs.fill("#price_feed_token", "s3cret-entsoe-token");
    await prefs.press("#price_feed_token", "Tab");
    // Saved, the token out of the form, and the form saying one is kept.
    await prefs.waitForFunction(() => document.getElementById("msg-price_feed").dataset.kind === "ok"
      && document.getElementById("price_feed_token").value === ""
      && document.getElementById("price_feed_token").placeholder !== "", null, { timeout: 10000 });
    report.token_placeholder = await prefs.getAttribute("#price_feed_token", "placeholder");
    // A tax given as a percentage is refused beside the form, and changes nothing.
    await prefs.fill("#price_feed_tax", "19");
    await prefs.press("#price_feed_tax", "Tab");
    await prefs.waitForFunction(() => document.getElementById("msg-price_feed").dataset.kind === "error", null, { timeout: 10000 });
    report.tax_refused = await prefs.textContent("#msg-price_feed");
    const form = await prefs.$("#price_feed_source");
    const fieldset = form ? await form.evaluateHandle((el) => el.closest("fieldset")) : null;
    if (process.env.PREFERENCES_SCREENSHOT && fieldset) {
      await fieldset.asElement().screenshot({ path: process.env.PREFERENCES_SCREENSHOT });
    }
  }
} finally {
  await browser.close();
}
report.errors = errors;
console.log(JSON.stringify(report));
