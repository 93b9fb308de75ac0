#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (in the ASan flavour: clang, ASan and
# UBSan) and runs each for a bounded time on a copy of its corpus (the committed corpus
# is never written). Part of the README's test command (tools/test.sh).
# usage: tools/fuzz.sh [SECONDS per target, default 20] [TARGET...]
# Prints one line per target ("fuzz NAME: ... no crash" or "... FAILED"); exits non-zero when a
# target failed to build or found a crash, a leak, undefined behaviour or a
# timeout (the input is kept under build/fuzz/NAME-crashes/).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"
shift || true
# A fixed seed by default, so that a run's mutations are the same on every
# machine (a finding reproduces); SB_FUZZ_SEED=0 draws a random one.
seed="${SB_FUZZ_SEED:-1}"
out="$root/build/fuzz"
mkdir -p "$out"
# The targets are built in the ASan flavour (fuzz/CMakeLists.txt), which
# compiles with clang under ASan, UBSan and the fuzzer's coverage.
declare -A corpus
corpus[schema]="fuzz/corpus-schema"
corpus[jinja]="fuzz/corpus-jinja tests/tokenizer/data/templates"
corpus[request]="fuzz/corpus-request"
corpus[format]="fuzz/corpus"
corpus[gguf]="fuzz/corpus-gguf"
corpus[vocab]="fuzz/corpus-vocab"
targets=("$@")
((${#targets[@]})) || targets=(schema jinja request format gguf vocab)
cd "$root" || exit 2
build_failed=0
"$root/tools/build.sh" asan "${targets[@]/%/_fuzz}" >"$out/build.log" 2>&1 || build_failed=1

# One target: run it on a copy of its corpus, write its line to $out/$t.result.
fuzz_target() {
  local t=$1 bin="$root/build/asan/fuzz/${1}_fuzz" work="$out/$1-corpus" log="$out/$1.log" seeds=0 d runs
  if ((build_failed)) || [[ ! -x "$bin" ]]; then
    echo "fuzz $t: BUILD FAILED (log $out/build.log)" >"$out/$t.result"
    return
  fi
  rm -rf "$work" "$out/$t-crashes"
  mkdir -p "$work" "$out/$t-crashes"
  for d in ${corpus[$t]}; do cp "$d"/* "$work"/ && seeds=$((seeds + $(ls "$d" | wc -l))); done
  if "$bin" -seed="$seed" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
      -artifact_prefix="$out/$t-crashes/" "$work" >"$log" 2>&1; then
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$')
    echo "fuzz $t: ${secs} s, ${runs:-?} runs, corpus $seeds seeds -> $(ls "$work" | wc -l) inputs, no crash" >"$out/$t.result"
  else
    { echo "fuzz $t: FAILED (log $log, input in $out/$t-crashes/)"
      grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5; } >"$out/$t.result"
  fi
}

# libFuzzer runs one target on one core: as many targets at once as there are cores.
rm -f "$out"/*.result
running=0
for t in "${targets[@]}"; do
  if ((running >= $(nproc))); then wait -n; running=$((running - 1)); fi
  fuzz_target "$t" &
  running=$((running + 1))
done
wait
passed=0
failed=0
for t in "${targets[@]}"; do
  cat "$out/$t.result"
  if grep -q "no crash$" "$out/$t.result"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz: $passed of $((passed + failed)) targets without a finding"
((failed == 0))
