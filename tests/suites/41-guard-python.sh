#!/usr/bin/env bash
# Guards from Python (tests/python/test_guard.py) with Debian's
# /usr/bin/python3, not whatever python3 comes first on PATH: fail closed
# without the extension, the exactly-once recipe surviving a crash before
# COMMIT, and several processes racing on one key. The script prints
# PASS/FAIL/SKIP lines itself; it skips when that python cannot load
# extensions or $EXT is a sanitizer build with no plain build beside it.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh
if python_skip guard; then
  exit 0
fi
EXT=${EXT:-${BUILD:-build}/idempotency.so} exec "$PY" tests/python/test_guard.py
