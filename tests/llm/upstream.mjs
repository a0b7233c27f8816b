#!/usr/bin/env node
// Fake LLM server for the energy-measuring proxy tests: replays the genuine captured
// Ollama / llama.cpp response bodies in tests/fixtures/llm/ (see SOURCES.md there), byte
// for byte, paced like a real model emitting tokens. Node built-ins only.
//
// Usage: node tests/llm/upstream.mjs [--port 0] [--pace-ms 20] [--ps-pad-mb 0]
//   Listens on 127.0.0.1 (port 0 = ephemeral), prints one line `{"port": N}` on stdout once
//   listening, then serves until killed. Every request is logged to stderr (method, path, Host).
//
// Routes (JSON POST bodies; `model` and `stream` are read; `stream` defaults to true on /api/*
// like Ollama and to false on /v1/* like OpenAI):
//   POST /api/generate          stream: llama3 NDJSON, one line per write, --pace-ms apart;
//                               non-stream: the final done:true line as one JSON object
//   POST /api/chat              stream: llama3 NDJSON (paced); non-stream: gemma3:1b JSON
//   POST /v1/chat/completions   stream: llama.cpp gpt-oss SSE with usage+timings, one event per
//                               write (paced), or the no-usage Ollama stream for model
//                               `qwen2.5:0.5b`; non-stream: llama.cpp JSON, or the Ollama
//                               llama3.2 JSON for model `llama3.2`
//     special models (streamed):  `error-after-200`: 3 lines/events, then an error line/event, end
//                                 `slow`: 500 ms between lines/events
//                                 `bench-500`: 500 lines/events, no pause (the proxy benchmark)
//     models ending `:cloud`/`-cloud` are answered like any other.
//     other captures: /api/generate streamed for `gemma3:1b` (LangChainGo's capture),
//                     /v1/chat/completions streamed for `llama3.1` (include_usage ignored)
//   Request header `x-replay-framing` on these routes (default: `length` for a whole JSON body,
//   as the servers send it, and `chunked` for a stream):
//     `length`       the same pieces, paced alike, under a Content-Length (no chunks)
//     `close-early`  a Content-Length for the whole body, then the connection is ended
//                    after half the pieces: an answer the server broke off
//     `hold-end`     chunked, the last piece (the answer's end) sent, then the body's end
//                    held back 1 s, as a busy server can: a client may close first
//     `split-done`   chunked, a stream's pieces joined and cut in two in the middle of its
//                    `data: [DONE]`, sent paced
//   Request header `x-replay-done: no-space`: a stream's `data: [DONE]` written `data:[DONE]`,
//   as SSE allows (the capture's other bytes as they are).
//   Request header `x-replay-pad-mb: N`: a whole JSON answer padded with N MiB of spaces before
//   its closing brace (still the same JSON), for the bounds on answers read whole.
//   GET  /big?mb=N              N MiB (fractions allowed) of deterministic bytes, chunked, 64 KiB
//                               writes honouring backpressure; logs byte count + SHA-256 to stderr
//   GET  /big-sha?mb=N          {"sha256": "...", "bytes": N} of what /big?mb=N sends
//   *    /echo                  {"method","path","headers","body_bytes","body_sha256"}; the body is
//                               hashed as it streams in, never buffered
//   POST generation, model absent*  404 {"error":"model \"…\" not found, try pulling it first"}
//   GET  /api/tags              {"models":[]}
//   GET  /api/ps                the genuine /api/ps capture: gemma3:latest loaded; with
//                               --ps-pad-mb N, padded with N MiB of spaces before its last brace
//   GET  /                      "Ollama is running" (what Ollama answers; handy as a health check)
//   GET  /__stats               {"requests","ps","metrics","cancelled","hosts","asked"}: requests
//                               served (not counting /__stats, GET /api/ps, counted in "ps", nor
//                               GET /metrics, counted in "metrics"), streams cut
//                               short by the client, distinct Host
//                               headers, and per generation request what its body asked:
//                               {path, model, num_predict (options.num_predict), max_tokens,
//                               keep_alive}; "bodies": the last 20 such bodies under 64 KiB, as
//                               text exactly as they came
//   anything else               404 {"error":"not found"}
// Like Ollama, any request whose Host hostname is not 127.0.0.1, localhost or [::1] gets a
// 403 with an empty body (so a test can prove the proxy sends a loopback Host upstream).

import http from 'node:http';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const FIXTURES = fileURLToPath(new URL('../fixtures/llm/', import.meta.url));
const SLOW_PACE_MS = 500;
const HOLD_END_MS = 1000;
const BIG_CHUNK = 64 * 1024;
const MiB = 1024 * 1024;

function usage(problem) {
  console.error(`${problem}\nusage: node tests/llm/upstream.mjs [--port 0] [--pace-ms 20]`);
  process.exit(2);
}
let opts;
try {
  ({ values: opts } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      'pace-ms': { type: 'string', default: '20' },
      'ps-pad-mb': { type: 'string', default: '0' },
    },
  }));
} catch (err) {
  usage(err.message);
}
const PORT = Number(opts.port);
const PACE_MS = Number(opts['pace-ms']);
if (!Number.isInteger(PORT) || PORT < 0 || PORT > 65535) usage(`bad --port ${opts.port}`);
if (!(PACE_MS >= 0)) usage(`bad --pace-ms ${opts['pace-ms']}`);

const fixture = (name) => readFileSync(FIXTURES + name);

// NDJSON: one piece per line, each keeping its '\n'.
function ndjsonLines(buf) {
  const lines = [];
  let start = 0;
  for (let i = buf.indexOf(0x0a); i !== -1; i = buf.indexOf(0x0a, start)) {
    lines.push(buf.subarray(start, i + 1));
    start = i + 1;
  }
  if (start < buf.length) lines.push(buf.subarray(start));
  return lines;
}

// SSE: one piece per event, each keeping its terminating blank line ("\n\n").
function sseEvents(buf) {
  const events = [];
  let start = 0;
  for (let i = buf.indexOf('\n\n'); i !== -1; i = buf.indexOf('\n\n', start)) {
    events.push(buf.subarray(start, i + 2));
    start = i + 2;
  }
  if (start < buf.length) events.push(buf.subarray(start));
  return events;
}

const NDJSON = 'application/x-ndjson';
const SSE = 'text/event-stream';
const JSON_CT = 'application/json; charset=utf-8';

const GENERATE_STREAM = ndjsonLines(fixture('ollama_api-generate_stream_llama3_openllmetry.ndjson'));
const CHAT_STREAM = ndjsonLines(fixture('ollama_api-chat_stream_llama3_openllmetry.ndjson'));
const V1_STREAM = sseEvents(fixture('llamacpp_v1-chat-completions_stream_gpt-oss-20b_usage-timings_fantasy.sse'));
const V1_STREAM_QWEN = sseEvents(fixture('ollama_v1-chat-completions_stream_qwen2.5-0.5b_no-usage_elastic.sse'));
const V1_STREAM_LLAMA31 = sseEvents(
  fixture('ollama_v1-chat-completions_stream_llama3.1_include-usage-ignored_magentic.sse'),
);
const GENERATE_STREAM_GEMMA = ndjsonLines(fixture('ollama_api-generate_stream_gemma3-1b_langchaingo.ndjson'));
const V1_JSON = fixture('llamacpp_v1-chat-completions_nonstream_gpt-oss-20b_timings_fantasy.json');
const V1_JSON_LLAMA32 = fixture('ollama_v1-chat-completions_nonstream_llama3.2_exchange.json');
const CHAT_JSON = fixture('ollama_api-chat_nonstream_gemma3-1b_openllmetry.json');
// The done:true object that ends the generate stream, without its trailing newline.
const PS_JSON = fixture('ollama_api-ps_gemma3_jq-reformatted_issue.json');
const GENERATE_JSON = GENERATE_STREAM.at(-1).subarray(0, -1);

const ERROR_MESSAGE = 'an error was encountered while running the model: unexpected EOF';
const NDJSON_ERROR = Buffer.from(JSON.stringify({ error: ERROR_MESSAGE }) + '\n');
const SSE_ERROR = Buffer.from(
  'data: ' + JSON.stringify({ error: { message: ERROR_MESSAGE, type: 'server_error' } }) + '\n\n',
);
const stats = { requests: 0, ps: 0, metrics: 0, cancelled: 0, hosts: [], asked: [], bodies: [] };

// A JSON object's text with `mb` MiB of spaces before its closing brace: the same JSON, larger.
function padded(json, mb) {
  if (!(mb > 0)) return json;
  const close = json.lastIndexOf(0x7d);
  return Buffer.concat([json.subarray(0, close), Buffer.alloc(Math.round(mb * MiB), 0x20), json.subarray(close)]);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function log(msg) {
  process.stderr.write(`upstream: ${msg}\n`);
}

function isLoopbackHost(host) {
  if (!host) return false;
  let hostname = host;
  if (host.startsWith('[')) hostname = host.slice(0, host.indexOf(']') + 1);
  else if (host.includes(':')) hostname = host.slice(0, host.indexOf(':'));
  hostname = hostname.toLowerCase();
  return hostname === '127.0.0.1' || hostname === 'localhost' || hostname === '[::1]';
}

function sendBytes(res, status, contentType, body) {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': body.length });
  res.end(body);
}

function sendJson(res, status, obj) {
  sendBytes(res, status, JSON_CT, Buffer.from(JSON.stringify(obj)));
}

// Tracks whether the client went away before we finished a streamed response.
function watchClose(res, path) {
  const state = { closed: false };
  res.on('close', () => {
    state.closed = true;
    if (!res.writableEnded) {
      stats.cancelled++;
      log(`cancelled ${path}`);
    }
  });
  return state;
}

// Resolves when the response can take more data, or when the connection is gone.
function drained(res) {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

// Writes `pieces` one per write() with `paceMs` between them; stops if the client disconnects.
// framing: 'chunked' (default), 'length' (a Content-Length for the whole) or 'close-early' (a
// Content-Length for the whole, and the socket destroyed after half the pieces).
async function streamPieces(res, path, contentType, pieces, paceMs, framing = 'chunked') {
  const state = watchClose(res, path);
  const headers = { 'Content-Type': contentType };
  if (framing !== 'chunked' && framing !== 'hold-end') headers['Content-Length'] = pieces.reduce((n, p) => n + p.length, 0);
  res.writeHead(200, headers);
  for (let i = 0; i < pieces.length; i++) {
    if (framing === 'close-early' && i === Math.floor(pieces.length / 2)) {
      // Ended, not reset: the client gets every byte written so far, then the end of the
      // connection, short of the Content-Length.
      log(`closing ${path} early after ${i} of ${pieces.length} pieces`);
      res.socket?.end();
      return;
    }
    if (i > 0 && paceMs > 0) await sleep(paceMs);
    else if (i > 0 && paceMs < 0) await new Promise((resolve) => setImmediate(resolve));
    if (state.closed) return;
    if (!res.write(pieces[i])) await drained(res);
  }
  if (framing === 'hold-end') await sleep(HOLD_END_MS);
  if (!state.closed) res.end();
}

// Chooses the replayed stream for a streamed request, applying the special models.
function streamFor(model, pieces, errorPiece) {
  // For the proxy benchmark: 500 chunks (the first token line 499 times, then the final line),
  // each written on its own turn of the event loop with no pause.
  if (model === 'bench-500') {
    return { pieces: [...Array(499).fill(pieces[0]), pieces[pieces.length - 1]], pace: -1 };
  }
  if (model === 'error-after-200') return { pieces: [...pieces.slice(0, 3), errorPiece], pace: PACE_MS };
  if (model === 'slow') return { pieces, pace: SLOW_PACE_MS };
  return { pieces, pace: PACE_MS };
}

async function readJsonBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length < 64 * 1024) stats.bodies = [...stats.bodies.slice(-19), text];
  if (text.trim() === '') throw new Error('missing request body');
  const body = JSON.parse(text);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new Error('request body is not a JSON object');
  }
  return body;
}

// Deterministic /big content: a fixed 64 KiB pattern whose first 8 bytes are replaced by the
// chunk index (big-endian), so reordered, dropped or repeated chunks change the hash.
const BIG_PATTERN = Buffer.alloc(BIG_CHUNK);
for (let i = 0; i < BIG_CHUNK; i++) BIG_PATTERN[i] = (i * 31 + 7) & 0xff;

function bigChunk(index, size) {
  const buf = Buffer.allocUnsafe(size);
  BIG_PATTERN.copy(buf, 0, 0, size);
  const head = Buffer.alloc(8);
  head.writeBigUInt64BE(BigInt(index));
  head.copy(buf, 0, 0, Math.min(8, size));
  return buf;
}

function bigBytes(url) {
  const mb = Number(url.searchParams.get('mb') ?? '1');
  if (!Number.isFinite(mb) || mb < 0 || mb > 65536) return null;
  return Math.round(mb * MiB);
}

const shaCache = new Map();
function bigSha(bytes) {
  if (!shaCache.has(bytes)) {
    const hash = createHash('sha256');
    for (let off = 0, i = 0; off < bytes; off += BIG_CHUNK, i++) {
      hash.update(bigChunk(i, Math.min(BIG_CHUNK, bytes - off)));
    }
    shaCache.set(bytes, hash.digest('hex'));
  }
  return shaCache.get(bytes);
}

async function streamBig(res, path, bytes) {
  const state = watchClose(res, path);
  const hash = createHash('sha256');
  res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
  let sent = 0;
  for (let i = 0; sent < bytes; i++) {
    if (state.closed) return;
    const chunk = bigChunk(i, Math.min(BIG_CHUNK, bytes - sent));
    hash.update(chunk);
    sent += chunk.length;
    if (!res.write(chunk)) await drained(res);
  }
  if (state.closed) return;
  res.end();
  log(`big: sent ${sent} bytes sha256 ${hash.digest('hex')}`);
}

async function echo(req, res, path) {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of req) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  log(`echo: received ${bytes} bytes`);
  sendJson(res, 200, {
    method: req.method,
    path,
    headers: req.headers,
    body_bytes: bytes,
    body_sha256: hash.digest('hex'),
  });
}

async function handle(req, res) {
  const host = req.headers.host ?? '';
  const url = new URL(req.url, 'http://upstream.invalid');
  const path = url.pathname;
  log(`${req.method} ${req.url} Host: ${host || '(none)'}`);

  if (path === '/__stats' && req.method === 'GET') {
    return sendJson(res, 200, stats);
  }
  // The proxy reads /api/ps every few seconds on its own: counted apart, so that `requests`
  // counts what clients caused.
  if (req.method === 'GET' && path === '/api/ps') stats.ps++;
  // Wattbar asks the proxy's upstream for its /metrics (up to three times, then lets an Ollama
  // go): counted apart too.
  else if (req.method === 'GET' && path === '/metrics') {
    stats.metrics++;
    return sendJson(res, 404, { error: 'not found' });
  } else stats.requests++;
  if (!stats.hosts.includes(host)) stats.hosts.push(host);

  if (!isLoopbackHost(host)) {
    log(`403: Host ${JSON.stringify(host)} is not loopback`);
    res.writeHead(403, { 'Content-Length': 0 });
    return res.end();
  }

  const route = `${req.method} ${path}`;
  if (path === '/echo') return echo(req, res, req.url);
  if (route === 'GET /') return sendBytes(res, 200, 'text/plain; charset=utf-8', Buffer.from('Ollama is running'));
  if (route === 'GET /api/tags') return sendJson(res, 200, { models: [] });
  if (route === 'GET /api/ps') return sendBytes(res, 200, JSON_CT, padded(PS_JSON, Number(opts['ps-pad-mb'])));
  if (route === 'GET /big' || route === 'GET /big-sha') {
    const bytes = bigBytes(url);
    if (bytes === null) return sendJson(res, 400, { error: 'mb must be a number between 0 and 65536' });
    if (path === '/big-sha') return sendJson(res, 200, { sha256: bigSha(bytes), bytes });
    return streamBig(res, path, bytes);
  }

  if (route === 'POST /api/generate' || route === 'POST /api/chat' || route === 'POST /v1/chat/completions') {
    let body;
    try {
      body = await readJsonBody(req);
    } catch (err) {
      return sendJson(res, 400, { error: err.message });
    }
    const model = body.model;
    stats.asked.push({
      path,
      model: model ?? null,
      num_predict: body.options?.num_predict ?? null,
      max_tokens: body.max_tokens ?? null,
      keep_alive: body.keep_alive ?? null,
    });
    // A model this server has not pulled: Ollama's 404 and its message form, for any model whose
    // name starts with "absent".
    if (typeof model === 'string' && model.startsWith('absent')) {
      return sendJson(res, 404, { error: `model "${model}" not found, try pulling it first` });
    }
    const openai = path.startsWith('/v1/');
    const stream = body.stream ?? !openai;
    // Like the servers: a whole JSON body has a Content-Length, a stream comes in chunks.
    const framing = req.headers['x-replay-framing'] ?? (stream ? 'chunked' : 'length');
    log(`${path}: model=${JSON.stringify(model)} stream=${stream} framing=${framing}`);
    const answer = (contentType, pieces, pace) => {
      // A single body broken off is cut in its middle.
      if (framing === 'close-early' && pieces.length === 1) {
        const half = Math.floor(pieces[0].length / 2);
        pieces = [pieces[0].subarray(0, half), pieces[0].subarray(half)];
      }
      if (contentType === JSON_CT) pieces = pieces.map((p) => padded(p, Number(req.headers['x-replay-pad-mb'] ?? 0)));
      if (contentType === SSE && req.headers['x-replay-done'] === 'no-space') {
        pieces = pieces.map((p) => Buffer.from(p.toString('latin1').replace('data: [DONE]', 'data:[DONE]'), 'latin1'));
      }
      if (framing === 'split-done') {
        const whole = Buffer.concat(pieces);
        const at = whole.lastIndexOf('[DONE]') + 3;
        pieces = [whole.subarray(0, at), whole.subarray(at)];
        return streamPieces(res, path, contentType, pieces, pace, 'chunked');
      }
      return streamPieces(res, path, contentType, pieces, pace, framing);
    };

    if (path === '/api/generate') {
      if (!stream) return answer(JSON_CT, [GENERATE_JSON], 0);
      const s = streamFor(model, model === 'gemma3:1b' ? GENERATE_STREAM_GEMMA : GENERATE_STREAM, NDJSON_ERROR);
      return answer(NDJSON, s.pieces, s.pace);
    }
    if (path === '/api/chat') {
      if (!stream) return answer(JSON_CT, [CHAT_JSON], 0);
      const s = streamFor(model, CHAT_STREAM, NDJSON_ERROR);
      return answer(NDJSON, s.pieces, s.pace);
    }
    if (!stream) return answer(JSON_CT, [model === 'llama3.2' ? V1_JSON_LLAMA32 : V1_JSON], 0);
    const v1 = { 'qwen2.5:0.5b': V1_STREAM_QWEN, 'llama3.1': V1_STREAM_LLAMA31 }[model] ?? V1_STREAM;
    const s = streamFor(model, v1, SSE_ERROR);
    return answer(SSE, s.pieces, s.pace);
  }

  return sendJson(res, 404, { error: 'not found' });
}

const server = http.createServer({ noDelay: true, requestTimeout: 0 }, (req, res) => {
  handle(req, res).catch((err) => {
    log(`error on ${req.method} ${req.url}: ${err.stack ?? err}`);
    if (!res.headersSent) sendJson(res, 500, { error: String(err.message ?? err) });
    else res.destroy();
  });
});

server.listen(PORT, '127.0.0.1', () => {
  process.stdout.write(`{"port": ${server.address().port}}\n`);
});
