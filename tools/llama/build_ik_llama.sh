#!/usr/bin/env bash
# Builds ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp, the fork with the
# iqk CPU kernels and run-time repacking, -rtr) for the side-by-side in
# bench/compare_llama.sh --ik-llama DIR. No package registry carries it, so
# this runs by hand on a checkout given by path, outside the repository; CI
# never builds it. Nothing of ik_llama.cpp enters this repository.
#
# Usage: tools/llama/build_ik_llama.sh SRC_DIR [--print-bin]
#   builds SRC_DIR/build-sb (llama-bench only), with nice and ninja -j2: the
#   iqk kernels are slow to compile (about an hour on 2 busy cores).
set -euo pipefail
[[ $# -ge 1 && -f "$1/CMakeLists.txt" && -d "$1/ggml/src/iqk" ]] ||
  { echo "usage: build_ik_llama.sh IK_LLAMA_SRC_DIR [--print-bin] (a checkout of ikawrakow/ik_llama.cpp)" >&2; exit 2; }
src="$(cd "$1" && pwd)"
build="$src/build-sb"
if [[ "${2:-}" == "--print-bin" ]]; then echo "$build/bin"; exit 0; fi
log() { echo "build_ik_llama: $*" >&2; }
if [[ ! -f "$build/build.ninja" ]]; then
  log "configuring $build"
  # The same flags as mainline's build (tools/llama/build_llama.sh); no
  # ccache (it would evict statebank's warm cache), and the flash-attention
  # kernels for f16/bf16/q8_0 caches only (the benches use f16).
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CCACHE=OFF \
    -DGGML_IQK_FA_ALL_QUANTS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
fi
log "nice ninja -j2 llama-bench"
nice -n 19 ninja -C "$build" -j2 llama-bench
log "ready: $build/bin/llama-bench"
