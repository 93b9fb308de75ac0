#!/usr/bin/env bash
# Lists every header whose opening comment (the comment lines before its
# first line of code) is longer than the limit (15 lines) in the product's
# parts. A header's opening says what it promises, in a few lines; the
# reasoning and the rules in full belong to the docs/ page of its part.
# Exit 1 when any is found.
# usage: tools/header_openings.sh [--max N] [ROOT [PART...]]
#   ROOT: the tree (default: the repository); PART: folders under it
#   (default: the product's parts, as tools/function_length.sh counts them).
set -euo pipefail
source "$(dirname "$0")/parts_args.sh"
parse_parts_args header_openings 15 "$@"
long=$(find "${existing[@]}" -name '*.h' -type f -print0 | sort -z |
  xargs -0 awk -v max="$max" '
    function judge() { if (file != "" && n > max) printf "%s: an opening comment of %d lines (limit %d)\n", file, n, max }
    FNR == 1 { if (!done) judge(); file = FILENAME; n = 0; done = 0 }
    done { next }
    /^[[:space:]]*\/\// { ++n; next }
    /^[[:space:]]*$/ { next }
    { done = 1; judge() }
    END { if (!done) judge() }')
if [[ -n "$long" ]]; then
  echo "$long"
  exit 1
fi
echo "header_openings: no header opening over $max lines in ${existing[*]}"
