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
  # TSan likewise: -O1 compiles far faster and keeps stacks readable.
  tsan) opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1" -DSB_SANITIZE=thread) ;;
  *) echo "tools/build.sh: unknown flavour '$flavour' (release, asan, tsan)" >&2; exit 2 ;;
esac
# A compiler cache where one is installed (developer machines; CI has none).
command -v ccache >/dev/null 2>&1 && opts+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
dir="$root/build/$flavour"
# Configure whenever the options differ from the ones this directory was
# configured with, so a changed flag is never silently ignored.
stamp="$dir/.sb-configure-options"
# The cache goes too, so an option dropped from this script is dropped from the
# build, not kept from the cache (objects whose command lines stay the same
# are not rebuilt).
if [[ ! -f "$dir/build.ninja" || "$(cat "$stamp" 2>/dev/null)" != "${opts[*]}" ]]; then
  rm -f "$dir/CMakeCache.txt"
  cmake -S "$root" -B "$dir" -G Ninja "${opts[@]}" >/dev/null
  printf '%s' "${opts[*]}" >"$stamp"
fi
ninja -C "$dir" "$@" >&2
