#!/usr/bin/env bash
# The SQL test files tests/sql/0*.sql, run by the runner $BUILD/sqltest
# against the extension $EXT (each file on a fresh connection, in its own
# process). The runner
# prints PASS/FAIL per check; this suite adds a check that the three
# plain-grammar files share one case table.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
runner=$BUILD/sqltest

# The case block of the plain-grammar files (from the "shared cases" marker
# to the end) must be byte-identical in the UTF-8 and both UTF-16 files.
shared() { sed -n '/^-- ==== shared cases/,$p' "$1"; }
files=(tests/sql/0*-plain-grammar-*.sql)
if [ "${#files[@]}" -ne 3 ]; then
  echo "FAIL sql:plain-grammar-files: expected 3 (utf8, utf16le, utf16be), found ${#files[@]}"
else
  ref=$(shared "${files[0]}")
  same=1
  for f in "${files[@]:1}"; do
    [ "$(shared "$f")" = "$ref" ] || { echo "FAIL sql:plain-grammar-shared: $f differs from ${files[0]}"; same=0; }
  done
  if [ -z "$ref" ]; then
    echo "FAIL sql:plain-grammar-shared: no '-- ==== shared cases' block in ${files[0]}"
  elif [ "$same" = 1 ]; then
    echo "PASS sql:plain-grammar-shared"
  fi
fi

if [ ! -x "$runner" ]; then
  echo "FAIL sql:runner: $runner is missing (make test-programs)"
  exit 1
fi
if [ ! -f "$EXT" ]; then
  echo "FAIL sql:extension: $EXT is missing (make)"
  exit 1
fi
# One runner process per file, so that a crash (or a sanitizer report)
# is pinned to its file and does not hide the files after it.
for f in tests/sql/*.sql; do
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(${TEST_WRAP:-} "$runner" --ext "$EXT" "$f" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  if [ "$rc" -eq 99 ]; then
    echo "FAIL $(basename "$f"): memory errors or leaks reported under TEST_WRAP (status 99)"
  elif [ "$rc" -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then
    echo "FAIL $(basename "$f"): the runner exited with status $rc without reporting a failed check"
  fi
done
