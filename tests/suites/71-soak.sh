#!/usr/bin/env bash
# A five-second smoke of the soak (tests/python/soak.py, run in full by
# make soak): four workers' mixed load on one ledger file, a worker killed
# with SIGKILL every second and restarted, then the soak's own checks (no
# external call sent twice, no local row written twice, no told claim or
# settle lost, integrity_check, the package's check command). Then the
# checks once more on a copy of the files with a call sent twice and a
# guarded row removed: they must fail, naming the key. The smoke keeps the
# program from rotting; the soak itself is the long run. Skips where
# Debian's python3 cannot load extensions, and under make sanitize and make
# valgrind (python processes on the uninstrumented extension: the same test).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh
case "${EXT:-}" in
  *build/asan/*) echo "SKIP soak: runs in make test only: the workers are python processes that load the uninstrumented build/idempotency.so"; exit 0 ;;
esac
[ -z "${TEST_WRAP:-}" ] || { echo "SKIP soak: runs in make test only: the workers are python processes, not run under valgrind"; exit 0; }
plain_ext soak python
python_skip soak && exit 0
rc=0
dir=${BUILD:-build}/soak-smoke
rm -rf "$dir"
mkdir -p "$dir/run" "$dir/tampered"
db=$dir/run/soak.db
EXT=$ext SOAK_SECONDS=${SOAK_SECONDS:-5} SOAK_INTERVAL=1 SOAK_KILL_EVERY=1 SOAK_WORKERS=4 \
  run_checked soak smoke "$PY" tests/python/soak.py --db "$db"

# the checks can fail: a send repeated, a guarded row gone
if [ -f "$db" ]; then
  cp "$dir"/run/* "$dir/tampered/"
  t=$dir/tampered/soak.db
  keys=$("$PY" - "$t" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("ATTACH ? AS target", (sys.argv[1] + ".target",))
sent = db.execute("SELECT key, token, pid FROM target.sent LIMIT 1").fetchone()
db.execute("INSERT INTO target.sent VALUES (?, ?, ?)", sent)
order = db.execute("SELECT op_key FROM orders WHERE claim_token IS NOT NULL LIMIT 1").fetchone()
db.execute("DELETE FROM orders WHERE op_key = ?", order)
print(sent[0], order[0])
PY
  )
  read -r sent_key order_key <<<"$keys"
  out=$(EXT=$ext timeout 60 "$PY" tests/python/soak.py --db "$t" --verify-only 2>&1)
  if grep -q "^FAIL soak:no_external_sent_twice: keys sent more than once: \[('$sent_key', 2)\]" <<<"$out" &&
    grep -q "^FAIL soak:no_local_written_twice: 1 keys: \[('$order_key', 'no guarded row')\]" <<<"$out" &&
    grep -q '^PASS soak:no_claim_lost' <<<"$out"; then
    echo "PASS soak:checks_fail_on_tampered_files"
  else
    echo "FAIL soak:checks_fail_on_tampered_files: a send of $sent_key repeated and the guarded row of $order_key removed, the checks said: $(grep -E '^(PASS|FAIL)' <<<"$out" | tr '\n' ' ')"
    rc=1
  fi
fi
[ "$rc" = 0 ] && rm -rf "$dir"
exit "$rc"
