#!/usr/bin/env bash
# The README's main command: installs what is missing, builds the release
# binary and runs it with the given arguments, e.g.
#   tools/statebank.sh serve --model demo
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" release statebank
exec "$root/build/release/statebank" "$@"
