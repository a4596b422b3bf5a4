#!/usr/bin/env bash
# Copies of a database holding a ledger (tests/lifecycle/test_copies.py):
# the shell's .clone (then CREATE VIRTUAL TABLE adopts the shadow tables),
# .dump and .recover restored by a shell without the extension, Python's
# iterdump (and its filtered restore), VACUUM INTO, the backup API. Uses
# Debian's /usr/bin/python3 and the sqlite3 shell; skips, saying why, when
# they are absent or cannot load extensions.
set -u
cd "$(dirname "$0")/../.." || exit 1
PY=/usr/bin/python3
if [ ! -x "$PY" ]; then
  echo "SKIP copies: $PY is not installed (Debian: apt-get install python3)"
  exit 0
fi
if ! "$PY" -c 'import sqlite3, sys; sys.exit(0 if hasattr(sqlite3.connect(":memory:"), "enable_load_extension") else 1)' 2>/dev/null; then
  echo "SKIP copies: $PY's sqlite3 module lacks enable_load_extension"
  exit 0
fi
EXT=${EXT:-${BUILD:-build}/idempotency.so} exec "$PY" tests/lifecycle/test_copies.py
