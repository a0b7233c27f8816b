// Number formats shared with the tray (src-tauri/shell/format.rs).
export function watts(w) {
  if (w === null || w === undefined || !Number.isFinite(w)) return "—";
  return w >= 100 ? w.toFixed(0) : w.toFixed(1);
}

export function energy(kwh) {
  return kwh < 0.01 ? `${(kwh * 1000).toFixed(2)} Wh` : `${kwh.toFixed(3)} kWh`;
}

export function money(amount, currency) {
  return amount < 0.01 ? `${amount.toFixed(4)} ${currency}` : `${amount.toFixed(2)} ${currency}`;
}

function known(x) {
  return x !== null && x !== undefined && Number.isFinite(x);
}

// A measured figure (joules, J/token, tokens/s, tokens/s per W) to about three significant
// digits; "—" when unknown: absent is never 0.
export function figure(x) {
  if (!known(x)) return "—";
  if (x === 0) return "0";
  const a = Math.abs(x);
  return x.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3);
}

// A number to a fixed count of decimals (a score, seconds); "—" when unknown.
export function fixed(x, digits) {
  return known(x) ? x.toFixed(digits) : "—";
}

// A count (tokens, requests); "—" when unknown.
export function count(n) {
  return known(n) ? String(Math.round(n)) : "—";
}
