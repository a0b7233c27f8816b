// Under LANG=C (servers, minimal desktops) WebKitGTK reports navigator.language as "C", which is
// no BCP 47 tag: Intl, and with it uPlot, throws. Such a page falls back to en-US before uPlot loads.
(function () {
  try {
    new Intl.DateTimeFormat(navigator.language);
  } catch (_) {
    Object.defineProperty(Navigator.prototype, "language", { get: () => "en-US", configurable: true });
    Object.defineProperty(Navigator.prototype, "languages", { get: () => ["en-US"], configurable: true });
  }
})();
