#!/usr/bin/env bash
# make model-long (and make fuzz): a million model steps (MODEL_STEPS), in
# WAL and DELETE mode, from MODEL_SEED (default: the time), with the same
# MODEL_AVOID list as tests/suites/34-model.sh (set it empty to meet the
# known disagreements too).
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
steps=${MODEL_STEPS:-1000000}
seed=${MODEL_SEED:-$(date +%s)}
avoid=${MODEL_AVOID-sentorder}
dir=$(mktemp -d "${TMPDIR:-/tmp}/model-long.XXXXXX")
if [ -d /dev/shm ] && [ -w /dev/shm ]; then rmdir "$dir"; dir=$(mktemp -d /dev/shm/model-long.XXXXXX); fi
trap 'rm -rf "$dir"' EXIT
rc=0
for mode in wal delete; do
  "$BUILD/model" --ext "$EXT" --db "$dir/long-$mode.db" --mode "$mode" --seed "$seed" \
    --steps "$steps" --shrink-seconds 300 ${avoid:+--avoid "$avoid"} || rc=1
done
exit $rc
