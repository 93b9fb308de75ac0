#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang under ASan and UBSan and
# runs each for a bounded time on a copy of its corpus (the committed corpus
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
mkdir -p "$out/obj"
cxx=(clang++ -std=c++20 -O1 -gline-tables-only -fno-omit-frame-pointer -D_FILE_OFFSET_BITS=64 -I"$root"
     -fsanitize=address,undefined -fno-sanitize-recover=undefined)

# Each target: its entry point, the parts' sources it links, extra libraries.
declare -A sources libs corpus
sources[schema]="constrain/*.cpp common/status.cpp"
sources[jinja]="jinja/*.cpp common/status.cpp"
sources[request]="server/protocols/request_parse.cpp server/protocols/json_fields.cpp server/protocols/responses/responses_parse.cpp server/protocols/anthropic/messages_parse.cpp
  engine/speculation.cpp constrain/*.cpp common/status.cpp common/json_shape.cpp"
sources[format]="bank/format.cpp bank/key.cpp runtime/state.cpp runtime/dtype.cpp common/status.cpp common/sha256.cpp"
sources[gguf]="gguf/reader.cpp gguf/split.cpp gguf/writer.cpp fs/mapped_file.cpp runtime/tensor_view.cpp model/checkpoint.cpp model/gguf_import.cpp
  model/gguf_layout.cpp model/gguf_metadata.cpp model/gguf_qwen4exp.cpp model/mtp_head.cpp model/config.cpp model/weights.cpp runtime/dtype.cpp
  model/qwen4exp.cpp model/ngram_hash.cpp runtime/quant.cpp runtime/quant_lowbit.cpp common/status.cpp"
sources[vocab]="gguf/reader.cpp gguf/split.cpp fs/mapped_file.cpp runtime/tensor_view.cpp gguf/vocab.cpp runtime/dtype.cpp
  tokenizer/*.cpp jinja/*.cpp common/status.cpp common/json_shape.cpp"
libs[format]="-lxxhash -lcrypto"
libs[gguf]="-lxxhash"
libs[jinja]="-lutf8proc"
libs[vocab]="-lxxhash -lutf8proc -lpcre2-8"
corpus[schema]="fuzz/corpus-schema"
corpus[jinja]="fuzz/corpus-jinja tests/tokenizer/data/templates"
corpus[request]="fuzz/corpus-request"
corpus[format]="fuzz/corpus"
corpus[gguf]="fuzz/corpus-gguf"
corpus[vocab]="fuzz/corpus-vocab"
targets=("$@")
((${#targets[@]})) || targets=(schema jinja request format gguf vocab)

# Objects of the parts, compiled once for every target that links them.
cd "$root" || exit 2
objects() {  # target -> object paths
  local f
  for f in ${sources[$1]}; do echo "$out/obj/${f//\//_}.o"; done
}
srcs=()
for t in "${targets[@]}"; do for f in ${sources[$t]}; do srcs+=("$f"); done; done
mapfile -t srcs < <(printf '%s\n' "${srcs[@]}" | sort -u)
# An object is rebuilt when its source is newer; every object when a header is.
stamp="$out/obj/.headers"
if [[ ! -f "$stamp" || -n "$(find "$root" \( -path "$root/build" -o -path "$root/.git" -o -path "$root/tools/npm" \) \
      -prune -o -name '*.h' -newer "$stamp" -print -quit)" ]]; then
  rm -f "$out"/obj/*.o
fi
touch "$stamp"
build_failed=0
printf '%s\n' "${srcs[@]}" | xargs -P "$(nproc)" -I{} bash -c '
  o="$1/obj/$(echo "$2" | tr / _).o"
  [ "$o" -nt "$2" ] || exec "${@:3}" -fsanitize=fuzzer-no-link -c "$2" -o "$o"' _ "$out" {} "${cxx[@]}" || build_failed=1

# One target: build it, run it on a copy of its corpus, write its line to $out/$t.result.
fuzz_target() {
  local t=$1 bin="$out/${1}_fuzz" work="$out/$1-corpus" log="$out/$1.log" seeds=0 d runs
  # shellcheck disable=SC2046,SC2086
  if ((build_failed)) || ! "${cxx[@]}" -fsanitize=fuzzer "fuzz/${t}_fuzz.cpp" $(objects "$t") ${libs[$t]:-} -o "$bin"; then
    echo "fuzz $t: BUILD FAILED" >"$out/$t.result"
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
