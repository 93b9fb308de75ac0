#!/usr/bin/env bash
# Builds the reference engine for the cross-check (tools/xcheck) and the speed
# comparison (bench/compare_llama.sh): llama.cpp v0.5.0, commit de3ff81, from
# the only copy of its source these machines can reach, the git bundle inside
# the npm package node-llama-cpp 3.22.1.
#
# The package is fetched with `npm pack` and unpacked with tar, never
# `npm install`d: its install scripts download prebuilt binaries, which we
# neither want nor can reach. Nothing of llama.cpp enters this repository; the
# tree and its build live in a cache directory outside it:
#   SB_LLAMA_DIR (default /work/cache/llama.cpp)  the git clone of the bundle
#   SB_LLAMA_DIR/build                             the CMake build
# Idempotent: an existing clone at the right commit is reused and ninja only
# rebuilds what is out of date. Takes about 12 minutes on 2 quiet cores.
#
# Usage: tools/llama/build_llama.sh [--print-dir]
set -euo pipefail

LLAMA_DIR="${SB_LLAMA_DIR:-/work/cache/llama.cpp}"
NPM_PACKAGE="node-llama-cpp@3.22.1"
COMMIT="de3ff815ea7d559ee917f063901b8986f038abc6"
TARGETS=(llama llama-bench llama-quantize llama-server)

if [[ "${1:-}" == "--print-dir" ]]; then echo "$LLAMA_DIR"; exit 0; fi

log() { echo "build_llama: $*" >&2; }

# What the build and the scripts around it need: statebank's own dependencies
# (cmake, ninja, g++, git, npm), and Debian's numpy for the GGUF converter.
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/tools/install-deps.sh"
if ! dpkg-query -W -f='${Status}' python3-numpy 2>/dev/null | grep -q "install ok installed"; then
  log "apt-get install python3-numpy"
  sudo_cmd=""
  [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends python3-numpy >/dev/null
fi

have_clone() {
  [[ -d "$LLAMA_DIR/.git" ]] &&
    [[ "$(git -C "$LLAMA_DIR" rev-parse HEAD 2>/dev/null)" == "$COMMIT" ]]
}

if ! have_clone; then
  if [[ -e "$LLAMA_DIR" ]] && [[ -n "$(ls -A "$LLAMA_DIR" 2>/dev/null)" ]]; then
    echo "build_llama: $LLAMA_DIR exists but is not a clone of $COMMIT; remove it or set SB_LLAMA_DIR" >&2
    exit 1
  fi
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  log "npm pack $NPM_PACKAGE (no install, no install scripts)"
  (cd "$scratch" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
  tar -xzf "$scratch"/node-llama-cpp-*.tgz -C "$scratch" package/llama/gitRelease.bundle
  mkdir -p "$(dirname "$LLAMA_DIR")"
  log "cloning the bundle into $LLAMA_DIR"
  git clone --quiet "$scratch/package/llama/gitRelease.bundle" "$LLAMA_DIR"
  git -C "$LLAMA_DIR" -c advice.detachedHead=false checkout --quiet "$COMMIT"
  have_clone || { echo "build_llama: the bundle does not hold commit $COMMIT" >&2; exit 1; }
fi

# The flags of the reference figures in the design notes (measured.md).
if [[ ! -f "$LLAMA_DIR/build/build.ninja" ]]; then
  log "configuring"
  cmake -S "$LLAMA_DIR" -B "$LLAMA_DIR/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
fi
log "ninja ${TARGETS[*]} (about 12 minutes on 2 cores when nothing is built yet)"
ninja -C "$LLAMA_DIR/build" "${TARGETS[@]}"
log "ready: $LLAMA_DIR/build/bin"
