#!/usr/bin/env bash
# Builds tools/xcheck/llama_logits.cpp (or, given `llama_mtp`,
# tools/xcheck/llama_mtp.cpp) against the cached llama.cpp build
# (tools/llama/build_llama.sh) into $SB_LLAMA_DIR/build/sb/<name> and prints
# that path. Rebuilds only when the source or the libraries changed.
#   tools/xcheck/build_llama_logits.sh [llama_logits|llama_mtp]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/tools/llama/env.sh"
llama_ready || { echo "build_llama_logits: no llama.cpp build at $LLAMA_DIR (run tools/llama/build_llama.sh)" >&2; exit 1; }
name="${1:-llama_logits}"
[[ "$name" == llama_logits || "$name" == llama_mtp ]] || { echo "build_llama_logits: unknown program $name" >&2; exit 2; }
src="$root/tools/xcheck/$name.cpp"
out="$LLAMA_DIR/build/sb/$name"
libs=("$LLAMA_DIR/build/src/libllama.a" "$LLAMA_DIR/build/ggml/src/libggml.a"
      "$LLAMA_DIR/build/ggml/src/libggml-cpu.a" "$LLAMA_DIR/build/ggml/src/libggml-base.a")
stale=0
[[ -x "$out" ]] || stale=1
for f in "$src" "$root"/tools/xcheck/*.h "${libs[@]}"; do [[ "$f" -nt "$out" ]] && stale=1; done
if ((stale)); then
  mkdir -p "$(dirname "$out")"
  g++ -std=c++17 -O2 -Wall -Wextra -I"$root" -I"$LLAMA_DIR" -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" "$src" -o "$out.tmp" \
    "${libs[@]}" -fopenmp -lpthread -ldl -lm
  mv "$out.tmp" "$out"
fi
echo "$out"
