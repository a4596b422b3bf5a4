#!/usr/bin/env bash
# The ledger on a three-node dqlite cluster on 127.0.0.1, through leader
# kills. Each node is build/dqlite/idemdq (tests/dqlite/: go-dqlite's app
# package through cgo), a process that registers the extension with
# sqlite3_auto_extension before the node opens its first connection.
# Clients are the same program using go-dqlite's database/sql driver.
#
#   1. basic: a ledger, a claim inside BEGIN ... COMMIT, settle, replay, a
#      guarded local write, an unclaimed guarded insert refused, and the
#      autocommit query path (db.Query of SELECT idem_claim outside a
#      transaction) refused by require_transaction; a claim through the
#      dqlite shell (which wraps each statement in a transaction);
#   2. four clients claim keys from one shared pool, each claim inside a
#      transaction, while the leader is killed with SIGKILL at random
#      moments, three times; each killed node is restarted and rejoins;
#   3. verify: every claim a client was told is committed is on the new
#      leader with its token, no key was admitted twice, the claims still
#      held settle with their tokens and every settled key replays;
#   4. check-all: each node leads in turn (leadership transfer) and answers
#      integrity_check ok and the same digest of the ledger, so the killed
#      nodes caught up.
#
# Skips, saying why, without Go, libdqlite-dev or go-dqlite's sources
# (Debian: golang-go libdqlite-dev golang-github-canonical-go-dqlite-dev).
# Runs once, in make test: under make sanitize and make valgrind it skips
# (the nodes are Go processes and load the uninstrumented extension, so a
# second run would test the same code). DQLITE_SEED reproduces the kill
# moments and the clients' key orders; DQLITE_SECONDS sets the stream.
# Every client runs under timeout, and the nodes are stopped on exit.
set -u
cd "$(dirname "$0")/../.." || exit 1

skip() {
  echo "SKIP dqlite: $*"
  exit 0
}
command -v go >/dev/null 2>&1 || skip "go is not installed (Debian: apt-get install golang-go)"
[ -f /usr/include/dqlite.h ] || skip "libdqlite's headers are not installed (Debian: apt-get install libdqlite-dev)"
[ -d "${DQLITE_GOPATH:-/usr/share/gocode}/src/github.com/canonical/go-dqlite/app" ] ||
  skip "go-dqlite's sources are not installed (Debian: apt-get install golang-github-canonical-go-dqlite-dev)"
case "${EXT:-}" in
  *build/asan/*) skip "runs in make test only: the nodes are Go processes that load the uninstrumented build/idempotency.so" ;;
esac
[ -z "${TEST_WRAP:-}" ] || skip "runs in make test only: the nodes are Go processes, not run under valgrind"

ext=build/idempotency.so
[ -f "$ext" ] || { echo "FAIL dqlite: $ext is not built (run make)"; exit 1; }
if ! out=$(make -s --no-print-directory dqlite 2>&1); then
  printf '%s\n' "$out"
  echo "FAIL dqlite.build: go build of tests/dqlite failed (offline, GOPATH mode)"
  exit 1
fi
bin=build/dqlite/idemdq
seed=${DQLITE_SEED:-$(( $(date +%s) % 100000 ))}
seconds=${DQLITE_SECONDS:-24}
echo "   dqlite: seed $seed (DQLITE_SEED=$seed reproduces the kill moments and key orders)"
RANDOM=$seed

run=build/dqlite/run
rm -rf "$run"
mkdir -p "$run"
declare -A pid_of # address -> node pid
client_pids=()
cleanup() {
  local p
  # clients run under timeout(1), which passes TERM on to the client
  for p in "${client_pids[@]}" "${pid_of[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for p in "${client_pids[@]}" "${pid_of[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${client_pids[@]}" "${pid_of[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP # run cleanup on a signal too
rc=0
fail() {
  echo "FAIL dqlite.$1: $2"
  rc=1
}
# client NAME SECONDS ARGS...: runs "$bin ARGS" under timeout and shows its
# lines; a non-zero exit without a FAIL line (a crash, a timeout) is a FAIL.
client() {
  local name=$1 secs=$2 out st
  shift 2
  out=$(timeout "$secs" "$bin" "$@" 2>&1)
  st=$?
  printf '%s\n' "$out"
  if [ "$st" -ne 0 ]; then
    rc=1
    grep -q '^FAIL ' <<<"$out" || echo "FAIL dqlite.$name: exited with status $st$([ "$st" = 124 ] && echo ' (timed out)')"
  fi
}

mapfile -t ports < <("$bin" ports 3)
addrs=("127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}")
cluster=$(IFS=,; echo "${addrs[*]}")

# start_node N [JOIN]: starts node N in the background and waits for its
# "ready" line (a restarted node rejoins from its data directory).
start_node() {
  local n=$1 join=${2:-} a=${addrs[$1]} i
  local args=(node -dir "$run/n$n" -address "$a" -ext "$ext")
  [ -n "$join" ] && args+=(-join "$join")
  "$bin" "${args[@]}" >>"$run/n$n.log" 2>&1 &
  pid_of[$a]=$!
  for i in $(seq 300); do
    grep -q '^ready ' "$run/n$n.log" 2>/dev/null && [ "$(grep -c '^ready ' "$run/n$n.log")" -ge "${3:-1}" ] && return 0
    kill -0 "${pid_of[$a]}" 2>/dev/null || break
    sleep 0.1
  done
  fail "node$n.start" "node $a did not become ready: $(tail -n 3 "$run/n$n.log" | tr '\n' ' ')"
  return 1
}

start_node 0 || exit 1
start_node 1 "${addrs[0]}" || exit 1
start_node 2 "${addrs[0]}" || exit 1
if voters=$("$bin" wait -cluster "$cluster" -voters 3 -timeout 60s 2>&1); then
  echo "PASS dqlite.three_voters"
  echo "   dqlite: $voters"
  sed -n 's/^ready .*idempotency=\([^ ]*\) sqlite=\(.*\)/   dqlite: every node registered idempotency \1 (SQLite \2)/p' "$run/n0.log"
else
  fail three_voters "$voters"
  exit 1
fi

# --- 1. basic operations through the cluster ----------------------------------
client basic 90 basic -cluster "$cluster"

# The dqlite shell (package go-dqlite) runs each statement in a transaction
# of its own, so a claim typed there is made inside BEGIN ... COMMIT.
if ! command -v dqlite >/dev/null 2>&1; then
  echo "SKIP dqlite.shell: the dqlite shell is not installed (Debian: apt-get install go-dqlite)"
else
  claim="SELECT idem_claim('ledger', 'tenant-s', 'conv-1', 'shell', '{}')"
  first=$(timeout 30 dqlite -s "$cluster" ledger.db "$claim" 2>&1)
  second=$(timeout 30 dqlite -s "$cluster" ledger.db "$claim" 2>&1)
  case "$first|$second" in
    '{"decision":"admitted",'*'"committed":false,"durable":true,"durability":"raft-quorum",'*'|{"decision":"in_progress",'*)
      echo "PASS dqlite.shell_claim_in_its_transaction" ;;
    *) fail shell_claim_in_its_transaction "first claim: $first; second: $second" ;;
  esac
fi

# --- 2. a stream of claims while the leader is killed --------------------------
logs=()
for c in 1 2 3 4; do
  timeout "$((seconds + 60))" "$bin" stream -cluster "$cluster" -client "$c" -seconds "$seconds" -keys 4000 \
    -seed "$((seed * 10 + c))" -log "$run/client$c.log" 2>"$run/client$c.err" &
  client_pids+=($!)
  logs+=("$run/client$c.log")
done

kills=0
restarted=1
for k in 1 2 3; do
  sleep "$(( (seconds * 1000 / 4 - 1500 + RANDOM % 2000) / 1000 )).$((RANDOM % 10))"
  leader=$("$bin" leader -cluster "$cluster" 2>&1) || { fail "kill$k" "no leader before the kill: $leader"; break; }
  victim=${pid_of[$leader]:-}
  [ -n "$victim" ] || { fail "kill$k" "the leader $leader is not one of our nodes"; break; }
  kill -9 "$victim"
  wait "$victim" 2>/dev/null
  kills=$((kills + 1))
  newleader=""
  for _ in $(seq 100); do
    newleader=$("$bin" leader -cluster "$cluster" 2>/dev/null) && [ "$newleader" != "$leader" ] && break
    newleader=""
    sleep 0.1
  done
  if [ -z "$newleader" ]; then
    fail "kill$k.new_leader" "no new leader within 10 s after killing $leader"
    break
  fi
  echo "   dqlite: kill $k: SIGKILL to the leader $leader; $newleader leads"
  sleep "0.$((RANDOM % 10))"
  for n in 0 1 2; do
    if [ "${addrs[$n]}" = "$leader" ]; then
      restarted=0
      ready_before=$(grep -c '^ready ' "$run/n$n.log")
      start_node "$n" "" "$((ready_before + 1))" && restarted=1
    fi
  done
  [ "$restarted" = 1 ] || break
  if ! out=$("$bin" wait -cluster "$cluster" -voters 3 -timeout 30s 2>&1); then
    fail "kill$k.rejoin" "$out"
    break
  fi
done
[ "$kills" = 3 ] && [ "$restarted" = 1 ] && echo "PASS dqlite.leader_killed_3_times_and_rejoined"

for p in "${client_pids[@]}"; do
  wait "$p" || fail stream "a client exited with an error: $(cat "$run"/client*.err | head -n 3 | tr '\n' ' ')"
done
client_pids=()

# --- 3. what the clients were told holds on the new leader ---------------------
client verify 120 verify -cluster "$cluster" -logs "$(IFS=,; echo "${logs[*]}")"

# --- 4. every node: integrity_check and the same ledger ------------------------
client check_all 120 check-all -cluster "$cluster"

if [ "$rc" -ne 0 ]; then
  rm -rf build/dqlite/failed-run
  cp -a "$run" build/dqlite/failed-run
  echo "   dqlite: node and client logs kept in build/dqlite/failed-run"
fi
exit $rc
