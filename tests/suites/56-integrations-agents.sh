#!/usr/bin/env bash
# The agent-framework integrations of the Node package, end to end with
# each framework's own machinery (tests/js/):
#
#   ai             sqlite-idempotency/ai: generateText with the AI SDK's
#                  MockLanguageModelV3 re-emitting a tool call under a new id
#   openai-agents  sqlite-idempotency/openai-agents: run() with a custom Model
#   mastra         sqlite-idempotency/mastra: a Mastra Agent (agent.generate)
#                  whose model is MockLanguageModelV3, the tenant from its
#                  RequestContext, the window when no thread names the
#                  conversation
#   langchain      sqlite-idempotency/langchain: a LangGraph ToolNode with the
#                  SQLite checkpointer on the ledger's connection, a graph
#                  interrupted after the tool ran and resumed in another
#                  process; createAgent with the tool-retry middleware
#   words          the words the model reads on each decision, the same in
#                  MCP, the AI SDK, OpenAI Agents, LangChain and Python's
#                  @ledger.tool, and say()'s (words.json): tests/js/test_words.mjs;
#                  docs/integrations.md's table is words.json's (words_table.mjs)
#   typescript     tsc --strict over each adapter's declarations
#                  (tests/js/consumer_*.ts)
#   docs           every JavaScript example of docs/integrations.md's AI SDK,
#                  OpenAI Agents and LangChain sections, run as written, its
#                  output compared with the block after it
#
# Each test drives a tool that POSTs to the counting target
# (tests/python/test_server.py) through the scenarios of
# tests/js/agent_harness.mjs. The frameworks come from
# tests/js/node_modules (npm ci there when absent); a framework npm
# could not install skips, saying why. The package is staged as npm would
# install it: bindings/node and its platform package holding the plain
# build of the extension (tests/lib/nodepkg.sh), in a temporary project
# whose node_modules links the frameworks.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
DIR=tests/js
. tests/lib/interp.sh

# The package carries the plain build; the sanitized and valgrind runs test
# the same C in the other suites.
if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP integrations-agents: runs in make test only: the package carries the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi
plain_ext integrations-agents ai openai-agents langchain mastra

rc=0
node_bsql integrations-agents node "$DIR"
[ "$node_ready" = 1 ] || exit "$rc"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
project=$tmp/project
mkdir -p "$project/node_modules"
for e in "$ROOT/$DIR"/node_modules/* "$ROOT/$DIR"/node_modules/.bin; do ln -s "$e" "$project/node_modules/"; done
# shellcheck source=tests/lib/nodepkg.sh
. tests/lib/nodepkg.sh
stage_node_pkg "$project/node_modules" "$ext"
printf '{ "name": "idem-integrations-test", "version": "0.0.0", "private": true, "type": "module" }\n' >"$project/package.json"
# the test programs keep their places, so that they import each other as in the tree
mkdir -p "$project/$DIR" "$project/tests/python"
cp "$DIR"/*.mjs "$DIR"/*.ts "$project/$DIR/"
cp tests/python/test_server.py tests/python/drive_words.py "$project/tests/python/"

# has PACKAGE...: every package is installed in tests/js/node_modules
has() {
  local p
  for p in "$@"; do [ -f "$DIR/node_modules/$p/package.json" ] || { missing=$p; return 1; }; done
}

# --- the frameworks, end to end -----------------------------------------------
declare -A needs=(
  [ai]="ai zod"
  [openai-agents]="@openai/agents zod"
  [langchain]="@langchain/core @langchain/langgraph @langchain/langgraph-checkpoint-sqlite langchain zod"
  [mastra]="@mastra/core ai zod"
)
declare -A program=(
  [ai]=test_ai.mjs
  [openai-agents]=test_openai_agents.mjs
  [langchain]=test_langchain.mjs
  [mastra]=test_mastra.mjs
)
ready=()
for fw in ai openai-agents langchain mastra; do
  # shellcheck disable=SC2086
  if ! has ${needs[$fw]}; then
    echo "SKIP integrations.$fw: $missing is not installed in $DIR/node_modules (npm ci there could not install it)"
    continue
  fi
  ready+=("$fw")
done
pids=()
for fw in "${ready[@]}"; do
  (cd "$project" && run_checked integrations "$fw" node "$DIR/${program[$fw]}" >"$tmp/$fw.out" 2>&1; exit "$rc") &
  pids+=($!)
done
for i in "${!ready[@]}"; do
  wait "${pids[$i]}" || rc=1
  cat "$tmp/${ready[$i]}.out"
done

# --- the words: every adapter and Python, every decision -----------------------
# docs/integrations.md's table is words.json's
run_checked integrations words-table node "$DIR/words_table.mjs" bindings/node/words.json docs/integrations.md
if ! has ai @openai/agents @langchain/core @modelcontextprotocol/sdk @mastra/core zod; then
  echo "SKIP integrations.words: $missing is not installed in $DIR/node_modules"
elif ! python_skip integrations.words; then
  # Python's package as installed: the package, its words.json, the extension
  mkdir -p "$tmp/python"
  cp -r bindings/python/sqlite_idempotency "$tmp/python/"
  find "$tmp/python" -name __pycache__ -prune -exec rm -rf {} +
  cp bindings/node/words.json "$ext" "$tmp/python/sqlite_idempotency/"
  (cd "$project" && WORDS_PYTHONPATH=$tmp/python run_checked integrations words node "$DIR/test_words.mjs"; exit "$rc") || rc=1
fi

# --- TypeScript: tsc --strict over each adapter's declarations ---------------
if ! has typescript @types/node @types/better-sqlite3; then
  echo "SKIP integrations.typescript: $missing is not installed in $DIR/node_modules"
else
  # one program over every consumer; skipLibCheck, since checking the
  # frameworks' own declarations takes minutes (the consumers' @ts-expect-error
  # lines fail when a declaration here loses a framework type)
  list=$(for fw in "${ready[@]}"; do printf '"%s", ' "$DIR/consumer_${fw//-/_}.ts"; done)
  printf '{ "compilerOptions": { "strict": true, "noEmit": true, "skipLibCheck": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "lib": ["es2022", "dom"], "types": ["node"] }, "files": [%s] }\n' \
    "${list%, }" >"$project/tsconfig.json"
  if [ ${#ready[@]} -eq 0 ]; then
    echo "SKIP integrations.typescript: no framework is installed"
  elif out=$(cd "$project" && node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1); then
    echo "PASS integrations.typescript (tsc --strict accepts the consumer_*.ts of ${ready[*]} in $DIR and refuses each of their @ts-expect-error lines)"
  else
    echo "FAIL integrations.typescript: $(tr '\n' ' ' <<<"$out" | cut -c1-2000)"
    rc=1
  fi
fi

# --- docs/integrations.md: every example of these sections, as written -------
if out=$(cd "$project" && node "$DIR/doc_examples.mjs" "$ROOT/docs/integrations.md" "${ready[@]}" 2>&1); then
  printf '%s\n' "$out"
else
  printf '%s\n' "$out"
  grep -q '^FAIL ' <<<"$out" || echo "FAIL integrations.docs: the examples' runner exited with an error"
  rc=1
fi

exit $rc
