#!/usr/bin/env bash
# The extension from four language bindings (tests/bindings/): Debian's
# /usr/bin/python3 sqlite3, Node better-sqlite3 12 (pinned in
# tests/bindings/package.json; 13 crashes on Node 20), Tcl (libsqlite3-tcl)
# and Perl DBI + DBD::SQLite (libdbd-sqlite3-perl). Each loads the
# extension into a database file, claims, settles, replays, surfaces a
# refused key as that binding's error type with the extension's message,
# and uses INSERT INTO ledger + idem_last_claim. A binding whose runtime is
# absent skips, saying why; each prints the SQLite version it runs on.
#
# $EXT under build/asan (make sanitize) is an ASan build that these
# uninstrumented interpreters cannot load: build/idempotency.so is used
# instead when it exists, else every binding skips.
set -u
cd "$(dirname "$0")/../.." || exit 1
DIR=tests/bindings

. tests/lib/interp.sh
plain_ext bindings python node tcl perl

rc=0

# --- Python: Debian's /usr/bin/python3, not the first python3 on PATH ---------
if ! python_skip bindings; then
  run_checked bindings python "$PY" "$DIR/test_python.py" "$ext"
fi

# --- Node: better-sqlite3 12 from tests/bindings/node_modules ----------------
node_bsql bindings node "$DIR"
if [ "$node_ready" = 1 ]; then
  run_checked bindings node node "$DIR/test_node.mjs" "$ext"
fi

# --- Tcl: package require sqlite3 (libsqlite3-tcl) ------------------------------
if ! tcl_skip bindings; then
  run_checked bindings tcl tclsh "$DIR/test_tcl.tcl" "$ext"
fi

# --- Perl: DBI + DBD::SQLite -------------------------------------------------
if ! perl_skip bindings; then
  run_checked bindings perl perl "$DIR/test_perl.pl" "$ext"
fi

exit $rc
