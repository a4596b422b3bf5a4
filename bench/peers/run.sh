#!/usr/bin/env bash
# make bench-peers: starts its own redis-server and PostgreSQL in a temporary
# directory on 127.0.0.1 (unprivileged ports; PostgreSQL as a non-root user),
# the counting target, then peers.mjs main; stops them all at the end,
# always. Prints one SKIP line and exits 0 when something it needs is
# absent. Installs nothing.
#
# Usage: bash bench/peers/run.sh EXTENSION_PATH [main]   (N=200 calls per figure;
#        the mode and arguments of peers.mjs may follow, e.g. latency dbos 0 30)
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
EXT="${1:?usage: run.sh EXTENSION_PATH [main | latency PEER DURABLE N]}"
[ $# -ge 2 ] || set -- "$1" main
NEEDS="needs: apt-get install redis-server postgresql, Node >= 20, and (cd bench/peers && npm ci)"

skip() {
	echo "SKIP bench-peers: $1 ($NEEDS)"
	exit 0
}

command -v node >/dev/null 2>&1 || skip "node is not installed"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] 2>/dev/null || skip "node $(node -v) is older than 20 (DBOS needs 20)"
command -v redis-server >/dev/null 2>&1 || skip "redis-server is not installed"
command -v redis-cli >/dev/null 2>&1 || skip "redis-cli is not installed"
PGBIN=""
for d in /usr/lib/postgresql/*/bin; do
	[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && PGBIN="$d"
done
if [ -z "$PGBIN" ] && command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
	PGBIN="$(dirname "$(command -v initdb)")"
fi
[ -n "$PGBIN" ] || skip "PostgreSQL (initdb, pg_ctl) is not installed"
[ -f "$EXT" ] || skip "the extension $EXT is not built (run make)"
[ -d "$HERE/node_modules/better-sqlite3" ] || skip "bench/peers/node_modules is absent"

# PostgreSQL refuses to run as root: run it as the postgres user when we are root.
AS=()
if [ "$(id -u)" = 0 ]; then
	id postgres >/dev/null 2>&1 || skip "running as root and there is no postgres user to run PostgreSQL as"
	command -v runuser >/dev/null 2>&1 || skip "running as root and runuser is absent"
	AS=(runuser -u postgres --)
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bench-peers.XXXXXX")"
chmod 755 "$WORK"
REDIS_PID=""
TARGET_PID=""
PG_STARTED=""
NODE_PID=""
cleanup() {
	[ -n "$NODE_PID" ] && kill "$NODE_PID" 2>/dev/null && wait "$NODE_PID" 2>/dev/null
	[ -n "$TARGET_PID" ] && kill "$TARGET_PID" 2>/dev/null
	[ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null
	[ -n "$PG_STARTED" ] && "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate -w stop >/dev/null 2>&1
	[ -n "$REDIS_PID" ] && wait "$REDIS_PID" 2>/dev/null
	[ -n "$TARGET_PID" ] && wait "$TARGET_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port on 127.0.0.1 (the kernel's pick).
free_port() {
	node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# redis-server with an append-only file; appendfsync is set per figure.
RPORT="$(free_port)"
mkdir -p "$WORK/redis"
redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$WORK/redis" --appendonly yes --appendfsync always \
	--save '' --daemonize no --logfile "$WORK/redis/log" &
REDIS_PID=$!
for _ in $(seq 100); do
	redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -p "$RPORT" ping >/dev/null 2>&1 || {
	echo "FAIL bench-peers: redis-server did not start: $(tail -3 "$WORK/redis/log")"
	exit 1
}

# PostgreSQL: initdb in the temporary directory, trust on 127.0.0.1 only.
PPORT="$(free_port)"
mkdir -p "$WORK/pg" "$WORK/pgsock"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg" "$WORK/pgsock"
if ! "${AS[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U bench --auth=trust -E UTF8 >"$WORK/initdb.log" 2>&1; then
	echo "FAIL bench-peers: initdb failed: $(tail -3 "$WORK/initdb.log")"
	exit 1
fi
PG_STARTED=1
if ! "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -w -l "$WORK/pgsock/log" \
	-o "-p $PPORT -k $WORK/pgsock -c listen_addresses=127.0.0.1 -c synchronous_commit=on -c fsync=on -c max_connections=200" start >/dev/null; then
	echo "FAIL bench-peers: postgres did not start: $(tail -3 "$WORK/pgsock/log")"
	exit 1
fi
"$PGBIN/createdb" -h 127.0.0.1 -p "$PPORT" -U bench peers 2>/dev/null ||
	psql -h 127.0.0.1 -p "$PPORT" -U bench -d postgres -qc 'CREATE DATABASE peers' >/dev/null

# The counting target.
node "$HERE/target.mjs" "$WORK/target.port" &
TARGET_PID=$!
for _ in $(seq 100); do
	[ -s "$WORK/target.port" ] && break
	sleep 0.05
done
[ -s "$WORK/target.port" ] || {
	echo "FAIL bench-peers: the counting target did not start"
	exit 1
}

echo "bench-peers: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
	"$(redis-server --version | cut -d' ' -f3), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}')"
export TARGET_URL="http://127.0.0.1:$(cat "$WORK/target.port")"
export REDIS_URL="redis://127.0.0.1:$RPORT"
export PG_URL="postgres://bench@127.0.0.1:$PPORT/peers"
export DBOS_URL="postgres://bench@127.0.0.1:$PPORT/peers_dbos"
export IDEM_EXT="$EXT"
export WORK_DIR="$WORK"
# In the background, so that a signal to this script runs the cleanup at once.
timeout --kill-after=5 600 node --no-deprecation "$HERE/peers.mjs" "${@:2}" &
NODE_PID=$!
wait "$NODE_PID"
rc=$?
NODE_PID=""
[ $rc = 124 ] && echo "FAIL bench-peers: peers.mjs did not end in 600 s"
echo "bench-peers: load after $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
