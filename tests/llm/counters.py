#!/usr/bin/env python3
"""Chats with a real OpenAI-compatible server straight at its port, with the official Python
`openai` client, as an SDK user who never heard of Wattbar does; sums what the server told the
client it used.

Usage: counters.py <base url without /v1> <requests> <concurrency> [<stop file>]
  Runs <requests> chats (not streamed; temperature 0, 24 tokens at most, prompts that differ) on
  <concurrency> threads. With <stop file>, each thread instead keeps asking until that file
  exists (at least one chat each). Prints one JSON line:
  {"requests": n, "prompt_tokens": sum, "completion_tokens": sum} of the `usage` fields.
  Exits 1 with the error on stderr when a request fails.
"""

import json
import os
import sys
import threading

import openai


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    base, requests, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stop = sys.argv[4] if len(sys.argv) == 5 else None
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=120)
    lock = threading.Lock()
    sums = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
    errors = []
    turn = iter(range(10**9))

    busy = [0]

    def more(asked: int) -> bool:
        # Called with `lock` held.
        if stop is not None:
            return asked == 0 or not os.path.exists(stop)
        return sums["requests"] + len(errors) + busy[0] < requests

    def worker() -> None:
        asked = 0
        while True:
            with lock:
                if not more(asked):
                    return
                i = next(turn)
                busy[0] += 1
            try:
                answer = client.chat.completions.create(
                    model="smollm2",
                    messages=[{"role": "user", "content": f"Name {i % 7 + 2} colours, number {i}."}],
                    temperature=0,
                    max_tokens=24,
                )
                with lock:
                    sums["requests"] += 1
                    sums["prompt_tokens"] += answer.usage.prompt_tokens
                    sums["completion_tokens"] += answer.usage.completion_tokens
            except Exception as e:  # noqa: BLE001 - any failure is reported whole
                with lock:
                    errors.append(repr(e))
                return
            finally:
                with lock:
                    busy[0] -= 1
            asked += 1

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print(json.dumps(sums))
    return 0


if __name__ == "__main__":
    sys.exit(main())
