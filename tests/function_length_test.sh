#!/usr/bin/env bash
# tools/function_length.sh: the real tree passes; in a fixture tree a
# function of 81 lines is named and fails the check, one of 80 passes, and
# a long one under runtime/cpu/ (the kernels) is not counted.
# usage: tests/function_length_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
source "$(dirname "$0")/check_test_lib.sh"
check_test_init function_length_test function_length.sh "$@"

# A function whose signature, body and closing brace take `lines` lines.
write_function() {
  local file="$1" name="$2" lines="$3"
  mkdir -p "$(dirname "$file")"
  {
    echo "int $name(int x) {"
    for ((i = 0; i < lines - 3; ++i)); do echo "  x += $i;"; done
    echo "  return x;"
    echo "}"
  } >>"$file"
}
write_function "$work/engine/long.cpp" at_limit 80
write_function "$work/runtime/cpu/kernel.cpp" long_kernel 200
"$check" "$work" engine runtime || fail "a function of 80 lines, or a kernel, was refused"
write_function "$work/engine/long.cpp" over_limit 81
out=$(refused "$work" engine runtime) || exit 1
grep -q "engine/long.cpp:[0-9]*: over_limit is 81 lines" <<<"$out" || fail "the report does not name it: $out"
! grep -q "at_limit\|long_kernel" <<<"$out" || fail "the report names a function within the rules: $out"
echo "function_length_test: ok"
