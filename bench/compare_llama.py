#!/usr/bin/env python3
"""statebank and llama.cpp v0.5.0 side by side in one run, on the same weights.

Run through bench/compare_llama.sh, which builds both and finds numpy and
llama.cpp's gguf-py. Steps:
  1. `statebank gen-model --arch qwen3_5 --preset 0.8b --dtype bf16` (the
     shapes of Qwen3.5-0.8B, random weights) into the work directory;
  2. the same checkpoint as a BF16 GGUF (tools/gguf/convert.py) and as Q8_0
     (llama-quantize);
  3. `llama-bench -lm none` on both files and `runtime_bench` on the
     checkpoint: pp512, pp2048 and tg128 at each thread count, REPS times;
  4. one markdown table: the best of the repetitions on each side (the least
     disturbed run; the mean follows in brackets), the ratio statebank /
     llama.cpp BF16, llama.cpp Q8_0 for reference (statebank has no int8
     path), and decode as a fraction of the read-bandwidth bound (weight bytes
     read per token over runtime_bench's read-only bandwidth probe at that
     thread count, measured in the same run).
With --out DIR it writes DIR/runtime.md, DIR/runtime.csv and, with gnuplot,
DIR/runtime.png.

With --gguf-types q8_0,q4_k_m it measures GGUF files instead, for each
--preset (e.g. 0.8b,4b) and type: the bf16 checkpoint's file written once by
`statebank gen-model --gguf-type` (kept in the work directory), then the
engines on that very file: `runtime_bench --model` and `llama-bench`, and
with --ik-llama-bin DIR ik_llama.cpp's llama-bench too, with -rtr 0 and
-rtr 1 (its run-time repacking into its own interleaved layouts). This VM's
memory reads at half speed for minutes at a time, so two engines run minutes
apart can meet different memories. Hence rounds (--rounds N): in each,
statebank and its partner (ik_llama.cpp -rtr 1, its best setting, or
llama.cpp without ik_llama.cpp) run one right after the other, in turns
first; the other engines run once, in the first round. Each run is
bracketed by read probes (`runtime_bench --probe`, the bandwidth of that
moment). The tables: per test, each engine's best rate and statebank over
it, the median of the rounds' ratios (their range); each engine's decode
over the mean of the probes right before and after its run (median of its
runs; for statebank also runtime_bench's own chunks between probe passes);
per round, the runs in order with the probes between them; and statebank's
resident memory after loading the file and after the first decode, over
the file's size, with what runtime_bench saw of the conditions: the share
of its anonymous memory in 2 MiB pages, and per decode repetition its rate
by CPU time, its threads' runnable wait and the host's steal (a wall-clock
decode lower than the CPU-time one with a high wait was kept off the CPUs,
not slowed by the memory), and per engine the largest share of one of its
runs' wall time in which some task waited for a CPU (/proc/pressure/cpu):
other work on the machine, seen alike for each engine. docs/bench/runtime.md
says how to read the columns.
With --out DIR the tables replace the quantized section of DIR/runtime.md
(the BF16 section stays). Progress goes to stderr. Wall-clock numbers move
with load: compare ratios from a quiet machine; the report records the
load average.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



def bandwidth_text(ours, threads):
    """The probe's best pass (the bound) and, where runtime_bench gave them, the range of its passes."""
    text = f"{float(ours['read_bandwidth'][threads]) / 1e9:.1f} GB/s"
    passes = ours.get("read_bandwidth_passes", {}).get(threads)
    if passes:
        text += f" (passes {min(passes) / 1e9:.1f}-{max(passes) / 1e9:.1f})"
    return text

def die(message: str):
    print(f"compare_llama: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd: list[str], quiet: bool = False) -> str:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if quiet else None, text=True)
    if p.returncode != 0:
        die(f"{cmd[0]} failed ({p.returncode})")
    return p.stdout


def gguf_weight_bytes(path: str) -> int:
    """The file's tensor bytes a decoded token reads: of the routed experts (`*_exps`), the share a
    token is sent to (expert_used_count of expert_count), as runtime_bench counts them."""
    import gguf  # llama.cpp's gguf-py (compare_llama.sh puts it on PYTHONPATH)
    reader = gguf.GGUFReader(path)

    def metadata(suffix: str) -> int:
        for name, field in reader.fields.items():
            if name.endswith(suffix):
                return int(field.parts[field.data[0]][0])
        return 0
    experts, used = metadata(".expert_count"), metadata(".expert_used_count")
    total = 0
    for t in reader.tensors:
        routed = experts > 0 and "_exps." in t.name
        total += int(t.n_bytes) * used // experts if routed else int(t.n_bytes)
    return total


def same_weights(statebank: str, llama_bin: str, work: str, arch: str, preset: str) -> tuple[str, str, str]:
    """The generated checkpoint (bf16), as a BF16 GGUF and as Q8_0, made once in `work`."""
    os.makedirs(work, exist_ok=True)
    ckpt = os.path.join(work, f"{arch}-{preset}-bf16")
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        run([statebank, "gen-model", "--arch", arch, "--preset", preset, "--dtype", "bf16", ckpt])
    bf16 = ckpt + ".bf16.gguf"
    if not os.path.exists(bf16):
        run([sys.executable, os.path.join(ROOT, "tools/gguf/convert.py"), "--outtype", "bf16", ckpt, bf16])
    q8 = ckpt + ".q8_0.gguf"
    if not os.path.exists(q8):
        run([os.path.join(llama_bin, "llama-quantize"), bf16, q8, "Q8_0"], quiet=True)
    return ckpt, bf16, q8


def gguf_file(statebank: str, work: str, arch: str, preset: str, gguf_type: str) -> str:
    """The preset as a GGUF file of gguf_type, written once in `work` by `statebank gen-model --gguf-type`:
    the bytes `statebank quantize` makes of its bf16 checkpoint, without the checkpoint on disk (the
    qwen4exp bench preset's is 16 GB)."""
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, f"{arch}-{preset}-bf16.{gguf_type}.gguf")
    if not os.path.exists(out):
        run([statebank, "gen-model", "--arch", arch, "--preset", preset, "--dtype", "bf16", "--gguf-type", gguf_type,
             out + ".tmp.gguf"])
        os.rename(out + ".tmp.gguf", out)
    return out


def huge_page_text(ours: dict) -> str:
    """The share of runtime_bench's anonymous memory (the packed weights, mostly) in 2 MiB pages after load."""
    anon = ours.get("anon_bytes", 0)
    return f"{ours['anon_huge_bytes'] / anon:.0%} of {anon / 1e9:.2f} GB" if anon else "-"


def decode_conditions_text(results: list[dict], threads: list[int]) -> str:
    """Per thread count, statebank's decode repetitions: the rate by CPU time (what a slower memory lowers and
    other work on the machine does not), then the share of the threads' wall time spent waiting for a CPU and of
    the machine's CPU time the host stole (what lowers the wall-clock rate beside it)."""
    parts = []
    for r in results:
        if r["test"].startswith("tg") and r["n_threads"] in threads and "samples_runnable_wait" in r:
            waits = ", ".join(f"{w:.0%}" for w in r["samples_runnable_wait"])
            steal = ", ".join(f"{x:.1%}" for x in r["samples_steal"])
            parts.append(f"{r['n_threads']} threads: {max(r['samples_cpu_ts']):.1f}; {waits}; {steal}")
    return "; ".join(parts) or "-"


def cpu_pressure_us():
    """The kernel's count of microseconds in which some runnable task waited for a CPU (PSI); None without it."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().split("total=")[1])
    except (OSError, IndexError, ValueError):
        return None


def run_under_watch(cmd: list[str], quiet: bool = False) -> tuple[str, float | None]:
    """run(), and the share of its wall time in which some task waited for a CPU: with the engines' threads as
    many as the cores, any other work on the machine shows here, measured alike for every engine (the engines'
    own rates cannot say whether they were kept off the CPUs)."""
    before, t0 = cpu_pressure_us(), time.monotonic()
    out = run(cmd, quiet=quiet)
    after, wall = cpu_pressure_us(), time.monotonic() - t0
    return out, (after - before) / 1e6 / wall if before is not None and after is not None and wall > 0 else None


def test_name(r: dict) -> str:
    """runtime_bench names its tests; llama-bench gives their prompt and generated lengths."""
    return r.get("test") or (f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}")


def samples_of(results: list[dict], test: str, t: int, what: str) -> list[float]:
    for r in results:
        if test_name(r) == test and r["n_threads"] == t:
            return [float(x) for x in r["samples_ts"]]
    die(f"{what} gave no {test} at {t} threads")


def merged_results(runs: list[dict]) -> list[dict]:
    """An engine's runs (all rounds) as one result list: each test's samples_* lists of every run, in run order."""
    merged = {}
    for run_ in runs:
        for r in run_["results"]:
            key = (test_name(r), r["n_threads"])
            if key not in merged:
                merged[key] = {k: (list(v) if k.startswith("samples_") else v) for k, v in r.items()}
                merged[key]["test"] = key[0]
            else:
                for k, v in r.items():
                    if k.startswith("samples_"):
                        merged[key].setdefault(k, []).extend(v)
    return list(merged.values())


# The engines of the GGUF table, in its column order. In every round statebank and its partner (ik_llama.cpp
# -rtr 1, its best setting, or mainline without ik_llama.cpp) run one right after the other, in turns first;
# the others run once, in the first round.
STATEBANK, IK0, IK1, LLAMA = "statebank", "ik_llama.cpp -rtr 0", "ik_llama.cpp -rtr 1", "llama.cpp"
PROBE_PASSES = 4  # timed passes of each probe between two runs; its best pass is that moment's bandwidth


def engines(a) -> list[str]:
    return [STATEBANK, IK1, IK0, LLAMA] if a.ik_llama_bin else [STATEBANK, LLAMA]


def round_order(a, r: int) -> list[str]:
    partner = IK1 if a.ik_llama_bin else LLAMA
    pair = [partner, STATEBANK] if r % 2 == 0 else [STATEBANK, partner]
    return ([e for e in (LLAMA, IK0) if e in engines(a) and e not in pair] if r == 0 else []) + pair


def engine_cmd(a, engine: str, path: str) -> list[str]:
    if engine == STATEBANK:
        return [a.runtime_bench, "--model", path, "--threads", a.threads, "--prefill", a.prefill, "--decode",
                str(a.decode), "--reps", str(a.reps), "--json"]
    common = ["-m", path, "-p", a.prefill, "-n", str(a.decode), "-t", a.threads, "-r", str(a.reps), "-o", "json"]
    if engine == LLAMA:
        return [os.path.join(a.llama_bin, "llama-bench"), "-lm", "none"] + common
    return [os.path.join(a.ik_llama_bin, "llama-bench"), "-rtr", engine[-1]] + common


def probe(a) -> dict[int, float]:
    """The read bandwidth of this moment per thread count: the best of runtime_bench --probe's passes."""
    out = json.loads(run([a.runtime_bench, "--probe", str(PROBE_PASSES), "--threads", a.threads, "--json"]))
    return {int(t): float(bw) for t, bw in out["read_bandwidth"].items()}


def measure_gguf(a, preset: str, gguf_type: str) -> dict:
    """The engines on the same file, a.rounds rounds (round_order), a probe before each run and after the last:
    every run has the bandwidth right before and right after it."""
    path = gguf_file(a.statebank, a.work, a.arch, preset, gguf_type)
    runs, sequence = {e: [] for e in engines(a)}, []
    before = probe(a)
    for r in range(a.rounds):
        for engine in round_order(a, r):
            print(f"compare_llama: {preset} {gguf_type}: round {r + 1} of {a.rounds}: {engine} ({a.prefill}, "
                  f"tg{a.decode}, {a.reps} reps)", file=sys.stderr, flush=True)
            text, pressure = run_under_watch(engine_cmd(a, engine, path), quiet=engine != STATEBANK)
            out, after = json.loads(text), probe(a)
            runs[engine].append({"round": r, "out": out, "results": out["results"] if engine == STATEBANK else out,
                                 "before": before, "after": after, "pressure": pressure})
            sequence.append((engine, runs[engine][-1]))
            before = after
    return {"preset": preset, "type": gguf_type, "path": path, "runs": runs, "sequence": sequence,
            "ours": runs[STATEBANK][0]["out"], "llama_bytes": gguf_weight_bytes(path)}


def round_ratios(m: dict, engine: str, test: str, t: int) -> list[float]:
    """statebank's rate over engine's, each from one round (the two runs adjacent, or nearly so)."""
    theirs = {run_["round"]: run_ for run_ in m["runs"][engine]}
    return [best(samples_of(ours["results"], test, t, STATEBANK)) /
            best(samples_of(theirs[ours["round"]]["results"], test, t, engine))
            for ours in m["runs"][STATEBANK] if ours["round"] in theirs]


def adjacent_share(m: dict, engine: str, run_: dict, test: str, t: int) -> float:
    """One run's decode: the weight bytes it read per second over the mean of the probes right before and after."""
    nbytes = m["ours"]["weight_bytes_per_token"] if engine == STATEBANK else m["llama_bytes"]
    return best(samples_of(run_["results"], test, t, engine)) * nbytes / (0.5 * (run_["before"][t] + run_["after"][t]))


def ratio_text(ratios: list[float]) -> str:
    text = f"{statistics.median(ratios):.2f}x"
    return text + (f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else "")


def gguf_rows(m: dict, tests: list[str], threads: list[int]) -> list[str]:
    rows = []
    for test in tests:
        for t in threads:
            cells = [m["preset"], m["type"], test, str(t)]
            for engine, runs in m["runs"].items():
                s = samples_of(merged_results(runs), test, t, engine)
                cells.append(f"{best(s):.1f} ({mean(s):.1f})")
                if engine != STATEBANK:
                    cells.append(ratio_text(round_ratios(m, engine, test, t)))
            share = ""
            if test.startswith("tg"):
                share = " / ".join(f"{statistics.median(adjacent_share(m, e, x, test, t) for x in runs):.0%}"
                                  for e, runs in m["runs"].items())
                chunks = [x for run_ in m["runs"][STATEBANK]
                          for x in run_["out"].get("decode_over_adjacent_probe", {}).get(str(t), [])]
                if chunks:
                    share += f" (statebank's chunks: {statistics.median(chunks):.0%})"
            rows.append("| " + " | ".join(cells + [share]) + " |")
    return rows


def round_rows(m: dict, tests: list[str], threads: list[int]) -> list[str]:
    """Per round: the runs in order with the probe's best pass (GB/s, per thread count) before each and after the
    last; statebank over its partner; each run's decode over its adjacent probes."""
    partner = list(m["runs"])[1]
    gbs = lambda bw: "/".join(f"{bw[t] / 1e9:.1f}" for t in threads)
    rows = []
    for r in range(len(m["runs"][STATEBANK])):
        in_round = [(e, x) for e, x in m["sequence"] if x["round"] == r]
        order = "".join(f"{gbs(x['before'])} · {e} · " for e, x in in_round) + gbs(in_round[-1][1]["after"])
        ratios = [" / ".join(f"{round_ratios(m, partner, test, t)[r]:.2f}x" for t in threads) for test in tests]
        shares = ", ".join(f"{e} " + " / ".join(f"{adjacent_share(m, e, x, tests[-1], t):.0%}" for t in threads)
                           for e, x in in_round)
        rows.append("| " + " | ".join([m["preset"], m["type"], str(r + 1), order] + ratios + [shares]) + " |")
    return rows


def ngram_rows(measured: list[dict]) -> list[str]:
    """qwen4exp's n-gram table: mapped, read a few rows per token; resident memory against the rest of the file."""
    with_table = [m for m in measured if m["ours"].get("ngram_table_bytes")]
    if not with_table:
        return []
    rows = ["", "| preset | type | n-gram table | table bytes read per decoded token | file outside the table | "
            "resident after load / file outside the table |", "|---|---|---|---|---|---|"]
    for m in with_table:
        o = m["ours"]
        rest = o["file_bytes"] - o["ngram_table_bytes"]
        rows.append(f"| {m['preset']} | {m['type']} | {o['ngram_table_bytes'] / 1e9:.2f} GB | "
                    f"{o['ngram_bytes_per_token']} | {rest / 1e9:.2f} GB | {o['rss_after_load'] / rest:.2f}x |")
    return rows


def table(head: list[str], rows: list[str]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + rows


def probes_text(m: dict, threads: list[int]) -> str:
    """The range of the file's probes (each one's best pass), per thread count."""
    seen = [x["before"] for _, x in m["sequence"]] + [m["sequence"][-1][1]["after"]]
    return "; ".join(f"{t} threads: {min(p[t] for p in seen) / 1e9:.1f}-{max(p[t] for p in seen) / 1e9:.1f} GB/s"
                     for t in threads) + f" ({len(seen)} probes)"


def pressure_text(m: dict) -> str:
    """Per engine, the largest share of one of its runs' wall time in which some task waited for a CPU."""
    worst = lambda runs: max((x["pressure"] for x in runs if x["pressure"] is not None), default=None)
    return ", ".join(f"{e} {'-' if worst(runs) is None else f'{worst(runs):.0%}'}" for e, runs in m["runs"].items())


def conditions_rows(measured: list[dict], threads: list[int]) -> list[str]:
    rows = []
    for m in measured:
        o, size = m["ours"], m["ours"]["file_bytes"]
        rows.append(f"| {m['preset']} | {m['type']} | {size / 1e9:.2f} GB | {o['weight_bytes_per_token'] / 1e9:.2f} GB | "
                    f"{o['rss_after_load'] / 1e9:.2f} GB ({o['rss_after_load'] / size:.2f}x) | "
                    f"{o['rss_after_decode'] / 1e9:.2f} GB ({o['rss_after_decode'] / size:.2f}x) | "
                    f"{huge_page_text(o)} | {probes_text(m, threads)} | "
                    f"{decode_conditions_text(merged_results(m['runs'][STATEBANK]), threads)} | {pressure_text(m)} |")
    return rows


def gguf_report(a, measured: list[dict], tests: list[str], threads: list[int], load: tuple, minutes: float) -> str:
    names = engines(a)
    head = ["preset", "type", "test", "threads", "statebank t/s"]
    for e in names[1:]:
        head += [f"{e} t/s", f"statebank / {e}"]
    lines = table(head + ["decode / adjacent probes: " + " / ".join(names)],
                  [row for m in measured for row in gguf_rows(m, tests, threads)])
    lines += [""] + table(["preset", "type", "round", "runs in order, the probe (GB/s) before each and after the last"]
                          + [f"{test}: statebank / {names[1]}" for test in tests] + [f"{tests[-1]} / adjacent probes"],
                          [row for m in measured for row in round_rows(m, tests, threads)])
    lines += [""] + table(["preset", "type", "file", "statebank reads per token", "resident after load",
                           "after the first decode", "anonymous memory in 2 MiB pages", "read bandwidth: the probes",
                           "statebank's decode: t/s of CPU time, runnable wait, host steal",
                           "CPU pressure: each engine's worst run"], conditions_rows(measured, threads))
    lines += ngram_rows(measured)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines += ["", f"Model: {a.arch}, random bf16 weights written by `statebank gen-model --gguf-type`; every engine "
              f"reads the same file. {a.rounds} round{'s' if a.rounds > 1 else ''} per file ({names[1]} and "
              f"statebank in each, in turns first{'; the others in the first' if len(names) > 2 else ''}), "
              f"each run with {a.reps} rep"
              f"{'s' if a.reps > 1 else ''}: t/s the best of all (mean in brackets), statebank / X the median of the "
              f"rounds' ratios (their range); decode over the mean of the read probes right before and after its run "
              f"(`runtime_bench --probe {PROBE_PASSES}`, best pass), the median of the runs. llama.cpp with `-lm none`; "
              f"kernels {measured[0]['ours']['kernels']}. {cpu_name()}, {os.cpu_count()} CPUs; load average "
              f"{load[0]:.1f} before, {load[1]:.1f} after; statebank {commit}, llama.cpp v0.5.0 (de3ff81); "
              f"{datetime.date.today()}; {minutes:.0f} min."]
    return "\n".join(lines)


def run_gguf(a) -> int:
    threads = [int(t) for t in a.threads.split(",")]
    tests = [f"pp{n}" for n in a.prefill.split(",")] + [f"tg{a.decode}"]
    t_start, load_before = time.monotonic(), os.getloadavg()
    measured = [measure_gguf(a, preset, gguf_type) for preset in a.preset.split(",")
                for gguf_type in a.gguf_types.split(",")]
    text = gguf_report(a, measured, tests, threads, (load_before[0], os.getloadavg()[0]),
                       (time.monotonic() - t_start) / 60)
    print(text)
    if a.out:
        note = f"**{a.note}**\n\n" if a.note else ""
        replace_section(os.path.join(a.out, "runtime.md"), GGUF_BEGIN, GGUF_END,
                        f"## GGUF files: Q8_0 and Q4_K_M\n\nMade by `{command_line()}`.\n\n{note}{text}")
    return 0


GGUF_BEGIN, GGUF_END = "<!-- gguf:begin -->", "<!-- gguf:end -->"


def replace_section(path: str, begin: str, end: str, text: str):
    """Puts text between the markers in path (appended with them when absent)."""
    doc = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)


def command_line() -> str:
    argv = sys.argv[1:]
    if "--llama-bin" in argv:  # the wrapper's own argument
        i = argv.index("--llama-bin")
        argv = argv[:i] + argv[i + 2:]
    return shlex.join(["bench/compare_llama.sh"] + argv)


def has_flag(binary: str, flag: str) -> bool:
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    return p.returncode == 0 and flag in p.stdout


def best(samples: list[float]) -> float:
    return max(samples)


def mean(samples: list[float]) -> float:
    return sum(samples) / len(samples)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description="statebank vs llama.cpp speed on the same weights")
    ap.add_argument("--llama-bin", required=True, help="llama.cpp's build/bin")
    ap.add_argument("--statebank", default=os.path.join(ROOT, "build/release/statebank"))
    ap.add_argument("--runtime-bench", default=os.path.join(ROOT, "build/release/bench/runtime_bench"))
    ap.add_argument("--work", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                   "statebank", "compare"))
    ap.add_argument("--arch", default="qwen3_5")
    ap.add_argument("--preset", default="0.8b")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prefill", default="512,2048")
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3, help="repetitions in each run of an engine")
    ap.add_argument("--rounds", type=int, default=1, help="with --gguf-types: per file, rounds of statebank and "
                    "ik_llama.cpp -rtr 1 (or llama.cpp) run one after the other, each ratio taken within a round")
    ap.add_argument("--out", default="", help="write runtime.md, runtime.csv, runtime.png here (e.g. docs/bench)")
    ap.add_argument("--note", default="", help="a line for the report (e.g. 'measured under load')")
    ap.add_argument("--gguf-types", default="", help="measure GGUF files of these types (q8_0,q4_k_m) instead of BF16")
    ap.add_argument("--ik-llama-bin", default="", help="with --gguf-types: ik_llama.cpp's build/bin too, "
                    "its llama-bench without and with -rtr on the same files (bench/compare_llama.sh --ik-llama)")
    a = ap.parse_args()
    if a.reps < 1 or a.rounds < 1:
        die("--reps and --rounds must be at least 1")
    if a.rounds > 1 and not a.gguf_types:
        die("--rounds needs --gguf-types")
    if a.ik_llama_bin and not a.gguf_types:
        die("--ik-llama-bin needs --gguf-types (ik_llama.cpp is compared on the GGUF files)")
    if a.gguf_types:
        for gguf_type in a.gguf_types.split(","):
            if gguf_type not in ("q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"):
                die(f"--gguf-types: unknown type {gguf_type} (q8_0, q4_0, q4_k_m, q5_k_m, q6_k)")
        return run_gguf(a)
    threads = [int(t) for t in a.threads.split(",")]
    prefills = [int(n) for n in a.prefill.split(",")]
    os.makedirs(a.work, exist_ok=True)
    t_start = time.monotonic()
    load_before = os.getloadavg()

    # 1-2. The same weights three ways.
    ckpt, bf16, q8 = same_weights(a.statebank, a.llama_bin, a.work, a.arch, a.preset)

    # 3. Both benchmarks in the same run.
    llama = json.loads(run([os.path.join(a.llama_bin, "llama-bench"), "-m", bf16, "-m", q8, "-lm", "none",
                            "-p", a.prefill, "-n", str(a.decode), "-t", a.threads, "-r", str(a.reps), "-o", "json"],
                           quiet=True))
    bench_cmd = [a.runtime_bench, "--dir", ckpt, "--arch", a.arch, "--preset", a.preset, "--threads", a.threads,
                 "--prefill", a.prefill, "--decode", str(a.decode), "--reps", str(a.reps), "--json"]
    precision = "fp32 math on bf16 weights"
    if has_flag(a.runtime_bench, "--precision"):
        bench_cmd += ["--precision", "bf16"]
        precision = "--precision bf16"
    ours = json.loads(run(bench_cmd))
    load_after = os.getloadavg()

    # 4. The table.
    def llama_samples(path: str, test: str, t: int) -> list[float]:
        for r in llama:
            name = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
            if os.path.samefile(r["model_filename"], path) and name == test and r["n_threads"] == t:
                return [float(x) for x in r["samples_ts"]]
        die(f"llama-bench gave no {test} at {t} threads for {path}")

    def ours_samples(test: str, t: int) -> list[float]:
        for r in ours["results"]:
            if r["test"] == test and r["n_threads"] == t:
                return [float(x) for x in r["samples_ts"]]
        die(f"runtime_bench gave no {test} at {t} threads")

    bytes_ours = int(ours["weight_bytes_per_token"])
    bytes_bf16, bytes_q8 = gguf_weight_bytes(bf16), gguf_weight_bytes(q8)
    bw = {int(k): float(v) for k, v in ours["read_bandwidth"].items()}
    tests = [f"pp{n}" for n in prefills] + [f"tg{a.decode}"]
    rows, csv = [], ["test,threads,statebank,llama_bf16,llama_q8_0"]
    for test in tests:
        for t in threads:
            s, lb, lq = ours_samples(test, t), llama_samples(bf16, test, t), llama_samples(q8, test, t)
            cells = [test, str(t), f"{best(s):.1f} ({mean(s):.1f})", f"{best(lb):.1f} ({mean(lb):.1f})",
                     f"{best(s) / best(lb):.2f}x", f"{best(lq):.1f} ({mean(lq):.1f})"]
            if test.startswith("tg"):
                cells.append(" / ".join(f"{best(x) * nbytes / bw[t]:.0%}"
                                        for x, nbytes in ((s, bytes_ours), (lb, bytes_bf16), (lq, bytes_q8))))
            else:
                cells.append("")
            rows.append("| " + " | ".join(cells) + " |")
            csv.append(f"{test} {t}t,{t},{best(s):.3f},{best(lb):.3f},{best(lq):.3f}")
    table = "\n".join(
        ["| test | threads | statebank t/s | llama.cpp BF16 t/s | statebank / llama.cpp BF16 | llama.cpp Q8_0 t/s | "
         "decode / read-bandwidth bound: statebank / BF16 / Q8_0 |", "|---|---|---|---|---|---|---|"] + rows)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    elapsed = time.monotonic() - t_start
    facts = (f"Model: {a.arch} preset {a.preset} (random weights), statebank {precision}, "
             f"{bytes_ours / 1e9:.2f} GB read per token (llama.cpp BF16 {bytes_bf16 / 1e9:.2f} GB, "
             f"Q8_0 {bytes_q8 / 1e9:.2f} GB); read bandwidth "
             + ", ".join(f"{bandwidth_text(ours, str(t))} at {t} thread{'s' if t > 1 else ''}" for t in threads)
             + f". t/s: best of {a.reps} (mean in brackets); llama.cpp with `-lm none`.\n\n"
             f"{cpu_name()}, {os.cpu_count()} CPUs; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
             f"statebank {commit}, llama.cpp v0.5.0 (de3ff81); {datetime.date.today()}; {elapsed / 60:.0f} min.")
    print(table + "\n\n" + facts)
    if not a.out:
        return 0
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "runtime.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")
    plot = ""
    if shutil.which("gnuplot"):
        png = os.path.join(a.out, "runtime.png")
        title = f"statebank and llama.cpp on the same weights ({a.arch} {a.preset}, best of {a.reps})"
        subprocess.run(["gnuplot", "-e", f"csv='{os.path.join(a.out, 'runtime.csv')}'; png='{png}'; title='{title}'",
                        os.path.join(ROOT, "tools/bench/runtime_plot.gp")], check=True)
        plot = "\n\n![tokens per second, statebank and llama.cpp](runtime.png)"
    else:
        plot = "\n\n(gnuplot is not installed, so no plot: apt-get install gnuplot-nox)"
    note = f"\n\n**{a.note}**" if a.note else ""
    md = os.path.join(a.out, "runtime.md")
    old = open(md, encoding="utf-8").read() if os.path.exists(md) else ""
    kept = ""
    if GGUF_BEGIN in old and GGUF_END in old:  # the GGUF section (--gguf-types) stays
        kept = old[old.index(GGUF_BEGIN):old.index(GGUF_END) + len(GGUF_END)]
    with open(md, "w") as f:
        f.write(f"# Runtime speed: statebank and llama.cpp side by side\n\nMade by `{command_line()}` "
                f"(bench/compare_llama.py says how).{note}\n\n{table}\n\n{facts}{plot}\n"
                + (f"\n{kept}\n" if kept else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
