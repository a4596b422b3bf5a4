#!/usr/bin/env bash
# The extension from four language bindings (tests/python, tests/js,
# tests/tcl, tests/perl): Debian's /usr/bin/python3 sqlite3, Node
# better-sqlite3 12 (pinned in tests/js/package.json; 13 crashes on Node
# 20), Tcl (libsqlite3-tcl)
# and Perl DBI + DBD::SQLite (libdbd-sqlite3-perl); and libSQL through the
# npm package libsql (its prebuilt binary, libSQL 3.45), with the Node test. Each loads the
# extension into a database file, claims, settles, replays, surfaces a
# refused key as that binding's error type with the extension's message,
# and uses INSERT INTO ledger + idem_last_claim. A binding whose runtime is
# absent skips, saying why; each prints the SQLite version it runs on.
#
# Then Ledger.call's heartbeat from the Python and Node packages
# (tests/python/test_heartbeat.py, tests/js/test_heartbeat.mjs), used as a
# user installs them: a copy of bindings/python with the extension on
# PYTHONPATH, and a staged copy of bindings/node with its platform package
# (tests/lib/nodepkg.sh) beside the test tree's better-sqlite3. Each kills
# a holder mid-action and waits for the lease its heartbeat kept (3 s).
#
# $EXT under build/asan (make sanitize) is an ASan build that these
# uninstrumented interpreters cannot load: build/idempotency.so is used
# instead when it exists, else every binding skips.
set -u
cd "$(dirname "$0")/../.." || exit 1
DIR=tests/js

. tests/lib/interp.sh
plain_ext bindings python node libsql tcl perl

rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- Python: Debian's /usr/bin/python3, not the first python3 on PATH ---------
if ! python_skip bindings; then
  run_checked bindings python "$PY" tests/python/test_python.py "$ext"
  mkdir -p "$tmp/python"
  cp -r bindings/python/sqlite_idempotency "$tmp/python/"
  find "$tmp/python" -name __pycache__ -prune -exec rm -rf {} +
  cp "$ext" "$tmp/python/sqlite_idempotency/idempotency.so"
  cp bindings/node/words.json "$tmp/python/sqlite_idempotency/"
  PYTHONPATH=$tmp/python PYTHONDONTWRITEBYTECODE=1 run_checked bindings heartbeat-python "$PY" tests/python/test_heartbeat.py
fi

# --- Node: better-sqlite3 12 from tests/js/node_modules ----------------------
node_bsql bindings node "$DIR"
if [ "$node_ready" = 1 ]; then
  run_checked bindings node node "$DIR/test_node.mjs" "$ext"
  # shellcheck source=tests/lib/nodepkg.sh
  . tests/lib/nodepkg.sh
  mkdir -p "$tmp/js/node_modules"
  cp "$DIR/test_heartbeat.mjs" "$DIR/checks.mjs" "$DIR/target.mjs" "$tmp/js/"
  for m in "$DIR"/node_modules/*; do
    ln -s "$PWD/$m" "$tmp/js/node_modules/"
  done
  rm -f "$tmp/js/node_modules/sqlite-idempotency" "$tmp/js/node_modules/sqlite-idempotency-"*
  stage_node_pkg "$tmp/js/node_modules" "$ext"
  run_checked bindings heartbeat node "$tmp/js/test_heartbeat.mjs"
fi

# --- libSQL: the npm package libsql (prebuilt per platform) -------------------
if [ "$node_ready" != 1 ]; then
  echo "SKIP bindings.libsql: needs node and $DIR/node_modules, as bindings.node (see above)"
elif [ ! -f "$DIR/node_modules/libsql/package.json" ]; then
  echo "FAIL bindings.libsql: $DIR/node_modules lacks libsql (run npm ci in $DIR)"
  rc=1
elif ! (cd "$DIR" && node -e 'require("libsql")') >/dev/null 2>&1; then
  echo "SKIP bindings.libsql: libsql has no prebuilt binary for $(node -p 'process.platform + "-" + process.arch') here: $(cd "$DIR" && node -e 'require("libsql")' 2>&1 | grep -m1 Error)"
else
  run_checked bindings libsql node "$DIR/test_node.mjs" "$ext" libsql
fi

# --- Tcl: package require sqlite3 (libsqlite3-tcl) ------------------------------
if ! tcl_skip bindings; then
  run_checked bindings tcl tclsh tests/tcl/test_tcl.tcl "$ext"
fi

# --- Perl: DBI + DBD::SQLite -------------------------------------------------
if ! perl_skip bindings; then
  run_checked bindings perl perl tests/perl/test_perl.pl "$ext"
fi

exit $rc
