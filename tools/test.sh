#!/usr/bin/env bash
# The README's test command: installs what is missing, builds the release and
# the sanitizer flavours, and runs the test suite (label `fast`; pass
# `--long` for the longer labelled runs too): release with `fast`, ASan+UBSan
# with `sanitize`, the libFuzzer targets of fuzz/ under ASan and UBSan for
# 15 s each (300 s with --long; tools/fuzz.sh), and ThreadSanitizer with
# `tsan` (the concurrency tests; only their binaries are built); each sanitizer
# flavour compiles at nice 19 while the tests before it run. Prints one closing
# line "N passed, N failed" over every ctest run and fuzz target.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
long=0
[[ "${1:-}" == "--long" ]] && long=1
start=$SECONDS
phase() { echo "== $* (at $((SECONDS - start)) s)" >&2; }
"$root/tools/install-deps.sh" build || exit 1
# What only the tests need (servers, clang, node, chromium, then the npm
# packages) installs while the release flavour compiles; the first test run
# waits for it.
mkdir -p "$root/build"
("$root/tools/install-deps.sh" apt && "$root/tools/install-deps.sh" npm) >"$root/build/install-deps.log" 2>&1 &
deps_pid=$!
deps_ready() {
  [[ -z "$deps_pid" ]] && return 0
  local rc=0
  wait "$deps_pid" || rc=$?
  deps_pid=""
  cat "$root/build/install-deps.log" >&2
  ((rc == 0)) || { echo "install-deps FAILED" >&2; exit 1; }
  phase "test tools installed"
}
jobs=$(nproc)
passed=0
failed=0
build_flavour() {  # flavour, ctest label regex
  local flavour=$1 labels=$2 targets=()
  if [[ "$flavour" != release ]]; then
    # Only the binaries of the tests this flavour runs: a sanitizer build of
    # everything would double CI's compile time for nothing.
    "$root/tools/build.sh" "$flavour" sb_common >/dev/null 2>&1 || true
    mapfile -t targets < <(cd "$root/build/$flavour" && ctest -N -L "$labels" | awk '/Test +#[0-9]+:/ {print $3}')
  fi
  "$root/tools/build.sh" "$flavour" "${targets[@]}"
}
# The next flavour compiles at the lowest priority while a flavour's tests
# run: the tests leave the cores idle much of the time (waiting on servers,
# sockets and child processes), and the compile takes what they leave. Its
# own build step then only finishes it (and reports any error).
declare -A early_build=()
build_early() {  # flavour, ctest label regex
  (renice -n 19 "$BASHPID" >/dev/null; build_flavour "$1" "$2") >"$root/build/$1-early-build.log" 2>&1 &
  early_build[$1]=$!
}
run_suite() {  # flavour, ctest label regex [, the next flavour and its labels, compiled meanwhile]
  local flavour=$1 labels=$2
  # The sanitizer flavours compile with clang, which installs beside the release build.
  [[ "$flavour" == release ]] || deps_ready
  phase "build $flavour"
  [[ -n "${early_build[$flavour]:-}" ]] && { wait "${early_build[$flavour]}" || true; }
  if ! build_flavour "$flavour" "$labels"; then
    echo "build $flavour FAILED" >&2
    failed=$((failed + 1))
    return
  fi
  deps_ready
  [[ $# -ge 4 ]] && build_early "$3" "$4"
  phase "test $flavour ($labels)"
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
  phase "fuzz"
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
run_suite release "$labels" asan "sanitize"
run_suite asan "sanitize" tsan "tsan"
# After the ASan suite: the fuzz targets link that build's libraries.
run_fuzz "$( ((long)) && echo 300 || echo 15)"
run_suite tsan "tsan"
deps_ready
phase "done"
echo "$passed passed, $failed failed"
((failed == 0))
