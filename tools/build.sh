#!/usr/bin/env bash
# Configures and builds one flavour: release (default), asan or tsan.
# usage: tools/build.sh [release|asan|tsan] [ninja targets...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
flavour="${1:-release}"
shift || true
case "$flavour" in
  release) opts=(-DCMAKE_BUILD_TYPE=Release) ;;
  # -O1 without -g (the level ASan's authors recommend): the sanitizer build
  # keeps its asserts, and its compile, most of CI's time, is far shorter.
  asan) opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1" -DSB_SANITIZE=address) ;;
  tsan) opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_SANITIZE=thread) ;;
  *) echo "tools/build.sh: unknown flavour '$flavour' (release, asan, tsan)" >&2; exit 2 ;;
esac
dir="$root/build/$flavour"
if [[ ! -f "$dir/build.ninja" ]]; then
  cmake -S "$root" -B "$dir" -G Ninja "${opts[@]}" >/dev/null
fi
ninja -C "$dir" "$@" >&2
