#!/usr/bin/env bash
# Lists every function longer than the limit (80 lines, signature to closing
# brace) in the product's parts, the kernels (runtime/cpu/) excepted: their
# loops are long on purpose (docs/kernels.md). Exit 1 when any is found.
# Functions are found by universal-ctags (tools/install-deps.sh), which
# reports each definition's first and last line.
# usage: tools/function_length.sh [--max N] [ROOT [PART...]]
#   ROOT: the tree (default: the repository); PART: folders under it
#   (default: the product's parts). bench/'s standalone programs
#   (*_bench.cpp) are measurements, not what ships, and are not counted;
#   its workloads (`statebank bench`) are.
set -euo pipefail
source "$(dirname "$0")/parts_args.sh"
parse_parts_args function_length 80 "$@"
command -v ctags >/dev/null || { echo "function_length: ctags is missing (apt install universal-ctags)" >&2; exit 2; }
long=$(ctags -R --languages=C++ --langmap=C++:+.h --kinds-C++=f --fields=+ne --exclude=runtime/cpu --exclude='bench/*_bench.cpp' -o - "${existing[@]}" |
  awk -F'\t' -v max="$max" '{
    first = 0; last = 0
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) first = substr($i, 6)
      if ($i ~ /^end:/) last = substr($i, 5)
    }
    n = last - first + 1
    if (last > 0 && n > max) printf "%s:%d: %s is %d lines (limit %d)\n", $2, first, $1, n, max
  }' | sort)
if [[ -n "$long" ]]; then
  echo "$long"
  exit 1
fi
echo "function_length: no function over $max lines in ${existing[*]}"
