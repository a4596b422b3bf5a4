#!/usr/bin/env bash
# I/O faults: $BUILD/faults (tests/c/faults.c) fails the N-th write,
# the N-th sync, or fills the disk from the N-th write on, for every N of a
# claim, a settle, the guarded local recipe, a retention purge, idem_purge
# and idem_upgrade of the format-1 fixture, in WAL and DELETE mode: each
# fails with an I/O error or succeeds, the file reopened without the
# extension passes integrity_check and holds exactly the state before or
# after, no committed claim is lost, and the next operation works. A
# control run on a lying disk (a write answered OK and lost) must be caught.
# In WAL mode, lost-settle reads the disk a power loss leaves (the files as
# of their last sync) after an autocommit settle at synchronous=FULL: the
# settle is lost and reads unknown, never admitted again, until the next
# synced commit carries it.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog faults
# a tmpfs keeps the hundreds of synced runs from waiting on a disk
dir=$tmp
if [ -d /dev/shm ] && [ -w /dev/shm ]; then dir=$(mktemp -d /dev/shm/faults.XXXXXX); fi
# under valgrind (TEST_WRAP) only the guarded recipe is swept, in both modes
only=()
if [ -n "${TEST_WRAP:-}" ]; then only=(--only recipe); fi
rc=0
for mode in wal delete; do
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  ${TEST_WRAP:-} "$prog" --ext "$EXT" --dir "$dir" --mode "$mode" \
    --fixture tests/fixtures/format1.db "${only[@]}" || rc=1
  # shellcheck disable=SC2086
  ${TEST_WRAP:-} "$prog" --ext "$EXT" --dir "$dir" --mode "$mode" --control || rc=1
done
[ "$dir" = "$tmp" ] || rm -rf "$dir"
exit $rc
