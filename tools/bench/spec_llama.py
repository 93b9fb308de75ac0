#!/usr/bin/env python3
"""llama.cpp's n-gram decoding on `statebank bench spec`'s workload and weights.

Called by `statebank bench spec` (bench/spec_command.cpp), which passes the
bench's checkpoint and a JSON file {"prompt": [token ids], "n_predict": N,
"logit_bias": [[id, bias], ...]}.
The checkpoint is converted once to a BF16 GGUF (tools/gguf/convert.py, the
converter bench/compare_llama.py uses; cached beside it in --work), then
llama-server runs twice on it with --threads T: plain, and with
--spec-type ngram-simple (lookup n-gram --size-n, drafts of up to --draft-max
tokens). Each sends the prompt as token ids to /completion, greedy, no
prompt cache, --reps times, and keeps the best decode rate (the response's
timings.predicted_per_second) and the draft counts of that run
(timings.draft_n, draft_n_accepted). Prints one JSON object on stdout.
Exit code 3 with a reason on stderr when llama.cpp or numpy is absent.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import free_port, serving  # noqa: E402


def skip(why: str):
    print(why, file=sys.stderr)
    sys.exit(3)


def post(port: int, path: str, body: dict, timeout: float = 1800) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def gguf_of(checkpoint: str, work: str, llama_dir: str) -> str:
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, os.path.basename(os.path.normpath(checkpoint)) + ".bf16.gguf")
    if not os.path.exists(out):
        tmp = out + ".part"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(llama_dir, "gguf-py") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/gguf/convert.py"), "--outtype", "bf16", checkpoint,
                        tmp], check=True, stdout=subprocess.DEVNULL, env=env)
        os.replace(tmp, out)
    return out


def run_server(a, gguf: str, spec: list[str], workload: dict) -> dict:
    port = free_port()
    cmd = [os.path.join(a.llama_bin, "llama-server"), "-m", gguf, "--port", str(port), "--threads", str(a.threads),
           "-np", "1", "-c", str(len(workload["prompt"]) + workload["n_predict"] + 64)] + spec
    with serving(cmd, port, "llama-server"):
        body = {"prompt": workload["prompt"], "n_predict": workload["n_predict"], "temperature": 0, "top_k": 1,
                "cache_prompt": False, "ignore_eos": True, "stream": False,
                "logit_bias": workload.get("logit_bias", [])}
        post(port, "/completion", {**body, "n_predict": 2})  # warm-up
        best = None
        for _ in range(a.reps):
            t = post(port, "/completion", body).get("timings", {})
            if best is None or t.get("predicted_per_second", 0) > best.get("predicted_per_second", 0):
                best = t
        return best or {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--workload", required=True, help='JSON file {"prompt": [ids], "n_predict": N}')
    ap.add_argument("--work", required=True, help="where the GGUF is cached")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--draft-max", type=int, default=4)
    # 1: on a loop of one token a longer lookup never drafts (ngram-simple stops
    # at the latest match, which has fewer than n tokens after it).
    ap.add_argument("--size-n", type=int, default=1)
    a = ap.parse_args()
    if not os.access(os.path.join(a.llama_bin, "llama-server"), os.X_OK):
        skip(f"llama.cpp not built ({a.llama_bin}/llama-server is missing; tools/llama/build_llama.sh builds it)")
    try:
        import numpy  # noqa: F401  (the GGUF converter needs it)
    except ImportError:
        skip("the GGUF converter needs numpy (apt-get install python3-numpy)")
    with open(a.workload) as f:
        workload = json.load(f)
    # The converter writes with llama.cpp's own gguf-py: build/bin's tree.
    gguf = gguf_of(a.checkpoint, a.work, os.path.dirname(os.path.dirname(os.path.normpath(a.llama_bin))))
    plain = run_server(a, gguf, [], workload)
    spec = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.size_n), "--spec-ngram-simple-size-m",
            str(a.draft_max), "--spec-draft-n-max", str(a.draft_max)]
    ngram = run_server(a, gguf, spec, workload)
    print(json.dumps({"plain_tokens_per_s": plain.get("predicted_per_second", 0.0),
                      "tokens_per_s": ngram.get("predicted_per_second", 0.0),
                      "drafted": ngram.get("draft_n", 0), "accepted": ngram.get("draft_n_accepted", 0),
                      "flags": " ".join(spec)}))


if __name__ == "__main__":
    main()
