#!/usr/bin/env bash
# The MTP head cross-check against llama.cpp (docs/xcheck.md, "MTP head"):
# builds llama_mtp against the cached llama.cpp build and runs
# tools/xcheck/mtp_check.py with Debian's numpy and llama.cpp's gguf-py.
# Needs `tools/build.sh release statebank mtp_logits`. Without the llama.cpp
# build (tools/llama/build_llama.sh) it exits 77, which ctest reports as
# skipped, not passed.
#   tools/xcheck/run_mtp.sh [mtp_check.py flags: --arch, --lengths, --update-doc FILE, ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/tools/llama/env.sh"
xcheck_require_llama
tool="$("$root/tools/xcheck/build_llama_logits.sh" llama_mtp)"
exec "$SB_PY" "$root/tools/xcheck/mtp_check.py" --llama-mtp "$tool" "$@"
