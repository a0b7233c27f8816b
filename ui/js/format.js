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
