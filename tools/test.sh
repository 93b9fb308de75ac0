#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the release and
# the sanitizer flavours, and runs the test suite (label `fast`; pass
# `--long` for the longer labelled runs too): release with `fast`, ASan+UBSan
# with `sanitize`, the libFuzzer targets of fuzz/ under ASan and UBSan for
# 15 s each (300 s with --long; tools/fuzz.sh), and ThreadSanitizer with
# `tsan` (the concurrency tests; only their binaries are built). Prints one closing
# line "N passed, N failed" over every ctest run and fuzz target.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
long=0
[[ "${1:-}" == "--long" ]] && long=1
"$root/tools/install-deps.sh" apt || exit 1
# The npm part (tokenizer data, reference clients) needs only the network:
# it runs while the release flavour compiles, and the first test run waits.
mkdir -p "$root/build"
"$root/tools/install-deps.sh" npm >"$root/build/install-npm.log" 2>&1 &
npm_pid=$!
npm_ready() {
  [[ -z "$npm_pid" ]] && return 0
  local rc=0
  wait "$npm_pid" || rc=$?
  npm_pid=""
  cat "$root/build/install-npm.log" >&2
  ((rc == 0)) || { echo "install-deps npm FAILED" >&2; exit 1; }
}
jobs=$(nproc)
passed=0
failed=0
run_suite() {  # flavour, ctest label regex
  local flavour=$1 labels=$2
  echo "== build $flavour" >&2
  local targets=()
  if [[ "$flavour" != release ]]; then
    # Only the binaries of the tests this flavour runs: a sanitizer build of
    # everything would double CI's compile time for nothing.
    "$root/tools/build.sh" "$flavour" sb_common >/dev/null 2>&1 || true
    mapfile -t targets < <(cd "$root/build/$flavour" && ctest -N -L "$labels" | awk '/Test +#[0-9]+:/ {print $3}')
  fi
  if ! "$root/tools/build.sh" "$flavour" "${targets[@]}"; then
    echo "build $flavour FAILED" >&2
    failed=$((failed + 1))
    return
  fi
  npm_ready
  echo "== test $flavour ($labels)" >&2
  local log="$root/build/$flavour/ctest.log"
  (cd "$root/build/$flavour" && ctest -L "$labels" -j "$jobs" --output-on-failure) 2>&1 | tee "$log"
  local total fails
  total=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  fails=$(grep -Eo '[0-9]+ tests failed out of' "$log" | grep -Eo '^[0-9]+' | tail -1)
  total=${total:-0}
  fails=${fails:-1}
  passed=$((passed + total - fails))
  failed=$((failed + fails))
}
run_fuzz() {  # the libFuzzer targets (tools/fuzz.sh), a bounded time each
  echo "== fuzz" >&2
  local log="$root/build/fuzz.log"
  mkdir -p "$root/build"
  "$root/tools/fuzz.sh" "$1" 2>&1 | tee "$log"
  local ok bad
  ok=$(grep -cE '^fuzz [a-z]+: .* no crash$' "$log")
  bad=$(grep -cE '^fuzz [a-z]+: .*FAILED' "$log")
  passed=$((passed + ok))
  failed=$((failed + bad))
  ((ok + bad > 0)) || failed=$((failed + 1))  # the script did not run
}
labels="fast"
((long)) && labels="fast|long"
run_suite release "$labels"
run_suite asan "sanitize"
# After the ASan suite: the fuzz targets link that build's libraries.
run_fuzz "$( ((long)) && echo 300 || echo 15)"
run_suite tsan "tsan"
npm_ready
echo "$passed passed, $failed failed"
((failed == 0))
