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
`statebank gen-model --gguf-type` (kept in the work directory), then `llama-bench` and
`runtime_bench --model` on that very file, and one markdown table: the ratio
statebank / llama.cpp, decode against the read-bandwidth bound (the file's
weight bytes read per token over the probe's best pass; for statebank also
over the probe passes right before and after each of runtime_bench's decode
chunks, the bandwidth of the same moment), and statebank's resident memory
after loading the file and after the first decode, over the file's size,
with what runtime_bench saw of the conditions: the share of its anonymous
memory in 2 MiB pages, and per decode repetition its rate by CPU time, its
threads' runnable wait and the host's steal (a wall-clock decode lower than
the CPU-time one with a high wait was kept off the CPUs, not slowed by the
memory), and for every engine's run the share of its wall time in which some
task waited for a CPU (/proc/pressure/cpu): other work on the machine, seen
alike for each engine.
With --out DIR that table replaces the quantized section of DIR/runtime.md
(the BF16 section stays). With --ik-llama-bin DIR as well, ik_llama.cpp's
llama-bench runs on the same files, once with -rtr 0 and once with -rtr 1
(its run-time repacking into its own interleaved layouts), and the table
gains its two rates and statebank over the better one. Progress goes to stderr. Wall-clock numbers move with load: compare ratios from one
run on a quiet machine; the report records the load average.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
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


def decode_conditions_text(ours: dict, threads: list[int]) -> str:
    """Per thread count, statebank's decode repetitions: the rate by CPU time (what a slower memory lowers and
    other work on the machine does not), then the share of the threads' wall time spent waiting for a CPU and of
    the machine's CPU time the host stole (what lowers the wall-clock rate beside it)."""
    parts = []
    for r in ours["results"]:
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


def run_under_watch(cmd: list[str], pressure: dict, key: str, quiet: bool = False) -> str:
    """run(), recording in pressure[key] the share of its wall time in which some task waited for a CPU: with the
    engines' threads as many as the cores, any other work on the machine shows here, measured alike for every
    engine (the engines' own rates cannot say whether they were kept off the CPUs)."""
    before, t0 = cpu_pressure_us(), time.monotonic()
    out = run(cmd, quiet=quiet)
    after, wall = cpu_pressure_us(), time.monotonic() - t0
    pressure[key] = (after - before) / 1e6 / wall if before is not None and after is not None and wall > 0 else None
    return out


def pressure_text(pressure: dict) -> str:
    return ", ".join(f"{k} {'-' if v is None else f'{v:.0%}'}" for k, v in pressure.items())


def samples_of(results: list[dict], test: str, t: int, what: str) -> list[float]:
    for r in results:
        name = r.get("test") or (f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}")
        if name == test and r["n_threads"] == t:
            return [float(x) for x in r["samples_ts"]]
    die(f"{what} gave no {test} at {t} threads")


def measure_gguf(a, preset: str, gguf_type: str) -> dict:
    """llama-bench and runtime_bench on the same file, one after the other."""
    path = gguf_file(a.statebank, a.work, a.arch, preset, gguf_type)
    print(f"compare_llama: {preset} {gguf_type}: llama-bench ({a.prefill}, tg{a.decode}, {a.reps} reps)",
          file=sys.stderr, flush=True)
    pressure = {}
    llama = json.loads(run_under_watch([os.path.join(a.llama_bin, "llama-bench"), "-m", path, "-lm", "none", "-p",
                                        a.prefill, "-n", str(a.decode), "-t", a.threads, "-r", str(a.reps), "-o",
                                        "json"], pressure, "llama.cpp", quiet=True))
    ik = {}
    for rtr in (0, 1) if a.ik_llama_bin else ():  # ik_llama.cpp without and with its run-time repacking
        print(f"compare_llama: {preset} {gguf_type}: ik_llama.cpp llama-bench -rtr {rtr}", file=sys.stderr, flush=True)
        ik[rtr] = json.loads(run_under_watch([os.path.join(a.ik_llama_bin, "llama-bench"), "-m", path, "-rtr",
                                              str(rtr), "-p", a.prefill, "-n", str(a.decode), "-t", a.threads, "-r",
                                              str(a.reps), "-o", "json"], pressure, f"ik -rtr {rtr}", quiet=True))
    print(f"compare_llama: {preset} {gguf_type}: runtime_bench", file=sys.stderr, flush=True)
    ours = json.loads(run_under_watch([a.runtime_bench, "--model", path, "--threads", a.threads, "--prefill",
                                       a.prefill, "--decode", str(a.decode), "--reps", str(a.reps), "--json"],
                                      pressure, "statebank"))
    return {"preset": preset, "type": gguf_type, "path": path, "llama": llama, "ours": ours, "ik": ik,
            "llama_bytes": gguf_weight_bytes(path), "pressure": pressure}


def gguf_rows(m: dict, tests: list[str], threads: list[int]) -> list[str]:
    ours, bw = m["ours"], {int(k): float(v) for k, v in m["ours"]["read_bandwidth"].items()}
    rows = []
    for test in tests:
        for t in threads:
            s = samples_of(ours["results"], test, t, "runtime_bench")
            ll = samples_of(m["llama"], test, t, "llama-bench")
            bound = ""
            if test.startswith("tg"):
                bound = (f"{best(s) * ours['weight_bytes_per_token'] / bw[t]:.0%} / "
                         f"{best(ll) * m['llama_bytes'] / bw[t]:.0%}")
                paired = sorted(ours.get("decode_over_adjacent_probe", {}).get(str(t), []))
                if paired:
                    bound += f" (statebank, same moment: {paired[len(paired) // 2]:.0%})"
            ik = ""
            if m["ik"]:  # -rtr 0 / -rtr 1, and statebank over the better of the two
                k0, k1 = (samples_of(m["ik"][r], test, t, "ik_llama.cpp llama-bench") for r in (0, 1))
                ik = (f" {best(k0):.1f} / {best(k1):.1f} | "
                      f"{best(s) / max(best(k0), best(k1)):.2f}x |")
            rows.append(f"| {m['preset']} | {m['type']} | {test} | {t} | {best(s):.1f} ({mean(s):.1f}) | "
                        f"{best(ll):.1f} ({mean(ll):.1f}) | {best(s) / best(ll):.2f}x |{ik} {bound} |")
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


def gguf_report(a, measured: list[dict], tests: list[str], threads: list[int], load: tuple, minutes: float) -> str:
    ik = " ik_llama.cpp t/s, -rtr 0 / 1 | statebank / ik_llama.cpp |" if a.ik_llama_bin else ""
    lines = ["| preset | type | test | threads | statebank t/s | llama.cpp t/s | statebank / llama.cpp |" + ik +
             " decode / read-bandwidth bound: statebank / llama.cpp |",
             "|---|---|---|---|---|---|---|" + ("---|---|" if ik else "") + "---|"]
    for m in measured:
        lines += gguf_rows(m, tests, threads)
    lines += ["", "| preset | type | file | statebank reads per token | resident after load | after the first decode | "
              "anonymous memory in 2 MiB pages | read bandwidth | statebank's decode: t/s of CPU time, runnable wait, "
              "host steal | CPU pressure over each engine's run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m in measured:
        o = m["ours"]
        size = o["file_bytes"]
        bws = ", ".join(bandwidth_text(o, k) for k in o["read_bandwidth"])
        lines.append(f"| {m['preset']} | {m['type']} | {size / 1e9:.2f} GB | "
                     f"{o['weight_bytes_per_token'] / 1e9:.2f} GB | "
                     f"{o['rss_after_load'] / 1e9:.2f} GB ({o['rss_after_load'] / size:.2f}x) | "
                     f"{o['rss_after_decode'] / 1e9:.2f} GB ({o['rss_after_decode'] / size:.2f}x) | "
                     f"{huge_page_text(o)} | {bws} | {decode_conditions_text(o, threads)} | "
                     f"{pressure_text(m.get('pressure', {}))} |")
    lines += ngram_rows(measured)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines += ["", f"Model: {a.arch}, random bf16 weights written by `statebank gen-model --gguf-type`; both programs read the same "
              f"file. t/s: best of {a.reps} (mean in brackets); llama.cpp with `-lm none`; kernels "
              f"{measured[0]['ours']['kernels']}. {cpu_name()}, {os.cpu_count()} CPUs; load average {load[0]:.1f} "
              f"before, {load[1]:.1f} after; statebank {commit}, llama.cpp v0.5.0 (de3ff81); {datetime.date.today()}; "
              f"{minutes:.0f} min."]
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
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="", help="write runtime.md, runtime.csv, runtime.png here (e.g. docs/bench)")
    ap.add_argument("--note", default="", help="a line for the report (e.g. 'measured under load')")
    ap.add_argument("--gguf-types", default="", help="measure GGUF files of these types (q8_0,q4_k_m) instead of BF16")
    ap.add_argument("--ik-llama-bin", default="", help="with --gguf-types: ik_llama.cpp's build/bin too, "
                    "its llama-bench without and with -rtr on the same files (bench/compare_llama.sh --ik-llama)")
    a = ap.parse_args()
    if a.reps < 1:
        die("--reps must be at least 1")
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
