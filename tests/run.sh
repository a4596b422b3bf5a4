#!/usr/bin/env bash
# Runs every suite in tests/suites/*.sh and totals their results.
#
# A suite prints one line per check: "PASS <name>", "FAIL <name>: <why>"
# or "SKIP <name>: <why>" (a suite whose runtime is absent skips, saying
# why; it never passes silently). Other lines are shown as they are. A
# suite that exits non-zero without printing FAIL counts as one failure.
# The last line is "N passed, N failed[, N skipped]".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0 skip=0
for suite in tests/suites/*.sh; do
  name=$(basename "$suite" .sh)
  echo "== $name"
  out=$(bash "$suite" 2>&1); rc=$?
  p=$(grep -c '^PASS ' <<<"$out"); f=$(grep -c '^FAIL ' <<<"$out"); s=$(grep -c '^SKIP ' <<<"$out")
  grep -v '^PASS ' <<<"$out" | sed '/^$/d'
  echo "   $name: $p passed, $f failed, $s skipped"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: suite exited with status $rc"
    f=1
  fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ]; then
    echo "FAIL $name: suite ran no check"
    f=1
  fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
done
if [ "$skip" -gt 0 ]; then
  echo "$pass passed, $fail failed, $skip skipped"
else
  echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
