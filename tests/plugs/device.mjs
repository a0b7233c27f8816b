// A plug on loopback, for the tests: it answers in the shape of a genuine capture, read in place
// from ../shared/fixtures/plugs/ (never copied), with its power set and its energy counter
// advancing at that power from the capture's own count, written in the device's own unit and
// step, as the device's would.
//
// Usage: node tests/plugs/device.mjs --watts 100 [--vendor shelly-gen2] [--reset-after 3]
//          [--step-at S --step-to W] [--fail-every N] [--stall-at S --stall-for D] [--jitter-wh 1]
//   Prints {"port": N, "path": P, "started": Unix seconds its clock starts at} on one line, then
//   serves until killed:
//   GET /shelly                  {"gen": 2, ...}, as a Gen2 device answers (shelly-gen2)
//   GET /rpc/Shelly.GetStatus    {"switch:0": <the capture's Switch.GetStatus>} with apower set
//                                and aenergy.total = its count + energy since start, in Wh to
//                                three decimals, as Gen2 writes it
//   GET /status                  shelly-gen1: a Plug S's status, meters[0].total in whole
//                                watt-minutes
//   GET /tasmota                 tasmota: Status 8, ENERGY.Total in kWh to three decimals
//   kasa                         the emeter's get_realtime, total_wh in whole Wh, on a TCP port
//                                of its own ("kasa_port") in the legacy protocol a Kasa speaks:
//                                each message a 4-byte big-endian length, then the JSON
//                                scrambled by an autokey XOR from 171
//   GET /__served                every counter value answered so far, in Wh, oldest first
//   GET /__truth                 {"wh": the energy drawn since start, "seconds": since start}
// --reset-after S: the counter starts again from zero S seconds in, as after a power cut.
// --step-at S --step-to W: the power becomes W from S seconds in.
// --fail-every N: every Nth request answers HTTP 500, as a busy device does.
// --stall-at S --stall-for D: a request from S seconds in is answered only D seconds later.
// --jitter-wh J: every other answer reads J Wh more than the count, as a jittering meter does.

import http from "node:http";
import net from "node:net";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const PLUGS = path.join(here, "../../../shared/fixtures/plugs");
const capture = (file) => JSON.parse(fs.readFileSync(path.join(PLUGS, file), "utf8"));

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const text = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const watts = arg("watts", 100);
const vendor = text("vendor", "shelly-gen2");
const resetAfter = arg("reset-after", Infinity);
const stepAt = arg("step-at", Infinity);
const stepTo = arg("step-to", watts);
const failEvery = arg("fail-every", 0);
const stallAt = arg("stall-at", Infinity);
const stallFor = arg("stall-for", 0);
const jitterWh = arg("jitter-wh", 0);

const switch0 = capture("shelly-gen2/plus-plug-s-gen2-fw1.1.0-switch-getstatus.json");
const gen1 = capture("shelly-gen1/plug-s-gen1-fw1.14.0-status.json");
const tasmota = capture("tasmota/plug-status8-http-relay-off-voltage0-padded-ints.json");
const kasa = capture("kasa/kp125-us-fw1.0.6-emeter-100w.json");
// Each capture's own count, in Wh, where the counter starts.
const startWh = {
  "shelly-gen2": switch0.aenergy.total,
  "shelly-gen1": gen1.meters[0].total / 60,
  tasmota: tasmota.StatusSNS.ENERGY.Total * 1000,
  kasa: kasa.emeter.get_realtime.total_wh,
}[vendor];
if (startWh === undefined) throw new Error(`unknown vendor ${vendor}`);

const start = Date.now();
const served = [];
let requests = 0;
let answers = 0;

const seconds = (now) => (now - start) / 1000;
const powerAt = (s) => (s < stepAt ? watts : stepTo);
// Energy drawn from start to s seconds, in Wh.
const drawnWh = (s) => (Math.min(s, stepAt) * watts + Math.max(0, s - stepAt) * stepTo) / 3600;

function countWh(now) {
  const s = seconds(now);
  if (s < resetAfter) return startWh + drawnWh(s);
  return drawnWh(s) - drawnWh(resetAfter);
}

// The count as the device writes it: floored to its step.
const floorTo = (x, step) => Math.floor(x / step + 1e-9) * step;

function answer(now) {
  const s = seconds(now);
  answers += 1;
  const jitter = jitterWh && answers % 2 === 0 ? jitterWh : 0;
  const wh = countWh(now) + jitter;
  const w = powerAt(s);
  switch (vendor) {
    case "shelly-gen1": {
      const wmin = Math.floor(wh * 60 + 1e-9);
      served.push(wmin / 60);
      return { ...gen1, meters: [{ ...gen1.meters[0], power: w, total: wmin }] };
    }
    case "tasmota": {
      const kwh = Number(floorTo(wh / 1000, 0.001).toFixed(3));
      served.push(kwh * 1000);
      const energy = { ...tasmota.StatusSNS.ENERGY, Total: kwh, Power: w, Voltage: 230 };
      return { StatusSNS: { ...tasmota.StatusSNS, ENERGY: energy } };
    }
    case "kasa": {
      const total = Math.floor(wh + 1e-9);
      served.push(total);
      const realtime = { ...kasa.emeter.get_realtime, power_mw: Math.round(w * 1000), total_wh: total };
      return { emeter: { get_realtime: realtime } };
    }
    default: {
      const total = Number(floorTo(wh, 0.001).toFixed(3));
      served.push(total);
      return { "switch:0": { ...switch0, apower: w, aenergy: { ...switch0.aenergy, total } } };
    }
  }
}

const paths = {
  "shelly-gen2": "/rpc/Shelly.GetStatus",
  "shelly-gen1": "/status",
  tasmota: "/tasmota",
};

const server = http.createServer((req, res) => {
  const send = (body, status = 200) => {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (req.url === "/shelly" && vendor.startsWith("shelly")) {
    const gen = vendor === "shelly-gen2" ? 2 : undefined;
    send({ id: "shelly-test", mac: "000000000000", model: "SNPL-00112EU", gen, app: "PlugS" });
  } else if (req.url === paths[vendor]) {
    requests += 1;
    const now = Date.now();
    if (failEvery && requests % failEvery === 0) {
      send({ code: 500, message: "busy" }, 500);
    } else if (seconds(now) >= stallAt && seconds(now) < stallAt + stallFor) {
      // Said when asked, arriving late: the answer of the moment the device was asked.
      const body = answer(now);
      setTimeout(() => send(body), stallFor * 1000);
    } else {
      send(answer(now));
    }
  } else if (req.url === "/__served") {
    send(served);
  } else if (req.url === "/__truth") {
    const s = seconds(Date.now());
    send({ wh: drawnWh(s), seconds: s });
  } else {
    send({ code: 404, message: `No handler for ${req.url}` }, 404);
  }
});

// The legacy Kasa protocol: the scrambling has no secret, the same both ways.
const scramble = (plain) => {
  const out = Buffer.alloc(4 + plain.length);
  out.writeUInt32BE(plain.length, 0);
  let key = 171;
  for (let i = 0; i < plain.length; i += 1) {
    key ^= plain[i];
    out[4 + i] = key;
  }
  return out;
};
const unscramble = (payload) => {
  const out = Buffer.alloc(payload.length);
  let key = 171;
  for (let i = 0; i < payload.length; i += 1) {
    out[i] = key ^ payload[i];
    key = payload[i];
  }
  return out;
};

// A Kasa answers each request it reads whole on the connection, then the client closes it.
const kasaServer = net.createServer((socket) => {
  let pending = Buffer.alloc(0);
  socket.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4 && pending.length >= 4 + pending.readUInt32BE(0)) {
      const length = pending.readUInt32BE(0);
      const asked = JSON.parse(unscramble(pending.subarray(4, 4 + length)).toString("utf8"));
      pending = pending.subarray(4 + length);
      const body = asked?.emeter?.get_realtime ? answer(Date.now()) : { err_code: -1 };
      socket.write(scramble(Buffer.from(JSON.stringify(body), "utf8")));
    }
  });
  socket.on("error", () => {});
});

const listening = (s) => new Promise((resolve) => s.listen(0, "127.0.0.1", resolve));
await listening(server);
const said = { port: server.address().port, path: paths[vendor] ?? null, started: start / 1000 };
if (vendor === "kasa") {
  await listening(kasaServer);
  said.kasa_port = kasaServer.address().port;
}
process.stdout.write(`${JSON.stringify(said)}\n`);
