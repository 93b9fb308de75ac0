#!/usr/bin/env python3
"""The MTP head cross-check: statebank's head (Model::mtp_forward, through
tests/model/mtp_logits) against llama.cpp's nextn block driven as its
draft-mtp drives it (tools/xcheck/llama_mtp), on the same F32 GGUF file.
docs/xcheck.md ("MTP head") explains it; run it through tools/xcheck/run_mtp.sh.

For qwen3_next, qwen3_5 and qwen3_5_moe the tiny preset is generated with
`--mtp-layers 1` in f32 and converted (tools/gguf/convert.py, which writes the
head as llama.cpp's nextn block). Both programs decode the prompt greedily
for STEPS tokens and, before each, draft DEPTH tokens with the head (the
protocol: tests/model/mtp_logits.cpp), writing every draft row's logits over
the whole vocabulary. Each prompt runs twice: with the head's keys and values
holding every prompt position's pair (h_{j-1}, t_j) as llama.cpp's draft-mtp
feeds them ("prompt rows"), and holding only the pairs drafted from ("no
prompt rows").

  rel err  max over the draft rows of max|a - b| / max|b| (b: llama.cpp)
  drafts   draft tokens that agree, of those compared; where one does not,
           the gap between llama.cpp's two best logits there relative to the
           row's scale (the widest such gap; a tie inside the tolerance is noise)

A case passes when every compared row agrees within F32_TOL and every draft
token agrees, or differs only at a tie within F32_TOL. Rows after a target
token or a draft that differ are not compared (they condition on other
tokens). With --types q8_0,q4_k_m the same runs on the files `statebank
quantize` writes of the f32 checkpoint, for information (no rule: the two
round activations to int8 each in their own way, docs/xcheck.md
"Quantized GGUF files"), with the target's tokens given (the same random
continuation on both sides) instead of its greedy choices. Exit status: 0 every case passes, 1 some case fails, 2 usage or tool
failure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCHES = ["qwen3_next", "qwen3_5", "qwen3_5_moe"]
LENGTHS = [1, 2, 17, 64, 65, 257]
STEPS, DEPTH = 8, 3
F32_TOL = 1e-4
N_ORDINARY = 151643


def die(message: str):
    print(f"mtp_check: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd[:4])} ... failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return p.stdout


def random_ids(n: int) -> list[int]:
    return np.random.RandomState(2000 + n).randint(0, N_ORDINARY, size=n).tolist()


def side(tool: str, gguf: str, ids: list[int], prompt_rows: int, out: str, threads: int, target: list[int]):
    forced = ["--target-ids", ",".join(map(str, target))] if target else []
    text = run([tool, "--model", gguf, "--prompt-ids", ",".join(map(str, ids)), "--steps", str(STEPS), "--depth",
                str(DEPTH), "--prompt-rows", str(prompt_rows), "--threads", str(threads), "--logits-out", out] + forced)
    lines = text.strip().split("\n")
    target = [int(x) for x in lines[0].split(",")]
    drafts = [[int(x) for x in line.split(",")] for line in lines[1:]]
    logits = np.fromfile(out, dtype=np.float32)
    return target, drafts, logits.reshape(STEPS, DEPTH, -1)


def compare(sb, ll) -> dict:
    (t_sb, d_sb, l_sb), (t_ll, d_ll, l_ll) = sb, ll
    err, agree, gap, total = 0.0, 0, None, 0
    for s in range(STEPS):
        if t_sb[s] != t_ll[s]:
            break  # the drafts at step s start from the target's token s and the hidden rows before it
        for d in range(DEPTH):
            total += 1
            a, b = l_sb[s, d], l_ll[s, d]
            err = max(err, float(np.abs(a - b).max() / np.abs(b).max()))
            if d_sb[s][d] != d_ll[s][d]:
                top = np.sort(b)[-2:]
                gap = max(gap or 0.0, float((top[1] - top[0]) / np.abs(b).max()))
                break  # deeper rows condition on different drafts
            agree += 1
    ok = total > 0 and err <= F32_TOL and (agree == total or (gap is not None and gap <= F32_TOL))
    return {"err": err, "agree": agree, "total": total, "gap": gap, "ok": ok,
            "target_agree": sum(1 for x, y in zip(t_sb, t_ll) if x == y)}


def table(rows: list[tuple]) -> str:
    out = [f"**MTP head** (f32: tolerance {F32_TOL}; quantized: for information; {STEPS} steps, depth {DEPTH}):", "",
           "| arch | type | prompt | head's keys and values | rel err | drafts | target tokens |",
           "|---|---|---|---|---|---|---|"]
    for arch, qtype, n, mode, r in rows:
        drafts = f"{r['agree']}/{r['total']}" + (f" (gap {r['gap']:.0e})" if r["gap"] is not None else "")
        fail = "" if r["ok"] else " **FAIL**"
        out.append(f"| {arch} | {qtype} | {n} tokens | {mode} | {r['err']:.1e}{fail} | {drafts} | "
                   f"{r['target_agree']}/{STEPS} |")
    return "\n".join(out) + "\n"


def update_doc(path: str, text: str):
    begin, end = "<!-- xcheck-mtp:begin -->", "<!-- xcheck-mtp:end -->"
    doc = open(path).read()
    if begin not in doc or end not in doc:
        die(f"{path} has no {begin} ... {end} markers")
    head, rest = doc.split(begin, 1)
    open(path, "w").write(head + begin + "\n" + text + end + rest.split(end, 1)[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--statebank", default=os.path.join(ROOT, "build/release/statebank"))
    ap.add_argument("--mtp-logits", default=os.path.join(ROOT, "build/release/tests/model/mtp_logits"))
    ap.add_argument("--llama-mtp", required=True)
    ap.add_argument("--work", default="/tmp/sb-xcheck-mtp")
    ap.add_argument("--arch", action="append", choices=ARCHES)
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--types", default="f32", help="comma separated: f32, q8_0, q4_k_m")
    ap.add_argument("--update-doc")
    a = ap.parse_args()
    for tool in (a.statebank, a.mtp_logits, a.llama_mtp):
        if not os.access(tool, os.X_OK):
            die(f"{tool} is not built (tools/build.sh release statebank mtp_logits)")
    os.makedirs(a.work, exist_ok=True)
    t0, cpu0 = time.time(), os.times()
    rows = []
    for arch in a.arch or ARCHES:
        d = os.path.join(a.work, f"{arch}_tiny_f32_mtp")
        if not os.path.exists(os.path.join(d, "config.json")):
            run([a.statebank, "gen-model", "--arch", arch, "--preset", "tiny", "--dtype", "f32", "--mtp-layers", "1", d])
        for qtype in a.types.split(","):
            gguf = f"{d}.{qtype}.gguf"
            if qtype not in ("f32", "q8_0", "q4_k_m"):
                die(f"--types: {qtype} is not f32, q8_0 or q4_k_m")
            if not os.path.exists(gguf) and qtype == "f32":
                run([sys.executable, os.path.join(ROOT, "tools/gguf/convert.py"), "--outtype", "f32", d, gguf])
            elif not os.path.exists(gguf):
                run([a.statebank, "quantize", d, gguf, "--type", qtype])
            for n in [int(x) for x in a.lengths.split(",")]:
                for prompt_rows, mode in ((1, "prompt rows"), (0, "no prompt rows")):
                    ids = random_ids(n)
                    # Quantized: the same text after the prompt on both sides (their greedy choices part early).
                    target = [] if qtype == "f32" else random_ids(n + STEPS)[n:]
                    sb = side(a.mtp_logits, gguf, ids, prompt_rows, os.path.join(a.work, "sb.bin"), a.threads, target)
                    ll = side(a.llama_mtp, gguf, ids, prompt_rows, os.path.join(a.work, "ll.bin"), a.threads, target)
                    r = compare(sb, ll)
                    if qtype != "f32":
                        r["ok"] = True  # for information
                    rows.append((arch, qtype, n, mode, r))
                    print(f"{arch} {qtype} {n} tokens, {mode}: rel err {r['err']:.1e}, drafts {r['agree']}/{r['total']}"
                          f"{'' if r['ok'] else '  FAIL'}", flush=True)
    cpu = os.times()
    cost = (f"{len(rows)} cases, {time.time() - t0:.0f} s wall, "
            f"{cpu.children_user + cpu.children_system - cpu0.children_user - cpu0.children_system:.0f} s CPU, "
            f"{a.threads} threads per process.\n")
    text = table(rows) + "\n" + cost
    print(text)
    if a.update_doc:
        update_doc(a.update_doc, text)
    return 0 if all(r["ok"] for *_, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
