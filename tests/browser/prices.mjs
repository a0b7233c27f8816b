// Opens the dashboard `wattbar-cli serve` serves with a price feed set, in Debian's Chromium,
// and prints what the price strip shows as one JSON object; SCREENSHOT: where the panel's
// picture goes. WATTBAR_URL comes from the Rust test.
import { chromium } from "playwright-core";

const url = process.env.WATTBAR_URL;
const screenshot = process.env.SCREENSHOT;
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";

const browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
const report = {};
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 520, height: 900 } });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(`${url}/`);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15000 });
  await page.waitForFunction(() => Number(document.getElementById("price-strip")?.dataset.slots) > 0,
    null, { timeout: 15000 });
  report.slots = Number(await page.getAttribute("#price-strip", "data-slots"));
  report.now_slots = await page.$$eval("#price-strip .slot.now", (els) => els.map((e) => Number(e.dataset.start)));
  report.negative = await page.$$eval("#price-strip .slot.negative", (els) => els.length);
  report.caption = await page.textContent("#price-strip-caption");
  report.page_now = await page.evaluate(() => Date.now() / 1000);
  const panel = await page.$("#prices-panel");
  if (screenshot && panel) await panel.screenshot({ path: screenshot });
} finally {
  await browser.close();
}
report.errors = errors;
console.log(JSON.stringify(report));
