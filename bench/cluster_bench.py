#!/usr/bin/env python3
"""bench cluster: N replicas behind HAProxy on a Redis Cluster, affinity vs round robin.

Starts the recipe of docs/deploy.md (deploy/local-cluster.sh) once per mode and
runs the same agent workload through the proxy: USERS simulated users, each a
conversation that grows turn by turn on a shared system prompt (a tool-using
agent's history: the previous prompt, its reply, a new message). With
affinity every request carries the conversation's key (OpenAI `user`); with
round robin none does. Midway one replica is killed (SIGKILL). Per mode it
reports the share of prompt tokens served from the bank, time to first token
p50/p99 (streamed, to the first content chunk), generated tokens per second,
and where restores came from (ram / remote / cold), before and after the kill.
Also the restore throughput from the cluster: bytes read from the remote tier
over the time those lookups and restores took (`restore.lookup_ms + restore.restore_ms`).

usage: bench/cluster_bench.py --model DIR [--replicas 3] [--users 6] [--turns 6]
                              [--report docs/bench/cluster.md] [--base-port 7400]
Numbers depend on the machine and its load; the report says which machine ran it.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post_stream(port, body):
    """Streams one completion; (ttft seconds, completion tokens, usage, restore)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    start = time.monotonic()
    ttft, usage, restore, tokens = None, {}, {}, 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for c in chunk.get("choices", []):
                if c.get("text") and ttft is None:
                    ttft = time.monotonic() - start
                tokens += 1 if c.get("text") is not None else 0
            usage = chunk.get("usage") or usage
            restore = chunk.get("restore") or restore
    return (ttft if ttft is not None else time.monotonic() - start), usage.get("completion_tokens", tokens), usage, restore


def words(seed, n):
    vocab = ["plan", "tool", "call", "result", "file", "edit", "test", "pass", "fail", "read", "write", "patch",
             "diff", "build", "error", "fix", "step", "next", "done", "check"]
    return " ".join(vocab[(seed * 7 + i * 13 + (i * i) % 11) % len(vocab)] for i in range(n))


def run_mode(args, affinity, model):
    workdir = tempfile.mkdtemp(prefix="sb_bench_cluster_")
    base = args.base_port + (0 if affinity else 40)
    start = subprocess.run([os.path.join(ROOT, "deploy/local-cluster.sh"), "start", workdir, "--replicas",
                            str(args.replicas), "--model", model, "--base-port", str(base), "--",
                            "--block-tokens", "64", "--snapshot-every", "128", "--threads", "1"],
                           env=dict(os.environ, STATEBANK=args.statebank), capture_output=True, text=True)
    if start.returncode != 0:
        raise SystemExit(f"local-cluster start failed: {start.stderr}{start.stdout}")
    pids = dict(line.split() for line in open(os.path.join(workdir, "pids")))
    proxy = base + 9
    system = words(0, args.system_words)
    records, lock = [], threading.Lock()
    killed_at = [None]
    failed = [0]

    def user(u):
        history = system
        for t in range(args.turns):
            history += " user: " + words(u * 100 + t, args.message_words)
            body = {"prompt": history, "max_tokens": args.reply_tokens, "temperature": 0}
            if affinity:
                body["user"] = f"user-{u}"
            t0 = time.monotonic()
            try:
                ttft, n, usage, restore = post_stream(proxy, body)
            except OSError:  # running on the replica that was killed: lost, and the user asks again
                with lock:
                    failed[0] += 1
                ttft, n, usage, restore = post_stream(proxy, body)
            with lock:
                records.append({"t": t0, "ttft": ttft, "tokens": n, "prompt": usage.get("prompt_tokens", 0),
                                "cached": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
                                "mode": restore.get("mode", "?"), "restore_ms": restore.get("lookup_ms", 0.0) + restore.get("restore_ms", 0.0),
                                "remote_bytes": ((restore.get("tiers") or {}).get("remote") or {}).get("bytes", 0),
                                "after_kill": killed_at[0] is not None,
                                "wall": time.monotonic() - t0})
            history += " assistant: " + words(u * 100 + t + 50, args.reply_tokens)

    started = time.monotonic()
    threads = [threading.Thread(target=user, args=(u,)) for u in range(args.users)]
    for th in threads:
        th.start()
    # Kill a replica once about half the turns are done.
    total = args.users * args.turns
    while True:
        with lock:
            done = len(records)
        if done >= total // 2 or not any(th.is_alive() for th in threads):
            break
        time.sleep(0.05)
    os.kill(int(pids["replica1"]), signal.SIGKILL)
    killed_at[0] = time.monotonic()
    for th in threads:
        th.join()
    wall = time.monotonic() - started
    subprocess.run([os.path.join(ROOT, "deploy/local-cluster.sh"), "stop", workdir], capture_output=True)
    out = summarize(records, wall)
    out["lost_running_requests"] = failed[0]
    return out


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def summarize(records, wall):
    def part(rs):
        prompt = sum(r["prompt"] for r in rs)
        modes = {}
        for r in rs:
            modes[r["mode"]] = modes.get(r["mode"], 0) + 1
        return {"requests": len(rs), "bank_share": sum(r["cached"] for r in rs) / prompt if prompt else 0.0,
                "ttft_p50_ms": pct([r["ttft"] for r in rs], 50) * 1000,
                "ttft_p99_ms": pct([r["ttft"] for r in rs], 99) * 1000, "modes": modes}
    remote = [r for r in records if r["remote_bytes"] > 0 and r["restore_ms"] > 0]
    out = {"all": part(records), "before_kill": part([r for r in records if not r["after_kill"]]),
           "after_kill": part([r for r in records if r["after_kill"]]),
           "tokens_per_s": sum(r["tokens"] for r in records) / wall, "wall_s": wall,
           "remote_restore_mb_s": (sum(r["remote_bytes"] for r in remote) / 1e6) / (sum(r["restore_ms"] for r in remote) / 1e3)
           if remote else float("nan"), "remote_restores": len(remote)}
    return out


def report(args, results, path):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = platform.processor() or platform.machine()
    lines = [
        "# bench cluster: affinity vs round robin behind HAProxy",
        "",
        f"Generated by `bench/cluster_bench.py` on {when} ({cpu}, {os.cpu_count()} cores, shared with other jobs:"
        " the numbers are noisy), model `{}`. Reproduce with:".format(args.model_name),
        "",
        "```sh",
        f"bench/cluster_bench.py --model DIR --replicas {args.replicas} --users {args.users} --turns {args.turns}"
        f" --reply-tokens {args.reply_tokens} --system-words {args.system_words} --message-words {args.message_words}"
        f" --report {path}",
        "```",
        "",
        f"Setup: deploy/local-cluster.sh (a Redis Cluster of 3 masters and 3 replicas, {args.replicas} statebank"
        f" replicas with `--block-tokens 64 --snapshot-every 128 --threads 1`, HAProxy with deploy/haproxy.cfg)."
        f" {args.users} simulated users, each one conversation of {args.turns} turns on a shared {args.system_words}-word system"
        f" prompt, every turn adding a {args.message_words}-word message (a tool result) to the whole history and asking for {args.reply_tokens}"
        " tokens (greedy, streamed). Affinity: every request carries `user`; round robin: none does. Replica 1 is"
        " killed (SIGKILL) when half the turns are done.",
        "",
        "| measure | affinity | round robin |",
        "| --- | --- | --- |",
    ]
    a, r = results["affinity"], results["round robin"]

    def row(name, fa, fr):
        lines.append(f"| {name} | {fa} | {fr} |")
    row("share of prompt tokens from the bank", f"{a['all']['bank_share']:.1%}", f"{r['all']['bank_share']:.1%}")
    row("  before the kill", f"{a['before_kill']['bank_share']:.1%}", f"{r['before_kill']['bank_share']:.1%}")
    row("  after the kill", f"{a['after_kill']['bank_share']:.1%}", f"{r['after_kill']['bank_share']:.1%}")
    row("TTFT p50 (ms)", f"{a['all']['ttft_p50_ms']:.0f}", f"{r['all']['ttft_p50_ms']:.0f}")
    row("TTFT p99 (ms)", f"{a['all']['ttft_p99_ms']:.0f}", f"{r['all']['ttft_p99_ms']:.0f}")
    row("generated tokens per second (all users)", f"{a['tokens_per_s']:.1f}", f"{r['tokens_per_s']:.1f}")
    row("restores by mode", json.dumps(a["all"]["modes"]), json.dumps(r["all"]["modes"]))
    row("  after the kill", json.dumps(a["after_kill"]["modes"]), json.dumps(r["after_kill"]["modes"]))
    row("restore throughput from the cluster: remote bytes / (lookup + restore time) (MB/s, restores)",
        f"{a['remote_restore_mb_s']:.1f} ({a['remote_restores']})", f"{r['remote_restore_mb_s']:.1f} ({r['remote_restores']})")
    row("requests lost while running on the killed replica (asked again)", a["lost_running_requests"],
        r["lost_running_requests"])
    row("wall time (s)", f"{a['wall_s']:.1f}", f"{r['wall_s']:.1f}")
    lines += ["", "Raw results:", "", "```json", json.dumps(results, indent=1), "```", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--users", type=int, default=6)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--reply-tokens", type=int, default=8)
    p.add_argument("--system-words", type=int, default=300)
    p.add_argument("--message-words", type=int, default=20)
    p.add_argument("--base-port", type=int, default=7400)
    p.add_argument("--report", default=os.path.join(ROOT, "docs/bench/cluster.md"))
    p.add_argument("--statebank", default=os.path.join(ROOT, "build/release/statebank"))
    args = p.parse_args()
    args.model_name = os.path.basename(os.path.normpath(args.model))
    results = {"affinity": run_mode(args, True, args.model), "round robin": run_mode(args, False, args.model)}
    report(args, results, args.report)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
