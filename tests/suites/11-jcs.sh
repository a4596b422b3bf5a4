#!/usr/bin/env bash
# RFC 8785 conformance: the vectors in $SHARED/conformance/jcs (inputs,
# expected outputs, 10k ES6 number cases) through the pure canonicaliser.
# SHARED is relative to the project root unless absolute; the program
# prints SKIP when the directory is absent.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
if [ ! -x "$BUILD/test_jcs" ]; then
  echo "FAIL jcs: $BUILD/test_jcs is not built (run: make test-programs)"
  exit 1
fi
${TEST_WRAP:-} "$BUILD/test_jcs" "$SHARED/conformance/jcs"
