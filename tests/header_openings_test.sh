#!/usr/bin/env bash
# tools/header_openings.sh: the real tree passes; in a fixture tree a header
# opening with 16 comment lines is named and fails the check, one with 15
# passes, and so does a header whose long comment comes after its code
# begins (only the opening counts); a header that is all comment is judged too.
# usage: tests/header_openings_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
source "$(dirname "$0")/check_test_lib.sh"
check_test_init header_openings_test header_openings.sh "$@"

# A header opening with `lines` comment lines (a blank one among them, which
# does not count), then code, then `after` more comment lines.
write_header() {
  local file="$1" lines="$2" after="${3:-0}"
  mkdir -p "$(dirname "$file")"
  {
    echo "// line 1"
    echo ""
    for ((i = 2; i <= lines; ++i)); do echo "// line $i"; done
    echo "#pragma once"
    for ((i = 0; i < after; ++i)); do echo "// later $i"; done
    echo "int f();"
  } >"$file"
}
write_header "$work/engine/at_limit.h" 15 40
"$check" "$work" engine || fail "an opening of 15 lines, or a comment after the code, was refused"
write_header "$work/engine/over_limit.h" 16
out=$(refused "$work" engine) || exit 1
grep -q "engine/over_limit.h: an opening comment of 16 lines" <<<"$out" || fail "the report does not name it: $out"
! grep -q "at_limit" <<<"$out" || fail "the report names a header within the rule: $out"
rm "$work/engine/over_limit.h"
for ((i = 1; i <= 16; ++i)); do echo "// only comment $i"; done >"$work/engine/all_comment.h"
out=$(refused "$work" engine) || exit 1
grep -q "engine/all_comment.h: an opening comment of 16 lines" <<<"$out" || fail "the report does not name it: $out"
echo "header_openings_test: ok"
