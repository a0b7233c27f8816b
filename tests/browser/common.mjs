// What the browser tests share: opening the Preferences tab the dashboard offers with its
// token, its page errors collected with the dashboard's.

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
