#!/usr/bin/env bash
# The adapter examples as tests (tests/adapters/): a Python adapter
# (idem_adapter.py, standard library only) and a Node adapter
# (idem_adapter.mjs, better-sqlite3 12 from tests/bindings/node_modules)
# wrap a tool call that POSTs to a local HTTP target (test_server.py on
# 127.0.0.1, ephemeral port) with the key as an sf-string Idempotency-Key:
# success, replay, timeout -> unknown and never retried, connection refused
# -> released and retried, and concurrent callers; the target counts every
# key and must see each exactly once. A runtime that is absent skips,
# saying why.
#
# $EXT under build/asan (make sanitize) is an ASan build that these
# uninstrumented interpreters cannot load: build/idempotency.so is used
# instead when it exists, else both adapters skip.
set -u
cd "$(dirname "$0")/../.." || exit 1
DIR=tests/adapters
NODE_DIR=tests/bindings

. tests/lib/interp.sh
plain_ext adapters python node

rc=0

# --- Python: Debian's /usr/bin/python3 (the test server runs in-process) -------
if ! python_skip adapters; then
  run_checked adapters python "$PY" "$DIR/test_adapter_py.py" "$ext"
fi

# --- Node: better-sqlite3 12 from tests/bindings; test_server.py via Python ----
server_py=""
if [ -x "$PY" ]; then server_py=$PY; elif command -v python3 >/dev/null 2>&1; then server_py=$(command -v python3); fi
if [ -z "$server_py" ]; then
  echo "SKIP adapters.node: no python3 to run the test server $DIR/test_server.py"
else
  node_bsql adapters node "$NODE_DIR"
  if [ "$node_ready" = 1 ]; then
    run_checked adapters node node "$DIR/test_adapter_node.mjs" "$ext" "$server_py"
  fi
fi

exit $rc
