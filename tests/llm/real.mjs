#!/usr/bin/env node
// Drives a real OpenAI-compatible model server (scripts/llm-server serve: llama.cpp's own
// llama-server serving SmolLM2-135M-Instruct on CPU), or the energy-measuring proxy in front of it, with the
// official `openai` client (pinned in package.json), so the tests see what real client code sees.
// Everything generates at temperature 0 with seed 1 and few tokens: the answers are the same on
// every run on one machine, and each takes well under a second or two on 2 CPU cores.
//
// Usage: node tests/llm/real.mjs <scenario> <base url without /v1, e.g. http://127.0.0.1:11435> [model]
//   model defaults to smollm2. Prints one JSON line on stdout with what the client got and exits
//   0; on an unexpected failure prints the error on stderr and exits 1 (2 for bad usage).
//   Arrival timing of streamed parts goes to stderr. Gives up after REAL_TIMEOUT_MS (default 60000).
//
// Scenarios:
//   chat               chat, not streamed                 -> {content, usage, finish_reason}
//   completions        /v1/completions, not streamed      -> {text, usage}
//   chat-stream        chat's prompt, streamed, no stream_options
//                                                         -> {text, chunks, content_chunks, usage, usage_chunks, finish_reason}
//   chat-stream-usage  the same with stream_options.include_usage -> same shape
//   concurrent         4 different prompts at once, 2 streamed and 2 not
//                                                         -> {answers: [{stream, text, usage}]}
//   abort              streamed, max_tokens 300, aborted after 3 chunks -> {parts: 3, aborted: true}
//   too-long           chat with a prompt longer than the 4096-token context -> {status, error}
//                      (status and message of the client's APIError)
//   routed             chat as `chat`, with the response's headers
//                                                         -> {content, model, usage, routed, request_id, wattbar}
//                      (`wattbar`: the energy receipt, with WATTBAR_RECEIPT=1, else null)
//   routed-off         the same with `X-Wattbar-Route: off`       -> same shape
//   routed-stream      chat's prompt, streamed, with the headers  -> {text, model, routed}
//                      (`model` is the name the server answered with; `routed` the
//                      X-Wattbar-Routed header, null when absent)
//   models             client.models.list()               -> {ids}
//   embeddings         client.embeddings.create           -> {status, dims} or {status, error}
// `chunks` counts every streamed chunk the client yielded; `content_chunks` those with non-empty
// delta.content; `usage` is the last chunk's usage when any chunk had one, else null;
// `usage_chunks` counts chunks with empty `choices` (the include_usage chunk of OpenAI's API).

import OpenAI from 'openai';
import { arrivalClock, emit } from './report.mjs';

const MESSAGES = [{ role: 'user', content: 'Name three primary colors.' }];
const MAX_TOKENS = 32;
const GEN = { temperature: 0, seed: 1, max_tokens: MAX_TOKENS };

const [scenario, base, modelArg] = process.argv.slice(2);
const model = modelArg ?? 'smollm2';

async function collectChat(stream, label) {
  const clock = arrivalClock();
  let text = '';
  let chunks = 0;
  let contentChunks = 0;
  let usageChunks = 0;
  let usage = null;
  let finishReason = null;
  for await (const chunk of stream) {
    clock.tick();
    chunks++;
    if (chunk.choices.length === 0) usageChunks++;
    const content = chunk.choices[0]?.delta?.content ?? '';
    if (content) contentChunks++;
    text += content;
    finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    if (chunk.usage) usage = chunk.usage;
  }
  clock.report(label);
  return {
    text,
    chunks,
    content_chunks: contentChunks,
    usage,
    usage_chunks: usageChunks,
    finish_reason: finishReason,
  };
}

// The status and message an openai.APIError carries; anything else is unexpected.
function apiError(err) {
  if (!(err instanceof OpenAI.APIError) || err.status === undefined) throw err;
  return { status: err.status, error: err.message };
}

// Chat, not streamed, with request headers; what the server answered and the proxy said.
async function routedChat(openai, headers) {
  const { data, response } = await openai.chat.completions
    .create({ model, messages: MESSAGES, ...GEN }, { headers })
    .withResponse();
  return {
    content: data.choices[0]?.message?.content ?? null,
    model: data.model ?? null,
    usage: data.usage ?? null,
    routed: response.headers.get('x-wattbar-routed'),
    request_id: response.headers.get('x-wattbar-request-id'),
    wattbar: data.wattbar ?? null,
  };
}

const scenarios = {
  async chat(openai) {
    const res = await openai.chat.completions.create({ model, messages: MESSAGES, ...GEN });
    return {
      content: res.choices[0]?.message?.content ?? null,
      usage: res.usage ?? null,
      finish_reason: res.choices[0]?.finish_reason ?? null,
    };
  },

  async completions(openai) {
    const res = await openai.completions.create({
      model,
      prompt: 'The three primary colors are',
      ...GEN,
    });
    return { text: res.choices[0]?.text ?? null, usage: res.usage ?? null };
  },

  async 'chat-stream'(openai) {
    const stream = await openai.chat.completions.create({ model, messages: MESSAGES, ...GEN, stream: true });
    return collectChat(stream, scenario);
  },

  async 'chat-stream-usage'(openai) {
    const stream = await openai.chat.completions.create({
      model,
      messages: MESSAGES,
      ...GEN,
      stream: true,
      stream_options: { include_usage: true },
    });
    return collectChat(stream, scenario);
  },

  async concurrent(openai) {
    const prompts = [
      { stream: true, content: 'Name a fruit that is yellow.' },
      { stream: false, content: 'What is two plus two?' },
      { stream: true, content: 'Say hello in French.' },
      { stream: false, content: 'Name a large animal.' },
    ];
    const answers = await Promise.all(
      prompts.map(async ({ stream, content }, i) => {
        const messages = [{ role: 'user', content }];
        if (stream) {
          const s = await openai.chat.completions.create({ model, messages, ...GEN, stream: true });
          const r = await collectChat(s, `${scenario}[${i}]`);
          return { stream, text: r.text, usage: r.usage };
        }
        const res = await openai.chat.completions.create({ model, messages, ...GEN });
        return { stream, text: res.choices[0]?.message?.content ?? null, usage: res.usage ?? null };
      }),
    );
    return { answers };
  },

  async abort(openai) {
    const stream = await openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Write a long story about a lighthouse keeper.' }],
      temperature: 0,
      seed: 1,
      max_tokens: 300,
      stream: true,
    });
    let parts = 0;
    try {
      for await (const _chunk of stream) {
        parts++;
        if (parts === 3) stream.controller.abort();
      }
    } catch (err) {
      if (!(err instanceof OpenAI.APIUserAbortError) && err.name !== 'AbortError') throw err;
      return { parts, aborted: true };
    }
    // openai-node ends the iteration quietly when its own controller aborts between chunks.
    if (stream.controller.signal.aborted) return { parts, aborted: true };
    throw new Error(`stream ended after ${parts} parts without being aborted`);
  },

  async 'too-long'(openai) {
    // About 5000 tokens (each ' word' is one token for SmolLM2's tokenizer): over n_ctx 4096.
    const long = 'Repeat after me:' + ' word'.repeat(5000);
    try {
      await openai.chat.completions.create({ model, messages: [{ role: 'user', content: long }], ...GEN });
    } catch (err) {
      return apiError(err);
    }
    throw new Error('a prompt longer than the context was answered');
  },

  async routed(openai) {
    return routedChat(openai, {});
  },

  async 'routed-off'(openai) {
    return routedChat(openai, { 'X-Wattbar-Route': 'off' });
  },

  async 'routed-stream'(openai) {
    const { data: stream, response } = await openai.chat.completions
      .create({ model, messages: MESSAGES, ...GEN, stream: true })
      .withResponse();
    let text = '';
    let answered = null;
    for await (const chunk of stream) {
      answered = chunk.model ?? answered;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    return { text, model: answered, routed: response.headers.get('x-wattbar-routed') };
  },

  async models(openai) {
    const ids = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    return { ids };
  },

  async embeddings(openai) {
    try {
      const res = await openai.embeddings.create({ model, input: 'The sky is blue.' });
      return { status: 200, dims: res.data[0]?.embedding?.length ?? null };
    } catch (err) {
      return apiError(err);
    }
  },
};

if (!scenarios[scenario] || !base) {
  process.stderr.write(
    `usage: node tests/llm/real.mjs <scenario> <base url> [model]\nscenarios: ${Object.keys(scenarios).join(', ')}\n`,
  );
  process.exit(2);
}

// No retries: a retried request would hide what the proxy did and skew its counts.
// WATTBAR_RECEIPT=1: every request asks the proxy for the energy receipt.
const defaultHeaders = process.env.WATTBAR_RECEIPT === '1' ? { 'X-Wattbar-Receipt': '1' } : {};
const openai = new OpenAI({ baseURL: base.replace(/\/+$/, '') + '/v1', apiKey: 'none', maxRetries: 0, defaultHeaders });

const timeoutMs = Number(process.env.REAL_TIMEOUT_MS ?? 60000);
setTimeout(() => {
  process.stderr.write(`${scenario}: timed out after ${timeoutMs} ms\n`);
  process.exit(1);
}, timeoutMs).unref();

try {
  emit(await scenarios[scenario](openai));
} catch (err) {
  process.stderr.write(`${scenario}: ${err.stack ?? err}\n`);
  process.exit(1);
}
