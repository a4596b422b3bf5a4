#!/usr/bin/env bash
# C unit tests of the pure helpers (canonicaliser, key grammar, digest),
# linked without SQLite. Built by `make test-programs` into $BUILD.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
rc=0
for prog in test_canonical test_grammar; do
  if [ ! -x "$BUILD/$prog" ]; then
    echo "FAIL unit.$prog: $BUILD/$prog is not built (run: make test-programs)"
    rc=1
    continue
  fi
  ${TEST_WRAP:-} "$BUILD/$prog" || rc=1
done
exit $rc
