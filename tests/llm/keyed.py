#!/usr/bin/env python3
"""Drives Wattbar's proxy with the official Python `openai` client, carrying a proxy key as its
API key (`Authorization: Bearer wb_...`), as an agent configured with one does.

Usage: keyed.py <scenario> <base url without /v1> <key> [args...]
  burst N MAX_TOKENS   N non-streamed chats at once (N threads); one JSON line:
                       {"answers": [{"status", "id", "headers", "error", "completion_tokens"}]}
  stream CLIENT        one streamed chat, naming CLIENT in X-Wattbar-Client, its raw lines read
                       through the client's streaming response; its `: energy` and `: cost`
                       lines read as the agents' parsers read them (trim, read the JSON past the
                       prefix, `energy_joules || 0`): {"id", "joules", "energy", "cost", "text"}
  chat CLIENT MAX_TOKENS  one non-streamed chat naming CLIENT: {"status", "id", "headers",
                       "completion_tokens", "error"}
Installed beside the model server (scripts/llm-server python), whose virtual environment pins
the client.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import openai

HEADERS = [
    "x-wattbar-request-id",
    "x-wattbar-clamped",
    "x-wattbar-energy",
    "x-wattbar-cost",
    "retry-after",
    "ratelimit-policy",
    "ratelimit",
]


def client(base, key):
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=120)


def chat(c, name, max_tokens, prompt="Count to 3."):
    """One non-streamed chat; what came back, refused or not."""
    try:
        raw = c.chat.completions.with_raw_response.create(
            model="smollm2",
            messages=[{"role": "user", "content": prompt}],
            temperature=0,
            seed=1,
            max_tokens=max_tokens,
            extra_headers={"X-Wattbar-Client": name} if name else None,
        )
        body = raw.parse()
        return {
            "status": raw.status_code,
            "id": raw.headers.get("x-wattbar-request-id"),
            "headers": {h: raw.headers.get(h) for h in HEADERS},
            "completion_tokens": body.usage.completion_tokens if body.usage else None,
            "error": None,
        }
    except openai.APIStatusError as e:
        return {
            "status": e.status_code,
            "id": e.response.headers.get("x-wattbar-request-id"),
            "headers": {h: e.response.headers.get(h) for h in HEADERS},
            "completion_tokens": None,
            "error": e.body,
        }


def stream(c, name):
    energy, cost, joules, text = None, None, 0.0, ""
    with c.chat.completions.with_streaming_response.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Count to 4."}],
        stream=True,
        temperature=0,
        seed=1,
        max_tokens=8,
        extra_headers={"X-Wattbar-Client": name},
    ) as response:
        rid = response.headers.get("x-wattbar-request-id")
        for line in response.iter_lines():
            trimmed = line.strip()
            if trimmed.startswith(": energy "):
                energy = json.loads(trimmed[9:])
                joules += energy.get("energy_joules") or 0
            elif trimmed.startswith(": cost "):
                cost = json.loads(trimmed[7:])
            elif trimmed.startswith("data: ") and trimmed != "data: [DONE]":
                chunk = json.loads(trimmed[6:])
                for choice in chunk.get("choices") or []:
                    text += (choice.get("delta") or {}).get("content") or ""
    return {"id": rid, "joules": joules, "energy": energy, "cost": cost, "text": text}


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    scenario, base, key, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    c = client(base, key)
    if scenario == "burst":
        n, max_tokens = int(rest[0]), int(rest[1])
        with ThreadPoolExecutor(max_workers=n) as pool:
            answers = list(pool.map(lambda _: chat(c, None, max_tokens), range(n)))
        print(json.dumps({"answers": answers}))
    elif scenario == "stream":
        print(json.dumps(stream(c, rest[0])))
    elif scenario == "chat":
        print(json.dumps(chat(c, rest[0], int(rest[1]))))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
