#!/usr/bin/env node
// The proxy's added latency: the same 500-chunk NDJSON stream (`bench-500`), requested
// directly from the upstream, through the proxy, and through the proxy with the energy receipt
// asked for (`X-Wattbar-Receipt: 1`: the last line waits for the record), one request at a
// time, in turn. Prints time to first byte and total time (p50, p99) for each, and the
// differences: the proxy's against direct, the receipt's against the proxy without it.
//
// Usage: node tests/llm/bench.mjs <upstream url> <proxy url> [requests=200]
//
// With --load: `requests` through the proxy, `concurrency` at a time on kept-alive connections,
// alternating a streamed OpenAI chat (SSE) and a non-streamed Ollama generate (Content-Length);
// every answer must arrive whole. Prints one JSON line: requests, failures, seconds.
//        node tests/llm/bench.mjs --load <proxy url> [requests=10000] [concurrency=64]
//
// With --bodies: `/metrics` read every 10 ms while `concurrency` requests of `mib` MiB each go
// through the proxy at once, `rounds` times over (half non-streamed Ollama generates, half
// streamed OpenAI chats, which the proxy asks for their usage: both bodies read whole and
// parsed). Prints one JSON line: the latency of `/metrics` (p50, p99, max, in ms) while the
// bodies pass, and before them at rest; the bodies' seconds and failures.
//        node tests/llm/bench.mjs --bodies <proxy url> <metrics url> [rounds=5] [mib=30] [concurrency=8]
import http from 'node:http';

if (process.argv[2] === '--bodies') {
  const [, , , base, metrics, rounds = '5', mib = '30', concurrency = '8'] = process.argv;
  const pad = 'x'.repeat(Number(mib) * 1024 * 1024);
  const kinds = [
    ['/api/generate', JSON.stringify({ model: 'llama3.2', prompt: pad, stream: false })],
    ['/v1/chat/completions', JSON.stringify({ model: 'qwen2.5:0.5b', stream: true, messages: [{ role: 'user', content: pad }] })],
  ];
  const post = (i) => new Promise((resolve) => {
    const [path, body] = kinds[i % kinds.length];
    const req = http.request(`${base}${path}`, {
      method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
    });
    req.on('error', () => resolve(false));
    req.end(body);
  });
  // The scrapes run on a thread of their own, so that writing the bodies here never delays
  // them: what they measure is the server's answer alone.
  const { Worker } = await import('node:worker_threads');
  const follow = () => {
    const worker = new Worker(`
      const http = require('node:http');
      const { parentPort, workerData } = require('node:worker_threads');
      const keep = new http.Agent({ keepAlive: true, maxSockets: 1 });
      let done = false, failed = 0;
      const seen = [];
      parentPort.on('message', () => { done = true; });
      const scrape = () => new Promise((resolve) => {
        const t0 = process.hrtime.bigint();
        http.get(workerData, { agent: keep }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode === 200 ? Number(process.hrtime.bigint() - t0) / 1e6 : null));
        }).on('error', () => resolve(null));
      });
      (async () => {
        while (!done) {
          const ms = await scrape();
          if (ms === null) failed++; else seen.push(ms);
          await new Promise((r) => setTimeout(r, 10));
        }
        parentPort.postMessage({ seen, failed });
      })();
    `, { eval: true, workerData: metrics });
    const result = new Promise((resolve) => worker.once('message', resolve));
    return { stop: async () => { worker.postMessage('stop'); const r = await result; await worker.terminate(); return r; } };
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
    return { n: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] };
  };
  const idle = follow();
  await sleep(3000);
  const atRest = await idle.stop();
  const loaded = follow();
  const t0 = process.hrtime.bigint();
  let failures = 0;
  for (let r = 0; r < Number(rounds); r++) {
    const oks = await Promise.all(Array.from({ length: Number(concurrency) }, (_, i) => post(i)));
    failures += oks.filter((ok) => !ok).length;
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const underLoad = await loaded.stop();
  console.log(JSON.stringify({
    bodies: Number(rounds) * Number(concurrency), mib: Number(mib), concurrency: Number(concurrency),
    seconds, failures, metrics_under_load_ms: stats(underLoad.seen), metrics_at_rest_ms: stats(atRest.seen),
    metrics_failures: atRest.failed + underLoad.failed,
  }));
  process.exit(failures === 0 ? 0 : 1);
}

if (process.argv[2] === '--load') {
  const [, , , base, total = '10000', concurrency = '64'] = process.argv;
  const pool = new http.Agent({ keepAlive: true, maxSockets: Number(concurrency) });
  const kinds = [
    ['/v1/chat/completions', { model: 'qwen2.5:0.5b', stream: true, messages: [{ role: 'user', content: 'x' }] }, (t) => t.includes('data: [DONE]')],
    ['/api/generate', { model: 'llama3.2', prompt: 'x', stream: false }, (t) => JSON.parse(t).done === true],
  ];
  const one = (i) => new Promise((resolve) => {
    const [path, payload, whole] = kinds[i % kinds.length];
    const body = JSON.stringify(payload);
    const req = http.request(`${base}${path}`, {
      method: 'POST', agent: pool, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve(res.statusCode === 200 && whole(text)));
    });
    req.on('error', () => resolve(false));
    req.end(body);
  });
  const t0 = process.hrtime.bigint();
  let next = 0;
  let failures = 0;
  const worker = async () => {
    while (next < Number(total)) {
      if (!(await one(next++))) failures++;
    }
  };
  await Promise.all(Array.from({ length: Number(concurrency) }, worker));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(JSON.stringify({ requests: Number(total), failures, seconds }));
  pool.destroy();
  process.exit(failures === 0 ? 0 : 1);
}

const [upstream, proxy, n = '200'] = process.argv.slice(2);
if (!upstream || !proxy) {
  console.error('usage: bench.mjs <upstream url> <proxy url> [requests]');
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const body = JSON.stringify({ model: 'bench-500', prompt: 'x', stream: true });

function once(base, receipt = false) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let first = null;
    let lines = 0;
    let tail = '';
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    if (receipt) headers['x-wattbar-receipt'] = '1';
    const req = http.request(`${base}/api/generate`, { method: 'POST', agent, headers }, (res) => {
      res.on('data', (chunk) => {
        if (first === null) first = process.hrtime.bigint();
        for (const b of chunk) if (b === 10) lines++;
        tail = (tail + chunk.toString('utf8')).slice(-2048);
      });
      res.on('end', () => {
        const end = process.hrtime.bigint();
        const receipted = tail.includes('"wattbar":{"id":');
        resolve({ ttfb: Number(first - t0) / 1e6, total: Number(end - t0) / 1e6, lines, firstBeforeEnd: first < end, receipted });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

const runs = { direct: [], proxy: [], receipt: [] };
for (let i = 0; i < 10; i++) { await once(upstream); await once(proxy); await once(proxy, true); } // warm-up
for (let i = 0; i < Number(n); i++) {
  runs.direct.push(await once(upstream));
  runs.proxy.push(await once(proxy));
  runs.receipt.push(await once(proxy, true));
}
for (const r of [...runs.proxy, ...runs.receipt]) {
  if (r.lines !== 500) throw new Error(`a proxied stream had ${r.lines} lines, not 500`);
}
if (runs.receipt.some((r) => !r.receipted)) throw new Error('an answer asked for its receipt came without it');
if (runs.proxy.some((r) => r.receipted)) throw new Error('an answer not asked for its receipt had one');
const row = (name, key, a = 'direct', b = 'proxy') => {
  const d = runs[a].map((r) => r[key]);
  const p = runs[b].map((r) => r[key]);
  return `${name.padEnd(22)} ${a} p50 ${pct(d, 50).toFixed(3)} ms p99 ${pct(d, 99).toFixed(3)} ms | ${b} p50 ${pct(p, 50).toFixed(3)} ms p99 ${pct(p, 99).toFixed(3)} ms | added p50 ${(pct(p, 50) - pct(d, 50)).toFixed(3)} ms p99 ${(pct(p, 99) - pct(d, 99)).toFixed(3)} ms`;
};
console.log(`${n} requests each, 500-chunk stream`);
console.log(row('time to first byte', 'ttfb'));
console.log(row('total', 'total'));
console.log(row('total, with receipt', 'total', 'proxy', 'receipt'));
const streamed = runs.proxy.filter((r) => r.firstBeforeEnd).length;
console.log(`first byte before the last through the proxy: ${streamed}/${runs.proxy.length} requests`);
agent.destroy();
