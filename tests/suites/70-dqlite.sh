#!/usr/bin/env bash
# The ledger on a three-node dqlite cluster, through three nemeses: leader
# kills, a paused leader, a leader cut off from the others. Each node is
# build/dqlite/idemdq (tests/dqlite/: go-dqlite's app
# package through cgo), a process that registers the extension with
# sqlite3_auto_extension before the node opens its first connection.
# Clients are the same program using go-dqlite's database/sql driver.
#
#   1. basic: a ledger, a claim inside BEGIN ... COMMIT, settle, replay, a
#      guarded local write, an unclaimed guarded insert refused, and the
#      autocommit query path (db.Query of SELECT idem_claim outside a
#      transaction) refused by require_transaction; a claim through the
#      dqlite shell (which wraps each statement in a transaction);
#   2. kill: four clients claim keys from one shared pool, each claim
#      inside a transaction, while the leader is killed with SIGKILL at
#      random moments, three times; each killed node is restarted and rejoins;
#   3. pause: the same stream (a fresh tenant) while the leader is stopped
#      with SIGSTOP until the others have elected a new leader (past the
#      election timeout), then resumed with SIGCONT: a stale leader that
#      still believes it leads, with its clients' transactions in flight;
#   4. partition: the same stream while the leader is cut off from the
#      other nodes (each node in a network namespace of its own, joined by
#      veth pairs to a bridge where the clients are; blackhole routes
#      between the leader and the others, clients still reach every node)
#      until the others have elected a new leader, then healed;
#   after each of 2-4, the checker:
#      verify: every claim a client was told is committed is on the
#      leader with its token, no key was admitted twice, the claims still
#      held settle with their tokens and every settled key replays;
#      check-all: each node leads in turn (leadership transfer) and answers
#      integrity_check ok and the same digest of the ledger, so every node
#      caught up.
#
# The nodes run in a network namespace of the suite's own (unshare -n), so
# nothing is changed on the host's network. Where namespaces or veth pairs
# cannot be made (no CAP_SYS_ADMIN / CAP_NET_ADMIN, no iproute2), the nodes
# run on 127.0.0.1 and the partition skips, saying why.
#
# Skips, saying why, without Go, libdqlite-dev or go-dqlite's sources
# (Debian: golang-go libdqlite-dev golang-github-canonical-go-dqlite-dev).
# Runs once, in make test: under make sanitize and make valgrind it skips
# (the nodes are Go processes and load the uninstrumented extension, so a
# second run would test the same code). DQLITE_SEED reproduces the nemesis
# moments and the clients' key orders; DQLITE_SECONDS sets the kill stream
# (default 24), DQLITE_ROUNDS the pauses and the partitions (default 2
# each; about 110 s in all); a longer run: DQLITE_SECONDS=120 DQLITE_ROUNDS=20.
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
if [ -z "${DQLITE_NETNS_SELF:-}" ]; then
  if ! out=$(make -s --no-print-directory dqlite 2>&1); then
    printf '%s\n' "$out"
    echo "FAIL dqlite.build: go build of tests/dqlite failed (offline, GOPATH mode)"
    exit 1
  fi
  # Run the rest in a network namespace of our own: the bridge, the veth
  # pairs and the routes of the partition never touch the host's network.
  if ! command -v ip >/dev/null 2>&1; then
    net_skip="iproute2's ip is not installed (Debian: apt-get install iproute2)"
  elif ! command -v unshare >/dev/null 2>&1; then
    net_skip="unshare is not installed (Debian: util-linux)"
  elif ! out=$(unshare -n true 2>&1); then
    net_skip="cannot create a network namespace (unshare -n: $out; needs CAP_SYS_ADMIN)"
  else
    exec unshare -n env DQLITE_NETNS_SELF=1 bash "$0" "$@"
  fi
fi
bin=build/dqlite/idemdq
seed=${DQLITE_SEED:-$(( $(date +%s) % 100000 ))}
seconds=${DQLITE_SECONDS:-24}
rounds=${DQLITE_ROUNDS:-2}
echo "   dqlite: seed $seed (DQLITE_SEED=$seed reproduces the nemesis moments and key orders)"
RANDOM=$seed

run=build/dqlite/run
rm -rf "$run"
mkdir -p "$run"
declare -A pid_of # address -> node pid
client_pids=()
netns=() # the per-node namespaces made here, deleted on exit
cleanup() {
  local p n
  # a stopped node acts on TERM only once continued
  for p in "${pid_of[@]}"; do kill -CONT "$p" 2>/dev/null; done
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
  for n in "${netns[@]}"; do ip netns del "$n" 2>/dev/null; done
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

# The network: in our namespace, a bridge (10.213.0.254, where the clients
# are) and, per node, a namespace with a veth pair whose other end is on the
# bridge (node n at 10.213.0.n+1). Without it, every node on 127.0.0.1.
net_skip=${net_skip:-}
setup_net() {
  local n ns out
  ip link set lo up 2>/dev/null
  if ! out=$(ip link add idqbr type bridge 2>&1 && ip addr add 10.213.0.254/24 dev idqbr 2>&1 && ip link set idqbr up 2>&1); then
    net_skip="cannot make a bridge (ip link add type bridge: $out; needs CAP_NET_ADMIN)"
    return 1
  fi
  for n in 0 1 2; do
    ns=idemdq-$$-$n
    if ! out=$(ip netns add "$ns" 2>&1); then
      net_skip="cannot add a named network namespace (ip netns add: $out)"
      return 1
    fi
    netns+=("$ns")
    if ! out=$(ip link add "idq$n" type veth peer name eth0 netns "$ns" 2>&1 &&
      ip link set "idq$n" master idqbr up 2>&1 &&
      ip -n "$ns" link set lo up 2>&1 && ip -n "$ns" addr add "10.213.0.$((n + 1))/24" dev eth0 2>&1 &&
      ip -n "$ns" link set eth0 up 2>&1); then
      net_skip="cannot make a veth pair into a namespace (ip link add type veth: $out)"
      return 1
    fi
  done
}
if [ -n "${DQLITE_NETNS_SELF:-}" ] && ! setup_net; then
  for n in "${netns[@]}"; do ip netns del "$n" 2>/dev/null; done
  netns=()
fi
if [ "${#netns[@]}" = 3 ]; then
  addrs=(10.213.0.1:9001 10.213.0.2:9001 10.213.0.3:9001)
  echo "   dqlite: nodes in network namespaces of their own: ${addrs[*]} (clients on the bridge, 10.213.0.254)"
else
  mapfile -t ports < <("$bin" ports 3)
  addrs=("127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}")
fi
cluster=$(IFS=,; echo "${addrs[*]}")

# node_index ADDRESS: the node's number.
node_index() {
  local n
  for n in 0 1 2; do [ "${addrs[$n]}" = "$1" ] && { echo "$n"; return 0; }; done
  return 1
}
# others ADDRESS: the other nodes' addresses, comma-separated.
others() {
  local a out=()
  for a in "${addrs[@]}"; do [ "$a" = "$1" ] || out+=("$a"); done
  (IFS=,; echo "${out[*]}")
}

# start_node N [JOIN]: starts node N in the background and waits for its
# "ready" line (a restarted node rejoins from its data directory).
start_node() {
  local n=$1 join=${2:-} a=${addrs[$1]} i
  local args=(node -dir "$run/n$n" -address "$a" -ext "$ext")
  [ -n "$join" ] && args+=(-join "$join")
  if [ "${#netns[@]}" = 3 ]; then
    # ip netns exec runs the node in place (exec): $! is the node
    ip netns exec "${netns[$n]}" "$bin" "${args[@]}" >>"$run/n$n.log" 2>&1 &
  else
    "$bin" "${args[@]}" >>"$run/n$n.log" 2>&1 &
  fi
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

# phase NAME TENANT SECONDS KEYS NEMESIS: four clients claim keys of TENANT
# from a pool of KEYS until NEMESIS returns (at most SECONDS), then the checker: verify what they were
# told, then check-all. NAME prefixes the check names (none for the kills,
# whose names are the suite's oldest).
phase() {
  local name=$1 tenant=$2 secs=$3 keys=$4 nemesis=$5 c p logs=() stop="$run/$1.stop" prefix=""
  [ "$name" = kill ] || prefix=$name
  client_pids=()
  for c in 1 2 3 4; do
    timeout "$((secs + 60))" "$bin" stream -cluster "$cluster" -client "$c" -tenant "$tenant" -seconds "$secs" \
      -stop "$stop" -keys "$keys" -seed "$((seed * 10 + c))" -log "$run/$name.client$c.log" 2>"$run/$name.client$c.err" &
    client_pids+=($!)
    logs+=("$run/$name.client$c.log")
  done
  "$nemesis"
  touch "$stop"
  for p in "${client_pids[@]}"; do
    wait "$p" || fail "${prefix:+$prefix.}stream" "a client exited with an error: $(cat "$run/$name".client*.err | head -n 3 | tr '\n' ' ')"
  done
  client_pids=()
  client "${prefix:+$prefix.}verify" 120 verify -cluster "$cluster" -tenant "$tenant" -name "$prefix" -logs "$(IFS=,; echo "${logs[*]}")"
  client "${prefix:+$prefix.}check_all" 120 check-all -cluster "$cluster" -name "$prefix"
}

# new_leader OLD: waits until the nodes other than OLD elect a leader among
# themselves (asking them, not OLD); prints it. The caller counts elections.
new_leader() {
  "$bin" new-leader -nodes "$(others "$1")" -not "$1" -timeout 30s 2>&1
}
elections=0

# ms_since T0: milliseconds since T0 (date +%s%N).
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# --- 2. a stream of claims while the leader is killed --------------------------
nemesis_kill() {
  local k leader victim newleader restarted=1 kills=0 n ready_before out
  for k in 1 2 3; do
    sleep "$(( (seconds * 1000 / 4 - 1500 + RANDOM % 2000) / 1000 )).$((RANDOM % 10))"
    leader=$("$bin" leader -cluster "$cluster" 2>&1) || { fail "kill$k" "no leader before the kill: $leader"; break; }
    victim=${pid_of[$leader]:-}
    [ -n "$victim" ] || { fail "kill$k" "the leader $leader is not one of our nodes"; break; }
    kill -9 "$victim"
    wait "$victim" 2>/dev/null
    kills=$((kills + 1))
    if ! newleader=$(new_leader "$leader"); then
      fail "kill$k.new_leader" "no new leader after killing $leader: $newleader"
      break
    fi
    elections=$((elections + 1))
    echo "   dqlite: kill $k: SIGKILL to the leader $leader; $newleader leads"
    sleep "0.$((RANDOM % 10))"
    n=$(node_index "$leader")
    ready_before=$(grep -c '^ready ' "$run/n$n.log")
    restarted=0
    start_node "$n" "" "$((ready_before + 1))" && restarted=1
    [ "$restarted" = 1 ] || break
    if ! out=$("$bin" wait -cluster "$cluster" -voters 3 -timeout 30s 2>&1); then
      fail "kill$k.rejoin" "$out"
      break
    fi
  done
  [ "$kills" = 3 ] && [ "$restarted" = 1 ] && echo "PASS dqlite.leader_killed_3_times_and_rejoined"
}
elections=0
phase kill t "$seconds" 4000 nemesis_kill
echo "   dqlite: kill: 3 rounds, $elections elections seen"

# nemesis_rounds NAME WHAT BEGIN END: DQLITE_ROUNDS rounds of: find the
# leader, BEGIN the nemesis on it, wait until the other nodes have elected a
# leader among themselves (so past the election timeout), a moment more, END
# it (END sets $note: what the old leader then said), wait for three voters.
nemesis_rounds() {
  local name=$1 what=$2 begin=$3 end=$4 r leader newleader t0 t_elect done=0 out
  for r in $(seq "$rounds"); do
    sleep "1.$((RANDOM % 10))"
    leader=$("$bin" leader -cluster "$cluster" 2>&1) || { fail "$name$r" "no leader before the round: $leader"; break; }
    t0=$(date +%s%N)
    "$begin" "$leader" || fail "$name$r.begin" "$what: could not begin"
    if ! newleader=$(new_leader "$leader"); then
      "$end" "$leader"
      fail "$name$r.new_leader" "no new leader while the leader $leader was $what: $newleader"
      break
    fi
    elections=$((elections + 1))
    t_elect=$(ms_since "$t0")
    sleep "0.$((RANDOM % 10))"
    "$end" "$leader" || fail "$name$r.end" "$what: could not end"
    echo "   dqlite: $name $r: the leader $leader $what; $newleader elected after $t_elect ms;" \
      "ended after $(ms_since "$t0") ms; $note"
    if ! out=$("$bin" wait -cluster "$cluster" -voters 3 -timeout 30s 2>&1); then
      fail "$name$r.rejoin" "$out"
      break
    fi
    done=$((done + 1))
  done
  [ "$done" = "$rounds" ]
}
# seen ADDRESS: whom the node names as leader ("named L as leader", "named no leader").
seen() {
  local l
  l=$("$bin" seen -node "$1" 2>/dev/null)
  if [ -n "$l" ]; then echo "named $l as leader"; else echo "named no leader"; fi
}

# --- 3. a stream of claims while the leader is paused --------------------------
# SIGSTOP until the others have elected a leader, a little longer, then
# SIGCONT: the old leader resumes with its clients' transactions in flight
# and a term that is no longer current.
pause_begin() { kill -STOP "${pid_of[$1]}"; }
pause_end() {
  kill -CONT "${pid_of[$1]}" || return 1
  note="on resuming it $(seen "$1")"
}
nemesis_pause() {
  nemesis_rounds pause "stopped by SIGSTOP" pause_begin pause_end &&
    echo "PASS dqlite.pause.leader_stopped_${rounds}_times_and_resumed"
}
elections=0
phase pause t-pause 600 $((rounds * 200)) nemesis_pause
echo "   dqlite: pause: $rounds rounds, $elections elections seen"

# --- 4. a stream of claims while the leader is cut off -------------------------
# route VERB N M: blackhole routes between nodes N and M, both ways.
route() {
  local ip_n=${addrs[$2]%:*} ip_m=${addrs[$3]%:*}
  ip -n "${netns[$2]}" route "$1" blackhole "$ip_m/32" && ip -n "${netns[$3]}" route "$1" blackhole "$ip_n/32"
}
# routes VERB ADDRESS: blackhole routes between that node and each other one.
routes() {
  local l m st=0
  l=$(node_index "$2")
  for m in 0 1 2; do
    [ "$m" = "$l" ] || route "$1" "$l" "$m" || st=1
  done
  return $st
}
cut_begin() { routes add "$1"; }
cut_end() {
  note="before the heal it $(seen "$1")"
  routes del "$1"
}
nemesis_partition() {
  nemesis_rounds partition "cut off from the other nodes" cut_begin cut_end &&
    echo "PASS dqlite.partition.leader_cut_off_${rounds}_times_and_healed"
}
if [ "${#netns[@]}" = 3 ]; then
  elections=0
  phase partition t-partition 600 $((rounds * 200)) nemesis_partition
  echo "   dqlite: partition: $rounds rounds, $elections elections seen"
else
  echo "SKIP dqlite.partition: ${net_skip:-no network namespaces}"
fi

if [ "$rc" -ne 0 ]; then
  rm -rf build/dqlite/failed-run
  cp -a "$run" build/dqlite/failed-run
  echo "   dqlite: node and client logs kept in build/dqlite/failed-run"
fi
exit $rc
