// What the browser tests share: Debian's Chromium, the dashboard opened and ready with its page
// errors collected, and the Preferences tab it offers with its token.
import { chromium } from "playwright-core";

// Headless Chromium (CHROMIUM, else Debian's).
export function launchBrowser() {
  const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
  return chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
}

// The dashboard at `url` (with `token`, which lets it write), `width` pixels wide, once ready;
// its page errors and console errors go to `errors`.
export async function openDashboard(browser, { url, token, width }, errors) {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(token ? `${url}/#token=${token}` : `${url}/`);
  await page.waitForSelector("body[data-ready=true]", { timeout: 15000 });
  return page;
}

// Clicks the dashboard's "Preferences" and gives the tab it opens, once ready.
export async function openPreferences(page, errors) {
  const [prefs] = await Promise.all([
    page.waitForEvent("popup", { timeout: 10000 }),
    page.click("#open-preferences"),
  ]);
  prefs.on("pageerror", (e) => errors.push(String(e)));
  await prefs.waitForSelector("body[data-ready=true]", { timeout: 15000 });
  return prefs;
}
