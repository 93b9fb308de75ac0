# Sourced by the tests of the tree checks (function_length_test.sh,
# header_openings_test.sh): `fail` names the test, `refused` runs the check
# on a fixture tree, insists that it exits 1 (offenders found) and prints
# its report for the caller to match.
# check_test_init also sets `src`, `work` and `check`, runs the check on the
# real tree (which must pass) and empties the fixture folder.
# usage: check_test_init TEST_NAME TOOL SOURCE_DIR WORK_DIR
check_test_init() {
  test_name="$1"
  src="$3"
  work="$4"
  check="$src/tools/$2"
  "$check" "$src" || fail "the source tree breaks the rule (above)"
  rm -rf "$work"
}
fail() { echo "$test_name: $*" >&2; exit 1; }
# usage: out=$(refused ARGS...) || exit 1
refused() {
  local out rc
  set +e
  out=$("$check" "$@")
  rc=$?
  set -e
  [[ $rc -eq 1 ]] || fail "the check passed, or failed to run, on a tree that breaks the rule (exit $rc): $out"
  printf '%s\n' "$out"
}
