#!/usr/bin/env bash
# Allocation failure: $BUILD/oom (tests/c/oom.c) installs a failing
# allocator before sqlite3_initialize and, for every ledger operation, fails
# its 1st, 2nd, 3rd, ... allocation in turn: each run must return
# SQLITE_NOMEM (or succeed like an unfaulted run), leave the database and
# the transaction state unchanged on failure, leak nothing, and leave no
# allocation live after sqlite3_shutdown. Every N up to --dense is tried,
# then a stride within --budget runs per operation; sanitized and valgrind
# runs use smaller numbers to stay short.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog oom
if [ -n "${TEST_WRAP:-}" ]; then
  size=(--dense 5 --budget 3)
elif [ -n "${SANITIZE:-}" ] || [[ "$BUILD" == *asan* ]]; then
  size=(--dense 100 --budget 40)
else
  size=(--dense 300 --budget 150)
fi
# shellcheck disable=SC2086  # TEST_WRAP is a command line
${TEST_WRAP:-} "$prog" --ext "$EXT" --dir "$tmp" "${size[@]}"
