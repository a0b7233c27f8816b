#!/usr/bin/env node
// Drives an Ollama / OpenAI-compatible endpoint (the energy-measuring proxy, or
// tests/llm/upstream.mjs directly) with the official client libraries, `ollama` and `openai`
// (pinned in package.json), so the tests see exactly what real client code sees.
//
// Usage: node tests/llm/clients.mjs <scenario> <base url, e.g. http://127.0.0.1:11435>
//   Prints one JSON line on stdout with what the client got and exits 0; on an unexpected
//   failure prints the error on stderr and exits 1 (2 for bad usage). Arrival timing of
//   streamed parts goes to stderr. Gives up after CLIENTS_TIMEOUT_MS (default 60000).
//
// Scenarios:
//   ollama-generate-stream  generate llama3, streamed  -> {text, chunks, eval_count, prompt_eval_count, eval_duration}
//   ollama-chat-stream      chat llama3, streamed      -> same shape
//   ollama-chat             chat gemma3:1b             -> {content, eval_count, prompt_eval_count}
//   openai-chat-stream      openai/gpt-oss-20b, streamed with include_usage -> {text, chunks, usage}
//   openai-chat             openai/gpt-oss-20b         -> {content, usage}
//   ollama-error-after-200  generate `error-after-200`; the client throws -> {error}
//   ollama-cancel           generate `slow`, ollama.abort() after 2 parts -> {parts: 2, aborted: true}
//   cloud                   generate gpt-oss:120b-cloud, streamed -> same shape as ollama-generate-stream
//   ollama-down             generate (not streamed), expected to fail -> {status, error}
//                           (status: the HTTP status the client's error carries, or null)
// `chunks` counts every streamed object the client yielded, the final done:true / usage one included.
// With WATTBAR_RECEIPT=1 every request carries `X-Wattbar-Receipt: 1`; `wattbar` is then the
// receipt the client found in the answer (Ollama's final object, OpenAI's whole JSON body), else null.

import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { arrivalClock, emit } from './report.mjs';

const PROMPT = 'Tell me a joke about OpenTelemetry';
const OPENAI_MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant' },
  { role: 'user', content: 'Say hi in Portuguese' },
];

const [scenario, base] = process.argv.slice(2);

// Ollama streams: generate (`response`) and chat (`message.content`) have the same final stats.
async function ollamaStream(stream, textOf) {
  const clock = arrivalClock();
  let text = '';
  let chunks = 0;
  let last = null;
  for await (const part of stream) {
    clock.tick();
    chunks++;
    text += textOf(part);
    last = part;
  }
  clock.report(scenario);
  return {
    text,
    chunks,
    eval_count: last?.eval_count ?? null,
    prompt_eval_count: last?.prompt_eval_count ?? null,
    eval_duration: last?.eval_duration ?? null,
    wattbar: last?.wattbar ?? null,
  };
}

const generateText = (part) => part.response ?? '';
const chatText = (part) => part.message?.content ?? '';

const scenarios = {
  async 'ollama-generate-stream'(ollama) {
    const stream = await ollama.generate({ model: 'llama3', prompt: PROMPT, stream: true });
    return ollamaStream(stream, generateText);
  },

  async 'ollama-chat-stream'(ollama) {
    const stream = await ollama.chat({
      model: 'llama3',
      messages: [{ role: 'user', content: PROMPT }],
      stream: true,
    });
    return ollamaStream(stream, chatText);
  },

  async 'ollama-chat'(ollama) {
    const res = await ollama.chat({
      model: 'gemma3:1b',
      messages: [{ role: 'user', content: PROMPT }],
      stream: false,
    });
    return {
      content: res.message.content,
      eval_count: res.eval_count,
      prompt_eval_count: res.prompt_eval_count,
      wattbar: res.wattbar ?? null,
    };
  },

  async 'openai-chat-stream'(_, openai) {
    const stream = await openai.chat.completions.create({
      model: 'openai/gpt-oss-20b',
      messages: OPENAI_MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    });
    const clock = arrivalClock();
    let text = '';
    let chunks = 0;
    let last = null;
    for await (const chunk of stream) {
      clock.tick();
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
      last = chunk;
    }
    clock.report(scenario);
    return { text, chunks, usage: last?.usage ?? null };
  },

  async 'openai-chat'(_, openai) {
    const res = await openai.chat.completions.create({
      model: 'openai/gpt-oss-20b',
      messages: OPENAI_MESSAGES,
    });
    return {
      content: res.choices[0]?.message?.content ?? null,
      usage: res.usage ?? null,
      wattbar: res.wattbar ?? null,
    };
  },

  async 'ollama-error-after-200'(ollama) {
    const stream = await ollama.generate({ model: 'error-after-200', prompt: PROMPT, stream: true });
    try {
      for await (const _part of stream) {
        // the client throws on the {"error": ...} line
      }
    } catch (err) {
      return { error: err.message };
    }
    throw new Error('stream ended without the client throwing an error');
  },

  async 'ollama-cancel'(ollama) {
    // ollama-js documents Ollama#abort(): it aborts every streamed request of the instance and
    // the pending `for await` throws an AbortError.
    const stream = await ollama.generate({ model: 'slow', prompt: PROMPT, stream: true });
    let parts = 0;
    try {
      for await (const _part of stream) {
        parts++;
        if (parts === 2) ollama.abort();
      }
    } catch (err) {
      if (err.name !== 'AbortError') throw err;
      return { parts, aborted: true };
    }
    throw new Error(`stream ended after ${parts} parts without being aborted`);
  },

  async cloud(ollama) {
    const stream = await ollama.generate({ model: 'gpt-oss:120b-cloud', prompt: PROMPT, stream: true });
    return ollamaStream(stream, generateText);
  },

  async 'ollama-down'(ollama) {
    try {
      await ollama.generate({ model: 'llama3', prompt: PROMPT, stream: false });
    } catch (err) {
      // ollama-js throws ResponseError (with status_code) for HTTP errors, and fetch's TypeError
      // ("fetch failed", no status) when nothing answers at all.
      if (err.cause) process.stderr.write(`ollama-down: cause: ${err.cause.code ?? err.cause}\n`);
      return { status: err.status_code ?? null, error: err.message };
    }
    throw new Error('generate succeeded but the upstream was expected to be down');
  },
};
if (!scenarios[scenario] || !base) {
  process.stderr.write(
    `usage: node tests/llm/clients.mjs <scenario> <base url>\nscenarios: ${Object.keys(scenarios).join(', ')}\n`,
  );
  process.exit(2);
}

const host = base.replace(/\/+$/, '');
// WATTBAR_RECEIPT=1: every request asks the proxy for the energy receipt.
const headers = process.env.WATTBAR_RECEIPT === '1' ? { 'X-Wattbar-Receipt': '1' } : {};
const ollama = new Ollama({ host, headers });
// No retries: a retried request would hide what the proxy did and skew the upstream's counts.
const openai = new OpenAI({ baseURL: host + '/v1', apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });

const timeoutMs = Number(process.env.CLIENTS_TIMEOUT_MS ?? 60000);
setTimeout(() => {
  process.stderr.write(`${scenario}: timed out after ${timeoutMs} ms\n`);
  process.exit(1);
}, timeoutMs).unref();

try {
  emit(await scenarios[scenario](ollama, openai));
} catch (err) {
  process.stderr.write(`${scenario}: ${err.stack ?? err}\n`);
  process.exit(1);
}
