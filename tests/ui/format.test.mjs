// The dashboard's money and energy formats, in two locales, on zero, small and large values:
// `node --test tests/ui/format.test.mjs` (run by the engine's `ui_format` test).
import { test } from "node:test";
import assert from "node:assert/strict";
import { bound, energy, money, plural } from "../../ui/js/format.js";

// German puts a no-break space between the amount and its sign.
const nbsp = "\u00a0";

test("money is written as the locale writes its currency, small amounts to two significant digits", () => {
  assert.equal(money(0, "EUR", "en-US"), "€0.00");
  assert.equal(money(0.0012, "EUR", "en-US"), "€0.0012");
  assert.equal(money(0.000012345, "EUR", "en-US"), "€0.000012");
  assert.equal(money(0.42, "USD", "en-US"), "$0.42");
  assert.equal(money(12345.678, "EUR", "en-US"), "€12,345.68");
  assert.equal(money(0, "EUR", "de-DE"), `0,00${nbsp}€`);
  assert.equal(money(0.0012, "EUR", "de-DE"), `0,0012${nbsp}€`);
  assert.equal(money(12345.678, "EUR", "de-DE"), `12.345,68${nbsp}€`);
  assert.equal(money(null, "EUR", "de-DE"), "—");
});

test("energy is in watt-hours below a kilowatt-hour and in kilowatt-hours above, by the locale", () => {
  assert.equal(energy(0, "en-US"), "0 Wh");
  assert.equal(energy(0.00024, "en-US"), "0.24 Wh");
  assert.equal(energy(0.0123, "en-US"), "12.3 Wh");
  assert.equal(energy(0.95, "en-US"), "950 Wh");
  assert.equal(energy(1.234, "en-US"), "1.23 kWh");
  assert.equal(energy(12345.6, "en-US"), "12,346 kWh");
  assert.equal(energy(0.00024, "de-DE"), "0,24 Wh");
  assert.equal(energy(12345.6, "de-DE"), "12.346 kWh");
  assert.equal(energy(undefined, "de-DE"), "—");
});

test("a bound that rounds to nothing is not written, and one point is a point", () => {
  assert.equal(bound(0.0004), "");
  assert.equal(bound(0), "");
  assert.equal(bound(null), "");
  assert.equal(bound(12.5), "± 12.5");
  assert.equal(plural(1, "point", "points"), "1 point");
  assert.equal(plural(12, "point", "points"), "12 points");
});
