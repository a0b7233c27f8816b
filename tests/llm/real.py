#!/usr/bin/env python3
"""Streams chat answers from a real OpenAI-compatible server (or the proxy in front of it) with
the official Python `openai` client, as Python users' code does: iterate the stream to its end,
then leave the `with` block, which closes the connection at once.

Usage: real.py <base url without /v1> <count> [model]
  Runs <count> streamed chats one after another (temperature 0, seed 1, 8 tokens at most) and
  prints one JSON line: {"streams": n, "texts": [...], "content_chunks": [...]}. Exits 1 with the
  error on stderr when a request fails. Installed beside the model server (scripts/llm-server
  python), whose virtual environment pins the client.
"""

import json
import sys

import openai


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    base, count = sys.argv[1], int(sys.argv[2])
    model = sys.argv[3] if len(sys.argv) == 4 else "smollm2"
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=60)
    texts, chunks = [], []
    for i in range(count):
        text, content_chunks = "", 0
        with client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Count to {i % 5 + 2}."}],
            stream=True,
            temperature=0,
            seed=1,
            max_tokens=8,
        ) as stream:
            for chunk in stream:
                delta = chunk.choices[0].delta.content if chunk.choices else None
                if delta:
                    text += delta
                    content_chunks += 1
        texts.append(text)
        chunks.append(content_chunks)
    print(json.dumps({"streams": count, "texts": texts, "content_chunks": chunks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
