#!/usr/bin/env bash
# Runs the unit tests (GoogleTest) and the CLI tests (bats), then prints one closing line
# "N passed, N failed, N skipped". Exit status 0 only when nothing failed.
#   tests/run-all.sh [--only-bats] [BATS_FILE...]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
export BUILD PYTHON="${PYTHON:-/usr/bin/python3}"
only_bats=0
[ "${1:-}" = "--only-bats" ] && { only_bats=1; shift; }
passed=0 failed=0 skipped=0
log_dir="$BUILD/test-logs"
mkdir -p "$log_dir"

if [ $only_bats -eq 0 ] && [ -x "$BUILD/tests/unit_tests" ]; then
  echo "== unit tests ($BUILD/tests/unit_tests)"
  "$BUILD/tests/unit_tests" --gtest_brief=1 2>&1 | tee "$log_dir/unit.log"
  rc=${PIPESTATUS[0]}
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log_dir/unit.log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log_dir/unit.log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log_dir/unit.log" | tail -1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
  [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ] && failed=$((failed + 1))  # crashed before its summary
fi

files=("$@")
[ ${#files[@]} -eq 0 ] && files=(tests/bats/*.bats)
for f in "${files[@]}"; do
  echo "== $f"
  bats --formatter tap "$f" 2>&1 | tee "$log_dir/$(basename "$f").log"
  p=$(grep -cE '^ok [0-9]+' "$log_dir/$(basename "$f").log")
  s=$(grep -cE '^ok [0-9]+ .*# skip' "$log_dir/$(basename "$f").log")
  n=$(grep -cE '^not ok [0-9]+' "$log_dir/$(basename "$f").log")
  passed=$((passed + p - s)); skipped=$((skipped + s)); failed=$((failed + n))
  # A bats file that fails to load prints no "not ok" but exits non-zero.
  [ "${PIPESTATUS[0]}" -ne 0 ] && [ "$n" -eq 0 ] && failed=$((failed + 1))
done

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
