#!/usr/bin/env bash
# The bindings' examples of docs/install.md ("Every binding"), run
# as written: each block marked <!-- run by tests/suites/51-more-bindings.sh -->
# (python with its sqlite3 and with APSW, js with better-sqlite3, ruby with the sqlite3 gem, php with SQLite3, go with
# mattn/go-sqlite3 in GOPATH mode over Debian's package, and a console
# transcript of sqlite-utils, each "$ " line run and its output compared;
# rust with rusqlite, a Cargo project of the page's toml blocks, offline over
# Debian's crates; tcl with libsqlite3-tcl; perl with DBD::SQLite) is a
# program run in a fresh directory holding the extension as ./idempotency.so,
# its stdout compared with the ```text block marked <!-- output --> after it.
# js blocks run on Node 24's node:sqlite and on Deno (the same program), or
# on Bun (a bun:sqlite program); those runtimes are npm packages installed
# once into build/runtimes. A runtime that is absent is a SKIP naming the
# Debian package or the npm install that failed (.ci/run installs the Debian
# ones).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/interp.sh
plain_ext bindings python better-sqlite3 apsw ruby php go rust sqlite-utils node-sqlite deno bun tcl perl
PY=/usr/bin/python3
PAGE=docs/install.md
rc=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the marked blocks (tests/python/doc_blocks.py), then named by how each
# runs: NN.py (Python's sqlite3), NN.apsw, NN.bsq (better-sqlite3), NN.bun
# (bun:sqlite), NN.mjs and NN.deno (node:sqlite: Node 24 and Deno run the
# same program), NN.console (its own expected output), NN.rs (after its two
# toml blocks, kept as NN.toml), NN.rb, NN.go, NN.php, NN.tcl, NN.pl
if ! raw=$("$PY" tests/python/doc_blocks.py --suite 51-more-bindings "$PAGE" "$tmp/blocks" 2>&1); then
  echo "FAIL bindings.more: the blocks of $PAGE could not be read: $raw"
  exit 1
fi
names=
for b in $raw; do
  n=${b%%.*}
  case ${b#*.} in
    python) if grep -q '^import apsw' "$tmp/blocks/$b"; then e=apsw; else e=py; fi ;;
    js) if grep -q "bun:sqlite" "$tmp/blocks/$b"; then e=bun; elif grep -q "better-sqlite3" "$tmp/blocks/$b"; then e=bsq; else e=mjs; fi ;;
    ruby) e=rb ;;
    rust) e=rs ;;
    perl) e=pl ;;
    *) e=${b#*.} ;;
  esac
  [ "$b" = "$n.$e" ] || mv "$tmp/blocks/$b" "$tmp/blocks/$n.$e"
  case $e in
    toml) continue ;; # a Rust program's Cargo.toml and .cargo/config.toml, before it
    console) cp "$tmp/blocks/$n.console" "$tmp/blocks/$n.out" ;; # a transcript is its own expected output
    mjs) cp "$tmp/blocks/$n.mjs" "$tmp/blocks/$n.deno"; [ -f "$tmp/blocks/$n.out" ] && names+=" $n.deno" ;;
  esac
  names+=" $n.$e"
done
[ -n "$names" ] || { echo "FAIL bindings.more: $PAGE has no block marked for this suite"; exit 1; }

# Node 24 (node:sqlite), Deno and Bun are npm packages (each ships its
# binary), installed once into build/runtimes (tests/lib/runtimes.sh); a
# machine that cannot reach npm skips them
ROOT=$PWD
# shellcheck source=tests/lib/runtimes.sh
. tests/lib/runtimes.sh
runtimes_ready

# a console block's transcript: each "$ command" line run with bash, then its output
cat >"$tmp/transcript.py" <<'PY'
import subprocess, sys
for line in open(sys.argv[1], encoding="utf-8").read().split("\n"):
    if line.startswith("$ "):
        r = subprocess.run(["bash", "-c", line[2:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sys.stdout.write(line + "\n" + r.stdout)
PY

for f in $names; do
  n=${f%.*}
  lang=${f#*.}
  dir=$tmp/run-$n-$lang
  run=$f # the program's file name in $dir
  case $lang in deno | bun | bsq) run=$n.mjs ;; apsw) run=$n.py ;; esac
  case $lang in
    py) name=python; ready=
        "$PY" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension' >/dev/null 2>&1 || ready="$PY's sqlite3 cannot load extensions"
        cmd=("$PY" "$run"); pkg="Debian: apt-get install python3" ;;
    apsw) name=apsw; ready=
        "$PY" -c 'import apsw' >/dev/null 2>&1 || ready="$PY cannot import apsw"
        cmd=("$PY" "$run"); pkg="Debian: apt-get install python3-apsw" ;;
    rb) name=ruby; ready=
        ruby -e 'require "sqlite3"' >/dev/null 2>&1 || ready="no ruby, or no sqlite3 gem"
        cmd=(ruby "$f"); pkg="Debian: apt-get install ruby-sqlite3" ;;
    go) name=go; ready=
        command -v go >/dev/null 2>&1 || ready="no go"
        [ -d /usr/share/gocode/src/github.com/mattn/go-sqlite3 ] || ready="no mattn/go-sqlite3"
        cmd=(sh -c "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$tmp/gocache GOFLAGS= go build -o example $f && ./example"); pkg="Debian: apt-get install golang-go golang-github-mattn-go-sqlite3-dev" ;;
    console) name=sqlite-utils; ready=$(command -v sqlite-utils >/dev/null 2>&1 || echo "no sqlite-utils")
        cmd=("$PY" "$tmp/transcript.py" "$f"); pkg="Debian: apt-get install sqlite-utils" ;;
    rs) name=rust; ready=
        command -v cargo >/dev/null 2>&1 || ready="no cargo"
        [ -d /usr/share/cargo/registry/rusqlite-0.28.0 ] || ready="no rusqlite in Debian's registry"
        # the Cargo project: the page's two toml blocks before the program
        mkdir -p "$dir/src" "$dir/.cargo"
        for t in "$tmp"/blocks/*.toml; do
          if grep -q '^\[package\]' "$t"; then cp "$t" "$dir/Cargo.toml"; else cp "$t" "$dir/.cargo/config.toml"; fi
        done
        cp "$tmp/blocks/$f" "$dir/src/main.rs"
        cmd=(sh -c "CARGO_TARGET_DIR=$tmp/cargo-target cargo run -q"); pkg="Debian: apt-get install cargo librust-rusqlite-dev" ;;
    mjs) name=node-sqlite; ready=${runtimes_why:-}; [ -n "$NODE24" ] || ready=${ready:-no node@24}
        cmd=("$NODE24" "$f"); pkg="npm install node@24, which failed or was not run" ;;
    deno) name=deno; ready=${runtimes_why:-}; [ -n "$DENO" ] || ready=${ready:-no deno}
        cmd=(env NO_COLOR=1 DENO_DIR="$tmp/deno" "$DENO" run --allow-ffi --allow-read --allow-write "$run"); pkg="npm install deno, which failed or was not run" ;;
    bun) name=bun; ready=${runtimes_why:-}; [ -n "$BUN" ] || ready=${ready:-no bun}
        cmd=("$BUN" "$run"); pkg="npm install bun, which failed or was not run" ;;
    bsq) name=better-sqlite3; ready=
         [ -f "$ROOT/tests/js/node_modules/better-sqlite3/package.json" ] || ready="better-sqlite3 is not in tests/js/node_modules (npm ci there)"
         cmd=(node "$run"); pkg="npm ci in tests/js" ;;
    tcl) name=tcl; ready=
         echo 'package require sqlite3' | tclsh >/dev/null 2>&1 || ready="no tclsh, or no sqlite3 package"
         cmd=(tclsh "$f"); pkg="Debian: apt-get install tcl libsqlite3-tcl" ;;
    pl) name=perl; ready=
         perl -MDBI -MDBD::SQLite -MJSON::PP -e 1 >/dev/null 2>&1 || ready="no DBI, DBD::SQLite or JSON::PP"
         cmd=(perl "$f"); pkg="Debian: apt-get install libdbd-sqlite3-perl" ;;
    php) name=php; ready=
         php -r 'exit(class_exists("SQLite3") ? 0 : 1);' >/dev/null 2>&1 || ready="no php, or no SQLite3 class"
         cmd=(php -d "sqlite3.extension_dir=$dir" "$f"); pkg="Debian: apt-get install php8.2-cli php8.2-sqlite3" ;;
  esac
  if [ -n "$ready" ] || ! command -v "${cmd[0]}" >/dev/null 2>&1; then
    echo "SKIP bindings.$name: its runtime is absent (${ready:-not found}; $pkg)"
    continue
  fi
  if [ ! -f "$tmp/blocks/$n.out" ]; then
    echo "FAIL bindings.$name:docs-example: the block is not followed by its <!-- output --> text block"
    rc=1
    continue
  fi
  mkdir -p "$dir"
  [ "$lang" = bsq ] && ln -s "$ROOT/tests/js/node_modules" "$dir/node_modules"
  cp "$ext" "$dir/idempotency.so"
  cp "$tmp/blocks/$f" "$dir/$run"
  out=$(cd "$dir" && timeout 60 "${cmd[@]}" 2>&1)
  status=$?
  if [ "$status" -ne 0 ]; then
    echo "FAIL bindings.$name:docs-example: exit $status: $(head -c 400 <<<"$out")"
    rc=1
  elif [ "$out" != "$(cat "$tmp/blocks/$n.out")" ]; then
    echo "FAIL bindings.$name:docs-example: printed $(head -c 400 <<<"$out" | tr '\n' '|') (want $(tr '\n' '|' <"$tmp/blocks/$n.out"))"
    rc=1
  else
    echo "PASS bindings.$name:docs-example ($PAGE, $(wc -l <<<"$out") lines as shown)"
  fi
done
exit $rc
