#!/usr/bin/env bash
# Durable runners (docs/integrations.md, "Durable runners"): a guarded tool
# call as a step of the runner, the runner retrying it on its own, against
# the counting target (tests/js/target.mjs, on 127.0.0.1):
#
#   unit      sqlite-idempotency/runners without a runner: which refusals are
#             final, what nonRetryable throws, its errors
#             (tests/js/test_runners_unit.mjs); tsc --strict over its
#             declarations (tests/js/consumer_runners.ts)
#   workflow  Vercel's Workflow DevKit (npm workflow) in its own local world,
#             in process: its retries, a re-plan as a new step, a re-run of
#             the workflow; the section's workflow module as written
#             (tests/js/test_runner_workflow.mjs, tests/js/wdk_send.mjs)
#   dbos      DBOS Transact on a private PostgreSQL cluster started here
#             (Debian's postgresql: initdb and pg_ctl in a temporary
#             directory, on a free port of 127.0.0.1, as the unprivileged
#             user nobody when run as root, stopped at the end): the same
#             three cases, and a process SIGKILLed mid-step that the next
#             launch recovers with the docs' retriesSpanning(lease)
#             settings, ending on unknown; the workflow's dead holder is
#             also a SIGKILLed process, waited out with the DevKit's default
#             retries; the section's DBOS program as written
#             (tests/js/test_runner_dbos.mjs)
#
# Temporal and Inngest are not run: their local servers are binaries that
# their npm packages download on first use, and this machine reaches no
# host but the package registries. The section's recipes for them say so.
#
# The packages come from tests/js/node_modules (npm ci there); one that is
# absent skips, saying why. The package is staged as npm would install it,
# as in 56-integrations-agents.sh.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
DIR=tests/js
DOCS=$ROOT/docs/integrations.md
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP runners: runs in make test only: the package carries the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi
plain_ext runners unit workflow dbos

rc=0
node_bsql runners node "$DIR"
[ "$node_ready" = 1 ] || exit "$rc"

tmp=$(mktemp -d)
pgdir=
cleanup() {
  if [ -n "$pgdir" ] && [ -f "$pgdir/data/postmaster.pid" ]; then
    "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate -w stop >/dev/null 2>&1
  fi
  rm -rf "$tmp" ${pgdir:+"$pgdir"}
}
trap cleanup EXIT
project=$tmp/project
mkdir -p "$project/node_modules" "$project/$DIR"
for e in "$ROOT/$DIR"/node_modules/* "$ROOT/$DIR"/node_modules/.bin; do ln -s "$e" "$project/node_modules/"; done
# shellcheck source=tests/lib/nodepkg.sh
. tests/lib/nodepkg.sh
stage_node_pkg "$project/node_modules" "$ext"
printf '{ "name": "idem-runners-test", "version": "0.0.0", "private": true, "type": "module" }\n' >"$project/package.json"
cp "$DIR"/*.mjs "$DIR"/consumer_runners.ts "$project/$DIR/"

# has PACKAGE...: every package is installed in tests/js/node_modules
has() {
  local p
  for p in "$@"; do [ -f "$DIR/node_modules/$p/package.json" ] || { missing=$p; return 1; }; done
}
version() { node -p "require('./$DIR/node_modules/$1/package.json').version"; }

(cd "$project" && run_checked runners unit node "$DIR/test_runners_unit.mjs"; exit "$rc") || rc=1
if ! has typescript @types/node @types/better-sqlite3; then
  echo "SKIP runners.typescript: $missing is not installed in $DIR/node_modules"
else
  printf '{ "compilerOptions": { "strict": true, "noEmit": true, "skipLibCheck": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "types": ["node"] }, "files": ["%s"] }\n' \
    "$DIR/consumer_runners.ts" >"$project/tsconfig.json"
  if out=$(cd "$project" && node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1); then
    echo "PASS runners.typescript (tsc --strict accepts $DIR/consumer_runners.ts and refuses each of its @ts-expect-error lines)"
  else
    echo "FAIL runners.typescript: $(tr '\n' ' ' <<<"$out" | cut -c1-2000)"
    rc=1
  fi
fi

# --- Vercel's Workflow DevKit --------------------------------------------------
if ! has workflow @workflow/vitest @workflow/builders; then
  echo "SKIP runners.workflow: $missing is not installed in $DIR/node_modules (npm ci there could not install it)"
else
  echo "   runners.workflow: workflow $(version workflow), node $(node --version)"
  (cd "$project" && run_checked runners workflow node "$DIR/test_runner_workflow.mjs" "$DOCS"; exit "$rc") || rc=1
fi
# The DevKit's AI SDK integration: @workflow/ai's DurableAgent peers on ai 6,
# @ai-sdk/workflow's WorkflowAgent (ai 7) on a workflow 5 that is only a beta.
ai_version=$(version ai 2>/dev/null || echo absent)
echo "SKIP runners.workflow-ai: the DevKit's AI SDK agents cannot run on this tree's ai ($ai_version): @workflow/ai (DurableAgent) needs ai ^6, and @ai-sdk/workflow (WorkflowAgent, for ai 7) needs workflow ^5.0.0-beta, which has no release (workflow's latest is 4.8.9); the guarded step above is what either agent runs for a tool call"

# --- DBOS Transact on a private PostgreSQL ------------------------------------
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
as_pg=()
if ! has @dbos-inc/dbos-sdk; then
  echo "SKIP runners.dbos: $missing is not installed in $DIR/node_modules (npm ci there could not install it)"
elif [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
  echo "SKIP runners.dbos: PostgreSQL is not installed (Debian: apt-get install postgresql), DBOS's system database"
else
  pgdir=$(mktemp -d)
  if [ "$(id -u)" = 0 ]; then
    # initdb refuses to run as root
    as_pg=(runuser -u nobody --)
    chown nobody "$pgdir"
  fi
  port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  if ! out=$("${as_pg[@]}" "$pgbin/initdb" -D "$pgdir/data" -A trust -U postgres --no-sync 2>&1); then
    echo "FAIL runners.dbos: initdb failed: $(last_line "$out")"
    rc=1
  elif ! out=$("${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $pgdir -c fsync=off" start 2>&1); then
    echo "FAIL runners.dbos: pg_ctl start failed: $(last_line "$out") $(tail -n 3 "$pgdir/log" 2>/dev/null | tr '\n' ' ')"
    rc=1
  else
    echo "   runners.dbos: @dbos-inc/dbos-sdk $(version @dbos-inc/dbos-sdk), PostgreSQL $("$pgbin/postgres" --version | sed -E 's/^postgres \(PostgreSQL\) ([^ ]+).*/\1/') on 127.0.0.1:$port"
    # --no-deprecation: pg 8 warns on stderr of DBOS's own use of its client
    (cd "$project" && DBOS_SYSTEM_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/runners_dbos" \
      run_checked runners dbos node --no-deprecation "$DIR/test_runner_dbos.mjs" "$DOCS"; exit "$rc") || rc=1
  fi
fi

echo "SKIP runners.temporal: not run here: @temporalio/testing's local servers (the Temporal CLI dev server, the time-skipping test server) are binaries the SDK downloads on first use, and this machine reaches only the package registries; docs/integrations.md gives the recipe"
echo "SKIP runners.inngest: not run here: the Inngest Dev Server is a binary that the inngest-cli npm package downloads in its install script, and this machine reaches only the package registries; docs/integrations.md gives the recipe"

exit $rc
