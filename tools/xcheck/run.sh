#!/usr/bin/env bash
# The cross-check against llama.cpp (docs/xcheck.md): builds llama_logits
# against the cached llama.cpp build and runs tools/xcheck/run.py with
# Debian's numpy and llama.cpp's gguf-py. Without the llama.cpp build
# (tools/llama/build_llama.sh) it exits 77, which ctest reports as skipped,
# not passed.
#   tools/xcheck/run.sh [run.py flags: --arch, --preset, --precision, --update-doc FILE, ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/tools/llama/env.sh"
xcheck_require_llama
logits="$("$root/tools/xcheck/build_llama_logits.sh")"
exec "$SB_PY" "$root/tools/xcheck/run.py" --llama-logits "$logits" --llama-bin "$LLAMA_BIN" "$@"
