// A Shelly Gen2 plug on loopback, for the tests: it answers in the shape of a genuine capture,
// read in place from ../shared/fixtures/plugs/ (never copied), with its power set and its energy
// counter advancing at that power from the capture's own count, as the device's would.
//
// Usage: node tests/plugs/device.mjs --watts 100 [--reset-after 3]
//   Prints {"port": N} on one line, then serves until killed:
//   GET /shelly                  {"gen": 2, ...}, as a Gen2 device answers
//   GET /rpc/Shelly.GetStatus    {"switch:0": <the capture's Switch.GetStatus>} with apower set
//                                and aenergy.total = its count + watts × seconds since start
//   GET /__served                every counter value answered so far, in Wh, oldest first
// With --reset-after S the counter starts again from zero S seconds in, as after a power cut.

import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const CAPTURE = path.join(here, "../../../shared/fixtures/plugs/shelly-gen2/plus-plug-s-gen2-fw1.1.0-switch-getstatus.json");

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const watts = arg("watts", 100);
const resetAfter = arg("reset-after", Infinity);

const switch0 = JSON.parse(fs.readFileSync(CAPTURE, "utf8"));
const start = Date.now();
const served = [];

function counterWh(now) {
  const seconds = (now - start) / 1000;
  if (seconds < resetAfter) return switch0.aenergy.total + (watts * seconds) / 3600;
  return (watts * (seconds - resetAfter)) / 3600;
}

const server = http.createServer((req, res) => {
  const send = (body) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (req.url === "/shelly") {
    send({ id: "shellyplusplugs-test", mac: "000000000000", model: "SNPL-00112EU", gen: 2, app: "PlugS" });
  } else if (req.url === "/rpc/Shelly.GetStatus") {
    const total = counterWh(Date.now());
    served.push(total);
    send({ "switch:0": { ...switch0, apower: watts, aenergy: { ...switch0.aenergy, total } } });
  } else if (req.url === "/__served") {
    send(served);
  } else {
    res.writeHead(404, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ code: 404, message: `No handler for ${req.url}` }));
  }
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
