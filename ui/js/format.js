// Number formats shared with the tray (src-tauri/shell/format.rs).
export function watts(w) {
  if (w === null || w === undefined || !Number.isFinite(w)) return "—";
  return w >= 100 ? w.toFixed(0) : w.toFixed(1);
}

// The locale figures are written in: the page's, unless a caller names one (the tests do).
function localeOf(locale) {
  if (locale) return locale;
  return typeof navigator === "undefined" ? undefined : navigator.language;
}

function known(x) {
  return x !== null && x !== undefined && Number.isFinite(x);
}

// A quantity in the locale: whole from 100 up, one decimal from 10, two from 1, two
// significant digits below ("12,346", "12.3", "1.23", "0.24").
function quantity(x, locale) {
  const a = Math.abs(x);
  const options = a >= 100 ? { maximumFractionDigits: 0 }
    : a >= 10 ? { maximumFractionDigits: 1 }
      : a >= 1 ? { maximumFractionDigits: 2 }
        : { maximumSignificantDigits: 2 };
  return new Intl.NumberFormat(localeOf(locale), options).format(x);
}

// Energy by its size, in the locale: watt-hours below 1 kWh, kilowatt-hours from there
// ("0.24 Wh", "12.3 Wh", "1.23 kWh", "12,346 kWh"); "—" when unknown.
export function energy(kwh, locale) {
  if (!known(kwh)) return "—";
  if (Math.abs(kwh) < 1) return `${quantity(kwh * 1000, locale)} Wh`;
  return `${quantity(kwh, locale)} kWh`;
}

// Money in `currency`, as the locale writes it ("€0.42", "0,42 €"): the currency's own decimals
// from a cent up; below, two significant digits, so that a small session reads "€0.0012" and
// not "€0.00"; "—" when unknown.
export function money(amount, currency, locale) {
  if (!known(amount)) return "—";
  const small = amount !== 0 && Math.abs(amount) < 0.01;
  const options = small
    ? { style: "currency", currency, maximumSignificantDigits: 2 }
    : { style: "currency", currency };
  try {
    return new Intl.NumberFormat(localeOf(locale), options).format(amount);
  } catch (_) {
    // Not an ISO 4217 code Intl knows: the number with the code after it.
    return `${amount.toFixed(small ? 4 : 2)} ${currency}`;
  }
}

// How far a figure may be from the truth, written beside it ("± 0.3"), or "" where it rounds to
// nothing at the figure's precision.
export function bound(b) {
  if (!known(b) || b <= 0) return "";
  const text = figure(b);
  return Number(text) === 0 ? "" : `± ${text}`;
}

// "1 point", "12 points".
export function plural(n, one, many) {
  return `${count(n)} ${n === 1 ? one : many}`;
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
