#!/usr/bin/env bash
# Clock skew: $BUILD/skew (tests/c/skew.c) runs a holder whose VFS
# clock is behind and a taker whose clock is ahead against one ledger file:
# a take-over never comes earlier than lease_until minus the skew by the
# holder's clock (exactly that early, the bound docs/leases.md states), and
# the holder's renewal right before sending is refused after it.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog skew
# shellcheck disable=SC2086  # TEST_WRAP is a command line
${TEST_WRAP:-} "$prog" --ext "$EXT" --db "$tmp/skew.db"
