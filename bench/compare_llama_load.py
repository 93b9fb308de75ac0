#!/usr/bin/env python3
"""statebank serve and llama.cpp's llama-server (-np 8) under the same load, in one run.

Run through bench/compare_llama_load.sh, which builds both. The workload is
phase 1 of `statebank bench load` (bench/load_workload.h), sent over HTTP to
each server in turn on the same weights (the generated checkpoint and its
BF16 GGUF, bench/compare_llama.py's same_weights): for each client count c,
c client threads each send REQUESTS requests one after another to
/v1/completions, a distinct prompt of PROMPT random token ids and
DECODE greedy tokens, streamed. Reported per server and client count:
  - decode tokens/s: the tokens after each request's first over the time
    some request was decoding (the union of every request's span from its
    first streamed event to its last), measured alike on both servers from
    the client's side, and its ratio to one client; it leaves out the time
    when every client waits for a first token (a prompt's prefill) or is
    between requests. The engine's own decode-only-step rate (`statebank
    bench load`) needs the server's inside view, which llama-server lacks;
  - wall tokens/s: every completion token (the usage the server returns)
    over the phase's wall time, prefill included;
  - time to first token p50/p99: from sending the request to its first
    streamed event (queueing, prefill and the first token);
  - inter-token latency p50/p99, per request: (last event - first event) /
    (tokens - 1). Per request, not per event, because a server may hold a
    token back until its text is valid UTF-8, which random ids often aren't.
statebank serves with its defaults (--max-running 8, --batch-tokens 512) and
no SSD tier; llama-server with -np 8 (8 slots, continuous batching) and a
context of 8 x 512. Both run THREADS threads; run it on a quiet machine.
With --out DIR it writes DIR/load-llama.md and DIR/load-llama.csv.
"""
from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_llama import ROOT, cpu_name, die, same_weights  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
from server_process import NotServing, free_port, serving  # noqa: E402


def one_request(port: int, body: dict) -> tuple[float, list[float], int]:
    """Sends one streamed completion; returns (start, event times, completion tokens)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.monotonic()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        die(f"HTTP {r.status}: {r.read()[:300]!r}")
    events, tokens = [], 0
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            tokens = int(chunk["usage"].get("completion_tokens", 0))
        if chunk.get("choices"):
            events.append(time.monotonic())
    c.close()
    return start, events, tokens


def union_seconds(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the [start, end] spans."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    i = max(1, int(-(-q * len(v) // 1))) - 1  # nearest rank, as bench/load_workload.cpp
    return v[min(i, len(v) - 1)]


def run_clients(port: int, clients: int, a, extra: dict) -> dict:
    results, errors = [], []
    lock = threading.Lock()

    def client(c: int):
        rng = random.Random(a.seed * 1000003 + clients * 101 + c)
        for _ in range(a.requests):
            prompt = [rng.randrange(0, a.vocab) for _ in range(a.prompt_tokens)]
            body = {"prompt": prompt, "max_tokens": a.decode_tokens, "temperature": 0, "stream": True,
                    "stream_options": {"include_usage": True}, **extra}
            try:
                res = one_request(port, body)
            except Exception as e:  # noqa: BLE001 - reported below
                with lock:
                    errors.append(repr(e))
                return
            with lock:
                results.append(res)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if errors:
        die(f"{clients} clients: {errors[0]}")
    tokens = sum(n for _, _, n in results)
    decoding = [(ev[0], ev[-1]) for _, ev, n in results if len(ev) > 1 and n > 1]
    decode_tokens = sum(n - 1 for _, ev, n in results if len(ev) > 1 and n > 1)
    decode_s = union_seconds(decoding)
    if decode_s <= 0:
        die(f"{clients} clients: no request streamed two events, so no decode time to measure")
    ttft = [ev[0] - start for start, ev, _ in results if ev]
    itl = [(ev[-1] - ev[0]) / (n - 1) for _, ev, n in results if len(ev) > 1 and n > 1]
    ms = 1000.0
    return {"clients": clients, "tokens": tokens, "wall_s": wall, "wall_tokens_per_s": tokens / wall,
            "decode_tokens": decode_tokens, "decode_s": decode_s, "tokens_per_s": decode_tokens / decode_s,
            "ttft_p50_ms": percentile(ttft, 0.5) * ms, "ttft_p99_ms": percentile(ttft, 0.99) * ms,
            "itl_p50_ms": percentile(itl, 0.5) * ms, "itl_p99_ms": percentile(itl, 0.99) * ms}


def measure(name: str, cmd: list[str], port: int, a, extra: dict) -> list[dict]:
    try:
        with serving(cmd, port, name):
            return measure_served(name, port, a, extra)
    except NotServing as e:
        die(str(e))


def measure_served(name: str, port: int, a, extra: dict) -> list[dict]:
    # Warm-up, with prompts of another seed: a server's prompt cache must
    # not serve the measured ones.
    run_clients(port, 1, argparse.Namespace(**{**vars(a), "requests": 1, "decode_tokens": 2, "seed": a.seed + 7919}),
                extra)
    rows = []
    for c in a.clients:
        row = run_clients(port, c, a, extra)
        print(f"compare_llama_load: {name}, {c} clients: {row['tokens_per_s']:.2f} decode tokens/s "
              f"({row['wall_tokens_per_s']:.2f} over the wall time), "
              f"TTFT p50 {row['ttft_p50_ms']:.0f} ms, ITL p50 {row['itl_p50_ms']:.0f} ms", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description="statebank serve vs llama-server -np 8 under the same load")
    ap.add_argument("--llama-bin", required=True, help="llama.cpp's build/bin")
    ap.add_argument("--statebank", default=os.path.join(ROOT, "build/release/statebank"))
    ap.add_argument("--work", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                   "statebank", "compare"))
    ap.add_argument("--arch", default="qwen3_5")
    ap.add_argument("--preset", default="0.8b")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--decode-tokens", type=int, default=48)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=151643, help="prompt ids are drawn below this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="", help="write load-llama.md and load-llama.csv here (e.g. docs/bench)")
    a = ap.parse_args()
    try:
        a.clients = [int(c) for c in a.clients.split(",")]
    except ValueError:
        die(f"--clients takes a comma-separated list of integers, not '{a.clients}'")
    if not a.clients or min(a.clients) < 1 or min(a.threads, a.prompt_tokens, a.decode_tokens, a.requests) < 1:
        die("--clients, --threads, --prompt-tokens, --decode-tokens and --requests must be at least 1")
    t_start = time.monotonic()
    load_before = os.getloadavg()
    ckpt, bf16, _ = same_weights(a.statebank, a.llama_bin, a.work, a.arch, a.preset)

    port = free_port()
    ours = measure("statebank", [a.statebank, "serve", "--model", ckpt, "--port", str(port), "--threads",
                                 str(a.threads), "--ssd", "off"], port, a, {})
    port = free_port()
    slots = max(8, max(a.clients))
    theirs = measure("llama.cpp", [os.path.join(a.llama_bin, "llama-server"), "-m", bf16, "--port", str(port),
                                   "-np", str(slots), "-c", str(slots * 512), "-t", str(a.threads), "-tb",
                                   str(a.threads)], port, a, {"ignore_eos": True})
    load_after = os.getloadavg()

    one = {"statebank": ours[0]["tokens_per_s"], "llama.cpp": theirs[0]["tokens_per_s"]}
    lines = ["| clients | statebank decode t/s | vs 1 | llama.cpp -np %d decode t/s | vs 1 | statebank / llama.cpp | "
             "wall t/s (statebank / llama.cpp) | TTFT p50 (statebank / llama.cpp) | "
             "ITL p50 (statebank / llama.cpp) |" % slots,
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    csv = ["server,clients,tokens,wall_s,wall_tokens_per_s,decode_tokens,decode_s,decode_tokens_per_s,"
           "ttft_p50_ms,ttft_p99_ms,itl_p50_ms,itl_p99_ms"]
    for o, t in zip(ours, theirs):
        lines.append(f"| {o['clients']} | {o['tokens_per_s']:.2f} | {o['tokens_per_s'] / one['statebank']:.2f}x | "
                     f"{t['tokens_per_s']:.2f} | {t['tokens_per_s'] / one['llama.cpp']:.2f}x | "
                     f"**{o['tokens_per_s'] / t['tokens_per_s']:.2f}x** | "
                     f"{o['wall_tokens_per_s']:.2f} / {t['wall_tokens_per_s']:.2f} | "
                     f"{o['ttft_p50_ms']:.0f} / {t['ttft_p50_ms']:.0f} ms | "
                     f"{o['itl_p50_ms']:.0f} / {t['itl_p50_ms']:.0f} ms |")
    for name, rows in (("statebank", ours), ("llama.cpp", theirs)):
        for r in rows:
            csv.append(f"{name},{r['clients']},{r['tokens']},{r['wall_s']:.3f},{r['wall_tokens_per_s']:.3f},"
                       f"{r['decode_tokens']},{r['decode_s']:.3f},{r['tokens_per_s']:.3f},"
                       f"{r['ttft_p50_ms']:.1f},{r['ttft_p99_ms']:.1f},{r['itl_p50_ms']:.1f},{r['itl_p99_ms']:.1f}")
    table = "\n".join(lines)
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "load-llama.csv"), "w") as f:
            f.write("\n".join(csv) + "\n")
        shown = sys.argv[1:]
        if "--llama-bin" in shown:  # the wrapper's own argument
            at = shown.index("--llama-bin")
            del shown[at:at + 2]
        command = " ".join(["bench/compare_llama_load.sh"] + shown)
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        with open(os.path.join(a.out, "load-llama.md"), "w") as f:
            f.write(
                f"# Load over HTTP: statebank serve and llama.cpp's server side by side\n\n"
                f"Made by `{command}` on {when}, {cpu_name()}, {os.cpu_count()} cores, "
                f"{a.threads} threads for each server; load average {load_before[0]:.2f} before, "
                f"{load_after[0]:.2f} after; {time.monotonic() - t_start:.0f} s in all.\n\n"
                f"Same weights: `statebank gen-model --arch {a.arch} --preset {a.preset} --dtype bf16` and its BF16 "
                f"GGUF (bench/compare_llama.py). Same workload (phase 1 of `statebank bench load`): each client sends "
                f"{a.requests} requests one after another to `/v1/completions`, a distinct prompt of "
                f"{a.prompt_tokens} random token ids and {a.decode_tokens} greedy tokens, streamed. statebank: "
                f"`serve --ssd off` with its defaults (--max-running 8, --batch-tokens 512); llama.cpp v0.5.0: "
                f"`llama-server -np {slots} -c {slots * 512}`. Decode tokens/s = the tokens after each request's "
                f"first over the time some request was decoding (the union of the requests' spans from first to "
                f"last streamed event), measured alike on both servers from the client; wall t/s = every "
                f"completion token over the phase's wall time, prefill included; TTFT from sending to the first streamed event; ITL per request = "
                f"(last event - first event) / (tokens - 1).\n\n{table}\n\n"
                f"Every figure, p99 included: [load-llama.csv](load-llama.csv). The in-process view of the same "
                f"engine, with the long-prefill phase: [load.md](load.md).\n")
        print(f"compare_llama_load: wrote {a.out}/load-llama.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
