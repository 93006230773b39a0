#!/usr/bin/env python3
"""Serving benchmark for machines without node (the GPU machine): streamed /v1/completions requests
at several concurrencies against a running OpenAI-compatible server, reporting mean / p50 / p99
time to first token, time per output token after the first (mean / p50 / p99), output tokens per
second and requests per second. Same measurement as tests/js/bench_serve.mjs (which uses the
official openai client); standard library only. Each level keeps `concurrency` requests in flight
until `requests-per-level` have run (0: `waves` times the concurrency, at least `min-requests`).

usage: tools/bench_serve.py [--base-url http://127.0.0.1:8000/v1] [--concurrency 1,8,64,256]
                            [--requests-per-level 0] [--waves 2] [--min-requests 16]
                            [--max-tokens 128] [--prompt-words 256]
                            [--temperature 0] [--top-p 1]
                            [--guided none|simple|strings] [--reasoning-tokens 16]
  the common 1k-in / 1k-out shape: --prompt-words 1000 --max-tokens 1024
  --guided: streamed /v1/chat/completions with a strict json_schema response_format instead (the
  reasoning closed after --reasoning-tokens by max_reasoning_tokens); every answer is parsed and
  checked against the schema's required keys, and the level's row ends with the count of valid
  answers. `--guided none` sends the same chat requests without the schema (the baseline).
"""
import argparse
import concurrent.futures
import http.client
import json
import statistics
import time
import urllib.parse

# simple: no length-bounded strings (masks from the cache); strings: maxLength strings (computed per step).
SCHEMAS = {
    "simple": {"type": "object", "additionalProperties": False, "required": ["ok", "count", "color", "ids"],
               "properties": {"ok": {"type": "boolean"}, "count": {"type": "integer", "minimum": 0, "maximum": 999},
                              "color": {"enum": ["red", "green", "blue"]},
                              "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99},
                                      "maxItems": 4}}},
    "strings": {"type": "object", "additionalProperties": False, "required": ["name", "city"],
                "properties": {"name": {"type": "string", "maxLength": 24}, "city": {"type": "string", "maxLength": 24}}},
}

WORDS = ["alpha", "river", "stone", "light", "market", "engine", "cloud", "garden", "signal", "paper"]


def prompt(i, n):
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def connect(base):
    u = urllib.parse.urlparse(base)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=3600), u.path.rstrip("/")


def one(args, model, i):
    conn, path = connect(args.base_url)
    chat = args.guided is not None
    body = {"model": model, "max_tokens": args.max_tokens, "stream": True, "temperature": args.temperature,
            "top_p": args.top_p, "seed": i, "stream_options": {"include_usage": True}, "ignore_eos": True}
    if not chat:
        body["prompt"] = prompt(i, args.prompt_words)
    else:
        body["messages"] = [{"role": "user", "content": prompt(i, args.prompt_words)}]
        body["max_reasoning_tokens"] = args.reasoning_tokens
        if args.guided != "none":  # the schema's end ends the answer
            del body["ignore_eos"]
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "out", "strict": True, "schema": SCHEMAS[args.guided]}}
    t0 = time.perf_counter()
    conn.request("POST", f"{path}/chat/completions" if chat else f"{path}/completions", json.dumps(body),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    first = last = None
    tokens = 0
    content = []
    while True:
        raw = r.readline()
        if not raw:
            break
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        if not chunk.get("choices"):
            continue
        c = chunk["choices"][0]
        piece = c.get("text") if not chat else (c.get("delta") or {}).get("content")
        thought = chat and (c.get("delta") or {}).get("reasoning_content")
        if piece or thought:
            now = time.perf_counter()
            first = first or now
            last = now
        if piece and chat:
            content.append(piece)
    conn.close()
    ttft = (first or time.perf_counter()) - t0
    tpot = (last - first) / (tokens - 1) if first and tokens > 1 else 0.0
    valid = 0
    if chat and args.guided != "none":
        try:
            obj = json.loads("".join(content))
            valid = int(isinstance(obj, dict) and all(k in obj for k in SCHEMAS[args.guided]["required"]))
        except ValueError:
            valid = 0
    return ttft, tpot, tokens, valid


def level(args, model, concurrency):
    n = args.requests_per_level or max(args.min_requests, int(args.waves * concurrency))
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda i: one(args, model, i), range(n)))
    wall = time.perf_counter() - t0
    ttft = sorted(r[0] for r in results)
    tpot = sorted(r[1] for r in results)
    q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))]
    return (f"| {concurrency} | {len(results)} | {statistics.mean(ttft) * 1e3:.1f} | {q(ttft, 0.5) * 1e3:.1f} | "
            f"{q(ttft, 0.99) * 1e3:.1f} | {statistics.mean(tpot) * 1e3:.2f} | {q(tpot, 0.5) * 1e3:.2f} | "
            f"{q(tpot, 0.99) * 1e3:.2f} | {sum(r[2] for r in results) / wall:.1f} | {len(results) / wall:.2f} |"
            + (f" {sum(r[3] for r in results)}/{len(results)} |" if args.guided not in (None, "none") else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--concurrency", default="1,8,64,256")
    ap.add_argument("--requests-per-level", type=int, default=0)
    ap.add_argument("--waves", type=float, default=2.0)
    ap.add_argument("--min-requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-words", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--guided", choices=["none", *SCHEMAS], default=None)
    ap.add_argument("--reasoning-tokens", type=int, default=16)
    args = ap.parse_args()
    conn, path = connect(args.base_url)
    conn.request("GET", f"{path}/models")
    model = json.loads(conn.getresponse().read())["data"][0]["id"]
    print(f"model {model}, prompt {args.prompt_words} words, {args.max_tokens} output tokens, "
          f"temperature {args.temperature}, top_p {args.top_p}\n")
    guided = args.guided not in (None, "none")
    if args.guided is not None:
        print(f"chat completions, reasoning closed after {args.reasoning_tokens} tokens, schema: {args.guided}\n")
    print("| concurrency | requests | TTFT mean ms | TTFT p50 | TTFT p99 | TPOT mean ms | TPOT p50 | TPOT p99 | "
          "output tok/s | req/s |" + (" valid JSON |" if guided else ""))
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + ("--:|" if guided else ""))
    for c in (int(x) for x in args.concurrency.split(",")):
        print(level(args, model, c), flush=True)


if __name__ == "__main__":
    main()
