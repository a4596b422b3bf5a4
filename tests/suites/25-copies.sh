#!/usr/bin/env bash
# Copies of a database holding a ledger (tests/python/test_copies.py):
# the shell's .clone (then CREATE VIRTUAL TABLE adopts the shadow tables),
# .dump and .recover restored by a shell without the extension, Python's
# iterdump (and its filtered restore), VACUUM INTO, the backup API. Uses
# Debian's /usr/bin/python3 and the sqlite3 shell; skips, saying why, when
# they are absent or cannot load extensions.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh
if python_skip copies; then
  exit 0
fi
EXT=${EXT:-${BUILD:-build}/idempotency.so} exec "$PY" tests/python/test_copies.py
