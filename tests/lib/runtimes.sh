# shellcheck shell=bash
# The JavaScript runtimes npm ships as packages, installed once (all at
# once: npm prunes what a later --no-save install does not name) into
# build/runtimes: Node 24 (node@24) and Node 22 (node22, an alias of
# node@22), each with node:sqlite; Deno; Bun.
#
#   runtimes_ready   sets NODE24, NODE22, DENO, BUN (paths; empty when
#                    absent) and runtimes_why (empty, or why none could be
#                    installed: no npm, no registry)
RUNTIMES=$ROOT/build/runtimes
runtimes_ready() {
  local nm=$RUNTIMES/node_modules
  if [ ! -x "$nm/node/bin/node" ] || [ ! -x "$nm/node22/bin/node" ] || [ ! -x "$nm/.bin/deno" ] || [ ! -x "$nm/.bin/bun" ]; then
    mkdir -p "$RUNTIMES"
    if ! command -v npm >/dev/null 2>&1; then
      runtimes_why="npm is not installed"
    elif ! runtimes_why=$(cd "$RUNTIMES" && timeout 300 npm install --no-audit --no-fund --loglevel=error --no-save node@24 node22@npm:node@22 deno bun 2>&1); then
      runtimes_why="npm install node@24 node@22 deno bun failed: $(tail -1 <<<"$runtimes_why")"
    else
      runtimes_why=
    fi
  else
    runtimes_why=
  fi
  NODE24= NODE22= DENO= BUN=
  [ -x "$nm/node/bin/node" ] && NODE24=$nm/node/bin/node
  [ -x "$nm/node22/bin/node" ] && NODE22=$nm/node22/bin/node
  [ -x "$nm/.bin/deno" ] && DENO=$nm/.bin/deno
  [ -x "$nm/.bin/bun" ] && BUN=$nm/.bin/bun
}
