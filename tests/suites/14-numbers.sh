#!/usr/bin/env bash
# Differential test of the number conversions ($BUILD/num_cli, linked with
# the pure sources) against Node's JSON.stringify / JSON.parse: every power
# of two and its neighbours, a million random doubles, ties and random
# decimals (see tests/js/numbers.mjs). Needs node only (no npm package);
# skips, saying why, when node is absent.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP numbers: node is not installed (needed for its JSON.stringify)"
  exit 0
fi
if [ ! -x "$BUILD/num_cli" ]; then
  echo "FAIL numbers: $BUILD/num_cli is not built (run: make test-programs)"
  exit 1
fi
# Under valgrind or the sanitizers (TEST_WRAP / SANITIZE) a tenth of the
# random doubles keeps the run short; NUM_RANDOM set by the caller wins.
if [ -n "${TEST_WRAP:-}${SANITIZE:-}" ]; then
  export NUM_RANDOM=${NUM_RANDOM:-100000}
fi
node tests/js/numbers.mjs "$BUILD/num_cli"
