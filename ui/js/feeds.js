// The price and carbon feeds in the preferences window: one preference each (`price_feed`,
// `carbon_feed`), made of a source, the area its vendor asks for, and for prices the charges,
// tax or formula. The token is a secret as the wall meter's are: never shown back, sent only
// when typed; a field left empty keeps the one kept before.

const $ = (id) => document.getElementById(id);

// What each source asks for, in the order the form shows: [field, label].
const AREAS = {
  "energy-charts": [["bzn", "Bidding zone, e.g. DE-LU"]],
  awattar: [["country", "Country: de or at"]],
  "octopus-agile": [["product", "Product, e.g. AGILE-FLEX-22-11-25"], ["region", "Region letter, e.g. J"]],
  entsoe: [["zone", "Bidding zone (EIC code), e.g. 10Y1001A1001A82H"]],
  tibber: [],
  homeassistant: [["entity", "Price entity, e.g. sensor.electricity_price"]],
};
const CARBON_AREAS = {
  "energy-charts": [["country", "Country, e.g. de"]],
  "gb-carbon-intensity": [["postcode", "Postcode area, e.g. BS7 (empty: all of Great Britain)"]],
  "electricity-maps": [["zone", "Zone, e.g. DE"]],
};
const TOKENS = new Set(["entsoe", "tibber", "homeassistant", "electricity-maps"]);

function areas(kind, source) {
  return (kind === "price" ? AREAS : CARBON_AREAS)[source] ?? [];
}

// Shows the fields the chosen source takes, labelled for it.
function layout(kind) {
  const source = $(`${kind}_feed_source`).value;
  const fields = areas(kind, source);
  for (const i of [0, 1]) {
    const row = $(`${kind}_feed_area${i}_row`);
    row.hidden = !fields[i];
    if (fields[i]) $(`${kind}_feed_area${i}_label`).textContent = fields[i][1];
  }
  $(`${kind}_feed_token_row`).hidden = !TOKENS.has(source);
  for (const id of [`${kind}_feed_url_row`, `${kind}_feed_money`]) {
    const el = $(id);
    if (el) el.hidden = source === "";
  }
}

export function showFeed(kind, feed) {
  $(`${kind}_feed_source`).value = feed ? feed.source : "";
  const fields = areas(kind, feed ? feed.source : "");
  for (const i of [0, 1]) $(`${kind}_feed_area${i}`).value = feed && fields[i] ? feed[fields[i][0]] ?? "" : "";
  $(`${kind}_feed_url`).value = feed && feed.url ? feed.url : "";
  if (kind === "price") {
    $("price_feed_charges").value = feed ? feed.charges : "";
    $("price_feed_tax").value = feed ? feed.tax : "";
    $("price_feed_formula").value = feed && feed.formula ? feed.formula : "";
  }
  $(`${kind}_feed_token`).placeholder = feed && feed.has_secret ? "kept (type to replace)" : "";
  layout(kind);
}

// What the form holds, as the schema takes it; numbers as typed where they are not numbers, so
// that the schema's message says what is wrong.
export function feedValue(kind) {
  const source = $(`${kind}_feed_source`).value;
  if (source === "") return null;
  const value = { source };
  areas(kind, source).forEach(([field], i) => {
    const text = $(`${kind}_feed_area${i}`).value.trim();
    if (text) value[field] = text;
  });
  const url = $(`${kind}_feed_url`).value.trim();
  if (url) value.url = url;
  if (kind === "price") {
    for (const field of ["charges", "tax"]) {
      const text = $(`price_feed_${field}`).value.trim().replace(",", ".");
      if (text !== "") value[field] = Number.isFinite(Number(text)) ? Number(text) : text;
    }
    const formula = $("price_feed_formula").value.trim();
    if (formula) value.formula = formula;
  }
  const token = $(`${kind}_feed_token`).value.trim();
  if (token && TOKENS.has(source)) value.token = token;
  return value;
}

// Wires the form: each change is saved through `save`, and the token leaves the form once kept.
export function followFeed(kind, save, reread) {
  const key = `${kind}_feed`;
  for (const el of document.querySelectorAll(`[data-feed=${kind}]`)) {
    el.addEventListener("change", async () => {
      if (el.id === `${key}_source`) {
        // An area and a mirror are the vendor's: another source starts without them.
        for (const id of [`${key}_area0`, `${key}_area1`, `${key}_url`]) $(id).value = "";
        layout(kind);
      }
      const value = feedValue(kind);
      if (!(await save(key, value))) return;
      if (value && value.token) $(`${key}_token`).value = "";
      const saved = await reread();
      if (saved) $(`${key}_token`).placeholder = saved[key] && saved[key].has_secret ? "kept (type to replace)" : "";
    });
  }
}
