# Sourced by the checks that walk the product's parts (function_length.sh,
# header_openings.sh): reads `[--max N] [ROOT [PART...]]` into `max`, `root`
# and `existing` (the named parts present under ROOT), and cds into ROOT.
# ROOT defaults to the repository, PART to the product's parts.
# usage: parse_parts_args NAME DEFAULT_MAX "$@"
parse_parts_args() {
  local name="$1"
  max="$2"
  shift 2
  if [[ "${1:-}" == --max ]]; then max="$2"; shift 2; fi
  root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
  shift || true
  local parts=("$@")
  ((${#parts[@]})) || parts=(bank bench cli common constrain engine fs gguf jinja model runtime server tokenizer)
  cd "$root" 2>/dev/null || { echo "$name: no tree at $root" >&2; exit 2; }
  existing=()
  local p
  for p in "${parts[@]}"; do [[ -d "$p" ]] && existing+=("$p"); done
  ((${#existing[@]})) || { echo "$name: none of ${parts[*]} is under $root" >&2; exit 2; }
}
