#!/usr/bin/env bash
# The MCP and Python integrations (docs/integrations.md) end to end:
#
#   mcp      tests/js/mcp_*.mjs: real MCP server processes of
#            @modelcontextprotocol/sdk (from tests/js/node_modules,
#            installed with npm ci when absent) guarded by
#            sqlite-idempotency/mcp, driven by the SDK's Client over stdio
#            and Streamable HTTP against a counting target on 127.0.0.1
#            (test_mcp.mjs); the edge cases in one process over the SDK's
#            in-memory transport (test_mcp_unit.mjs); the adapter on
#            node:sqlite under Node 24 from npm (test_mcp_node_sqlite.mjs);
#            tsc --strict over mcp.d.ts with a typed user and misuse it must refuse
#   python   tests/python/test_tools.py: @ledger.tool and Ledger.acall from
#            threads, processes and asyncio, a kill mid-call
#   docs     every JavaScript and Python block of the MCP and Python
#            sections of docs/integrations.md, run as written; an MCP
#            block followed by a ```text block prints it, and tsc --strict
#            (checkJs) accepts the MCP blocks as written
#
# The packages are used as a user installs them: a staging copy of
# bindings/node (with its platform package, tests/lib/nodepkg.sh) in a temporary project
# whose node_modules links the test tree's, and a copy of bindings/python
# (with the extension) on PYTHONPATH. A runtime or framework that cannot be
# installed skips, saying why. Runs in make test only, as 63-packages.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
. tests/lib/interp.sh

if [ -n "${SANITIZE:-}" ] || [ "${BUILD:-build}" != build ] || [ -n "${TEST_WRAP:-}" ]; then
  echo "SKIP integrations: runs in make test only: the interpreters load the plain build, which carries no sanitizer runtime and is not run under valgrind here"
  exit 0
fi
ext=build/idempotency.so
if [ ! -f "$ext" ]; then
  echo "FAIL integrations: the extension $ext is not built (run make)"
  exit 1
fi

rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DOCS=docs/integrations.md

# docs_blocks SECTION LANG DIR: writes each LANG block of the "## SECTION"
# part of the docs (to the next "## " heading) to DIR/<n>.<ext>, skipping a
# block after <!-- norun -->, and a ```text block right after one (what it
# prints) to DIR/<n>.out; prints the count.
docs_blocks() {
  "$PY" - "$DOCS" "$1" "$2" "$3" <<'PY'
import os, re, sys
path, section, lang, out = sys.argv[1:]
text = open(path, encoding="utf-8").read()
m = re.search(r"^## " + re.escape(section) + r"\b.*?(?=^## |\Z)", text, re.S | re.M)
if not m:
    sys.exit(f"docs_blocks: no section '## {section}' in {path}")
langs = {"js": ("js", "javascript", "mjs"), "py": ("python", "py")}[lang]
n = 0
last = None  # the block just written, whose output a text block may give
for b in re.finditer(r"^```(\w*)\n(.*?)^```", m.group(0), re.S | re.M):
    before = m.group(0)[:b.start()].rstrip().splitlines()
    norun = bool(before) and before[-1].strip() == "<!-- norun -->"
    if b.group(1) in langs and not norun:
        n += 1
        ext = "mjs" if lang == "js" else "py"
        with open(os.path.join(out, f"{n}.{ext}"), "w", encoding="utf-8") as f:
            f.write(b.group(2))
        last = n
    elif b.group(1) == "text" and last is not None:
        with open(os.path.join(out, f"{last}.out"), "w", encoding="utf-8") as f:
            f.write(b.group(2))
        last = None
    else:
        last = None
print(n)
PY
}

# --- Node: the MCP SDK ------------------------------------------------------------
IT=tests/js
node_bsql integrations mcp "$IT"
if [ "$node_ready" = 1 ] && [ ! -f "$IT/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  if ! out=$(cd "$IT" && npm ci --no-audit --no-fund --loglevel=error 2>&1); then
    echo "SKIP integrations.mcp: npm ci in $IT could not install @modelcontextprotocol/sdk ($(last_line "$out"))"
    node_ready=0
  fi
fi
if [ "$node_ready" = 1 ]; then
  sdk=$(node -p "require('./$IT/node_modules/@modelcontextprotocol/sdk/package.json').version")
  echo "   integrations.mcp: @modelcontextprotocol/sdk $sdk, node $(node --version)"
  # the project: tests/js as in the tree, node_modules linking the test
  # tree's, sqlite-idempotency a staged copy of bindings/node carrying the
  # extension
  proj=$tmp/project
  mkdir -p "$proj/$IT/node_modules"
  cp "$IT"/*.mjs "$IT"/*.ts "$IT/package.json" "$proj/$IT/"
  for m in "$IT"/node_modules/* "$IT"/node_modules/.bin; do
    [ -e "$m" ] && ln -s "$ROOT/$m" "$proj/$IT/node_modules/"
  done
  # shellcheck source=tests/lib/nodepkg.sh
  . tests/lib/nodepkg.sh
  stage_node_pkg "$proj/$IT/node_modules" "$ext"
  # the core package loads without the SDK (a project with only it)
  bare=$tmp/bare/node_modules
  stage_node_pkg "$bare" "$ext"
  if out=$(cd "$tmp/bare" && node -e 'require("sqlite-idempotency"); require("sqlite-idempotency/mcp"); import("sqlite-idempotency/mcp").then((m) => { if (typeof m.withIdempotency !== "function") process.exit(3); })' 2>&1); then
    echo "PASS integrations.mcp:loads-without-sdk (require and import of sqlite-idempotency and sqlite-idempotency/mcp in a project without @modelcontextprotocol/sdk)"
  else
    echo "FAIL integrations.mcp:loads-without-sdk: $out"
    rc=1
  fi
  run_checked integrations mcp-unit node "$proj/$IT/test_mcp_unit.mjs"
  run_checked integrations mcp node "$proj/$IT/test_mcp.mjs"
  # the MCP adapter on Node's own SQLite (node:sqlite), on Node 24 from npm
  # (tests/lib/runtimes.sh): the system's Node may have none
  # shellcheck source=tests/lib/runtimes.sh
  . tests/lib/runtimes.sh
  runtimes_ready
  if [ -z "$NODE24" ]; then
    echo "SKIP integrations.mcp-node-sqlite: node@24 could not be installed from npm into build/runtimes${runtimes_why:+ ($runtimes_why)}"
  else
    run_checked integrations mcp-node-sqlite "$NODE24" --no-warnings "$proj/$IT/test_mcp_node_sqlite.mjs"
  fi
  # TypeScript: mcp.d.ts accepts a typed user against the real SDK types and
  # refuses misuse (one tsc run over both: the SDK's types are slow to check)
  printf '{ "compilerOptions": { "strict": true, "noEmit": true, "skipLibCheck": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "lib": ["es2022", "dom"], "types": [] }, "files": ["consumer_mcp.ts", "misuse_mcp.ts"] }\n' >"$proj/$IT/tsconfig.json"
  out=$(cd "$proj/$IT" && node node_modules/typescript/bin/tsc -p tsconfig.json 2>&1)
  if ! grep -q '^consumer_mcp\.ts' <<<"$out"; then
    echo "PASS integrations.mcp:typescript-consumer (tsc --strict accepts $IT/consumer_mcp.ts)"
  else
    echo "FAIL integrations.mcp:typescript-consumer: $(grep '^consumer_mcp' <<<"$out" | tr '\n' ' ')"
    rc=1
  fi
  lines=$(grep -o '^misuse_mcp\.ts([0-9]*' <<<"$out" | cut -d'(' -f2 | sort -n -u | tr '\n' ' ')
  want=$(grep -n '// refused$' "$IT/misuse_mcp.ts" | cut -d: -f1 | tr '\n' ' ')
  others=$(grep -v '^misuse_mcp\.ts\|^consumer_mcp\.ts\|^ ' <<<"$out")
  if [ -n "$want" ] && [ "$lines" = "$want" ] && [ -z "$others" ]; then
    echo "PASS integrations.mcp:typescript-misuse (tsc refuses each line of $IT/misuse_mcp.ts marked refused, and no other)"
  else
    echo "FAIL integrations.mcp:typescript-misuse: errors on lines '$lines', want '$want': $(tr '\n' ' ' <<<"$out")"
    rc=1
  fi
  # the docs' JavaScript examples of the MCP section, as written
  mkdir -p "$proj/docs-js"
  ln -s "$proj/$IT/node_modules" "$proj/docs-js/node_modules"
  if ! n=$(docs_blocks MCP js "$proj/docs-js"); then
    echo "FAIL integrations.docs:mcp: $n"
    rc=1
  elif [ "$n" -eq 0 ]; then
    echo "FAIL integrations.docs:mcp: no runnable JavaScript block in the MCP section of $DOCS"
    rc=1
  else
    for f in "$proj"/docs-js/*.mjs; do
      b=$(basename "$f" .mjs)
      if ! out=$(cd "$proj/docs-js" && timeout 60 node "$f" 2>&1); then
        echo "FAIL integrations.docs:mcp-$b: $(tr '\n' ' ' <<<"$out")"
        rc=1
      elif [ -f "$proj/docs-js/$b.out" ] && [ "$out" != "$(cat "$proj/docs-js/$b.out")" ]; then
        echo "FAIL integrations.docs:mcp-$b: printed '$(tr '\n' ' ' <<<"$out")', the docs say '$(tr '\n' ' ' <"$proj/docs-js/$b.out")'"
        rc=1
      else
        echo "PASS integrations.docs:mcp-$b (the MCP section's JavaScript block $b of $DOCS runs as written$([ -f "$proj/docs-js/$b.out" ] && echo ' and prints what the docs say'))"
      fi
    done
    # and type-check as written: tsc --strict over them (checkJs), against
    # the declarations of the package and the SDK
    files=$(cd "$proj/docs-js" && ls ./*.mjs | sed 's/.*/"&"/' | paste -sd, -)
    printf '{ "compilerOptions": { "strict": true, "noEmit": true, "allowJs": true, "checkJs": true, "skipLibCheck": true, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022", "lib": ["es2022", "dom"], "types": ["node"] }, "files": [%s] }\n' "$files" >"$proj/docs-js/tsconfig.json"
    if out=$(cd "$proj/docs-js" && node "$proj/$IT/node_modules/typescript/bin/tsc" -p tsconfig.json 2>&1); then
      echo "PASS integrations.docs:mcp-typescript (tsc --strict accepts the MCP section's JavaScript blocks of $DOCS as written)"
    else
      echo "FAIL integrations.docs:mcp-typescript: $(tr '\n' ' ' <<<"$out")"
      rc=1
    fi
  fi
fi

# --- Python: the decorator and acall ---------------------------------------------
if ! python_skip integrations; then
  pyroot=$tmp/python
  mkdir -p "$pyroot"
  cp -r bindings/python/sqlite_idempotency "$pyroot/"
  cp bindings/node/words.json "$pyroot/sqlite_idempotency/"
  find "$pyroot" -name __pycache__ -prune -exec rm -rf {} +
  cp "$ext" "$pyroot/sqlite_idempotency/"
  PYTHONPATH=$pyroot PYTHONDONTWRITEBYTECODE=1 run_checked integrations python "$PY" tests/python/test_tools.py
  mkdir -p "$tmp/docs-py"
  if ! n=$(docs_blocks Python py "$tmp/docs-py"); then
    echo "FAIL integrations.docs:python: $n"
    rc=1
  elif [ "$n" -eq 0 ]; then
    echo "FAIL integrations.docs:python: no runnable Python block in the Python section of $DOCS"
    rc=1
  else
    for f in "$tmp"/docs-py/*.py; do
      if out=$(cd "$tmp/docs-py" && PYTHONPATH=$pyroot PYTHONDONTWRITEBYTECODE=1 timeout 60 "$PY" "$f" 2>&1); then
        echo "PASS integrations.docs:python-$(basename "$f" .py) (the Python section's block $(basename "$f" .py) of $DOCS runs as written)"
      else
        echo "FAIL integrations.docs:python-$(basename "$f" .py): $(tr '\n' ' ' <<<"$out")"
        rc=1
      fi
    done
  fi
fi

exit $rc
