#!/usr/bin/env bash
# Differential test: our canonicaliser ($BUILD/jcs_cli) against the npm
# package canonicalize (version pinned in tests/js/package-lock.json) on
# 10,000 generated documents. Installs tests/js/node_modules when
# missing; skips, saying why, when node or npm is absent.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DIR=tests/js
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP diff: node is not installed (needed to run canonicalize)"
  exit 0
fi
# canonicalize 5.x calls String.prototype.isWellFormed (Node 20+).
if ! node -e 'process.exit(typeof "".isWellFormed === "function" ? 0 : 1)' 2>/dev/null; then
  echo "SKIP diff: node $(node --version) is too old for canonicalize (needs String.prototype.isWellFormed, Node 20+)"
  exit 0
fi
if [ ! -x "$BUILD/jcs_cli" ]; then
  echo "FAIL diff: $BUILD/jcs_cli is not built (run: make test-programs)"
  exit 1
fi
if [ ! -f "$DIR/node_modules/canonicalize/package.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP diff: npm is not installed (needed to install canonicalize)"
    exit 0
  fi
  if ! (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1 ||
        npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
    echo "FAIL diff: npm could not install canonicalize in $DIR (npm ci / npm install failed)"
    exit 1
  fi
fi
# TEST_WRAP (e.g. valgrind) stays in the environment; diff.mjs puts it
# in front of jcs_cli.
node "$DIR/diff.mjs" "$BUILD/jcs_cli"
