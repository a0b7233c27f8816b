// An https server on loopback, for the outbound tests: its certificate and key are the test's
// own (made with openssl by the test, for localhost and 127.0.0.1, from a CA the test makes).
//
// Usage: node tests/tls/server.mjs --cert leaf.pem --key leaf.key --manifest FILE [--token T]
//   Prints {"port": N} on one line, then serves until killed:
//   GET /manifest.json                 the bytes of FILE (a signed update manifest)
//   GET /api/states/sensor.plug_power  Home Assistant's answer for a power sensor, the genuine
//                                      capture read in place from ../shared/fixtures/plugs/
//                                      (never copied); 401 without `Authorization: Bearer T`
//   GET /to-http                       302 to http://127.0.0.1:PORT/manifest.json (a downgrade)
//   POST /v1/metrics                   an OTLP collector: the push read whole, 200 with an empty
//                                      protobuf answer (a full success)
//   GET /__asked                       how many requests each path had

import https from "node:https";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const STATE = path.join(
  here,
  "../../../shared/fixtures/plugs/homeassistant/rest-api-states-power-sensor-w.json",
);

const args = process.argv.slice(2);
const arg = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const token = arg("token");
const asked = {};

const server = https.createServer(
  { cert: fs.readFileSync(arg("cert")), key: fs.readFileSync(arg("key")) },
  (req, res) => {
    asked[req.url] = (asked[req.url] ?? 0) + 1;
    const send = (status, body, type = "application/json") => {
      res.writeHead(status, { "Content-Type": type });
      res.end(body);
    };
    if (req.url === "/manifest.json") {
      send(200, fs.readFileSync(arg("manifest")));
    } else if (req.url === "/api/states/sensor.plug_power") {
      if (req.headers.authorization !== `Bearer ${token}`) {
        send(401, JSON.stringify({ message: "401: Unauthorized" }));
      } else {
        send(200, fs.readFileSync(STATE));
      }
    } else if (req.url === "/to-http") {
      res.writeHead(302, { Location: `http://127.0.0.1:${server.address().port}/manifest.json` });
      res.end();
    } else if (req.url === "/v1/metrics" && req.method === "POST") {
      req.resume();
      req.on("end", () => send(200, "", "application/x-protobuf"));
    } else if (req.url === "/__asked") {
      send(200, JSON.stringify(asked));
    } else {
      send(404, JSON.stringify({ message: "not found" }));
    }
  },
);
server.on("tlsClientError", () => {});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
