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
node_ready=0
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP adapters.node: node is not installed"
elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "SKIP adapters.node: node $(node --version) is older than better-sqlite3 12 supports (20+)"
elif [ -z "$server_py" ]; then
  echo "SKIP adapters.node: no python3 to run the test server $DIR/test_server.py"
elif [ ! -f "$NODE_DIR/node_modules/better-sqlite3/package.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP adapters.node: npm is not installed (needed to install better-sqlite3 in $NODE_DIR)"
  elif (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
    node_ready=1
  else
    echo "FAIL adapters.node: npm ci could not install better-sqlite3 in $NODE_DIR"
    rc=1
  fi
else
  node_ready=1
fi
if [ "$node_ready" = 1 ]; then
  v=$(cd "$NODE_DIR" && node -p 'require("better-sqlite3/package.json").version' 2>/dev/null)
  case "$v" in
    12.*) run_checked adapters node node "$DIR/test_adapter_node.mjs" "$ext" "$server_py" ;;
    *) echo "FAIL adapters.node: $NODE_DIR/node_modules has better-sqlite3 '${v}', not 12.x (run npm ci in $NODE_DIR)"; rc=1 ;;
  esac
fi

exit $rc
