#!/usr/bin/env bash
# statebank serve and llama.cpp v0.5.0's llama-server (-np 8) under the same
# concurrent load on the same weights: builds llama.cpp when its cache is
# empty (tools/llama/build_llama.sh, as bench/compare_llama.sh), builds
# statebank, then runs bench/compare_llama_load.py (its docstring says what
# it measures). A bench, not a test: CI does not run it.
#   bench/compare_llama_load.sh [--threads 2] [--clients 1,2,4,8] [--out docs/bench] [--work DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/tools/llama/env.sh"
"$root/tools/llama/build_llama.sh" >&2
[[ -n "$SB_PY" ]] || { echo "compare_llama_load: needs python3 with numpy (apt-get install python3-numpy)" >&2; exit 2; }
"$root/tools/build.sh" release statebank
exec "$SB_PY" "$root/bench/compare_llama_load.py" --llama-bin "$LLAMA_BIN" "$@"
