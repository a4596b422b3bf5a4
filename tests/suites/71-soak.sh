#!/usr/bin/env bash
# A five-second smoke of the soak (tests/stress/soak.py, run in full by
# make soak): four workers' mixed load on one ledger file, a worker killed
# with SIGKILL every second and restarted, then the soak's own checks (no
# external call sent twice, no local row written twice, no told claim or
# settle lost, integrity_check, the package's check command). The smoke
# keeps the program from rotting; the soak itself is the long run. Skips
# where Debian's python3 cannot load extensions.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh
[ -z "${TEST_WRAP:-}" ] || { echo "SKIP soak: runs in make test only: the workers are python processes, not run under valgrind"; exit 0; }
plain_ext soak python
python_skip soak && exit 0
rc=0
dir=${BUILD:-build}/soak-smoke
rm -rf "$dir"
mkdir -p "$dir"
EXT=$ext SOAK_SECONDS=${SOAK_SECONDS:-5} SOAK_INTERVAL=1 SOAK_KILL_EVERY=1 SOAK_WORKERS=4 \
  run_checked soak smoke "$PY" tests/stress/soak.py --db "$dir/soak.db"
st=$rc
[ "$st" = 0 ] && rm -rf "$dir"
exit "$st"
