#!/usr/bin/env bash
# The registered SQL surface against tests/fixtures/functions.txt: what loading the
# extension adds to pragma_function_list (name, nArg, flag class) and to
# pragma_module_list must be exactly what the file lists; every listed
# function must appear in some tests/sql/NN-*.sql file. The lists come from
# the runner $BUILD/sqltest (--eval), with and without the extension, so
# sanitized builds work too.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
EXT=${EXT:-$BUILD/idempotency.so}
list=tests/fixtures/functions.txt
runner=$BUILD/sqltest

if [ ! -x "$runner" ] || [ ! -f "$EXT" ]; then
  echo "FAIL functions:setup: $runner or $EXT is missing (make test-programs)"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# SQLITE_DETERMINISTIC 0x800, SQLITE_DIRECTONLY 0x80000, SQLITE_INNOCUOUS 0x200000
fsql="SELECT DISTINCT name, narg, CASE flags & 0x280800
        WHEN 0x200800 THEN 'pure' WHEN 0x80000 THEN 'writes' WHEN 0x200000 THEN 'trigger'
        ELSE 'flags=' || printf('0x%x', flags & 0x280800) END
      FROM pragma_function_list ORDER BY 1, 2, 3"
msql="SELECT DISTINCT name FROM pragma_module_list ORDER BY 1"
# run OUT ARGS...: the runner's rows into OUT; a failure (status 99 is a
# TEST_WRAP finding such as a leak) ends the suite with one FAIL line.
run() {
  local out=$1 rc
  shift
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  ${TEST_WRAP:-} "$runner" "$@" >"$out"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "FAIL functions:list: sqltest $* exited with status $rc"
    exit 1
  fi
}
run "$tmp/f-before" --eval "$fsql"
run "$tmp/f-after" --ext "$EXT" --eval "$fsql"
run "$tmp/m-before" --eval "$msql"
run "$tmp/m-after" --ext "$EXT" --eval "$msql"
tr '\t' ' ' <"$tmp/f-before" | sort >"$tmp/fb"
tr '\t' ' ' <"$tmp/f-after" | sort >"$tmp/fa"
sort "$tmp/m-before" >"$tmp/mb"
sort "$tmp/m-after" >"$tmp/ma"
comm -13 "$tmp/fb" "$tmp/fa" >"$tmp/f-added"   # "name narg class"
comm -13 "$tmp/mb" "$tmp/ma" >"$tmp/m-added"
[ -s "$tmp/f-added" ] || echo "FAIL functions:loaded: loading $EXT added no function"

# Parse functions.txt.
: >"$tmp/f-listed"
: >"$tmp/m-listed"
lineno=0 bad=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  line=${line%%#*}
  read -r -a w <<<"$line"
  [ "${#w[@]}" -eq 0 ] && continue
  if [ "${w[0]}" = module ] && [ "${#w[@]}" -eq 2 ]; then
    echo "${w[1]}" >>"$tmp/m-listed"
  elif [ "${#w[@]}" -eq 3 ] && [[ ${w[1]} =~ ^-?[0-9]+$ ]] && [[ ${w[2]} =~ ^(pure|writes|trigger)$ ]]; then
    echo "${w[0]} ${w[1]} ${w[2]}" >>"$tmp/f-listed"
  else
    echo "FAIL functions:format: $list line $lineno: '$line' is neither '<name> <nArg> pure|writes|trigger' nor 'module <name>'"
    bad=1
  fi
done <"$list"
[ "$bad" = 0 ] && echo "PASS functions:format"
for f in f-listed m-listed; do
  dup=$(cut -d' ' -f1,2 "$tmp/$f" | sort | uniq -d)
  [ -n "$dup" ] && echo "FAIL functions:duplicate: listed twice in $list: $dup"
done

# Every listed function is registered, with its nArg and flag class.
while read -r name narg class; do
  got=$(awk -v n="$name" -v a="$narg" '$1 == n && $2 == a { print $3 }' "$tmp/f-added")
  if [ -z "$got" ]; then
    if awk -v n="$name" -v a="$narg" '$1 == n && $2 == a { f = 1 } END { exit !f }' "$tmp/fb"; then
      echo "FAIL functions:$name/$narg: exists before the extension is loaded"
    else
      echo "FAIL functions:$name/$narg: not registered"
    fi
  elif [ "$got" = "$class" ]; then
    echo "PASS functions:$name/$narg:$class"
  else
    echo "FAIL functions:$name/$narg: listed as $class, registered as $got"
  fi
done <"$tmp/f-listed"

# Nothing is registered that is not listed.
unlisted=0
while read -r name narg class; do
  if ! awk -v n="$name" -v a="$narg" '$1 == n && $2 == a { f = 1 } END { exit !f }' "$tmp/f-listed"; then
    echo "FAIL functions:unlisted:$name/$narg: registered ($class) but not in $list"
    unlisted=1
  fi
done <"$tmp/f-added"
[ "$unlisted" = 0 ] && echo "PASS functions:no-unlisted-function"

# Modules: listed ones are added by the extension, and nothing else is.
while read -r name; do
  if grep -qxF "$name" "$tmp/m-added"; then
    echo "PASS functions:module:$name"
  elif grep -qxF "$name" "$tmp/mb"; then
    echo "FAIL functions:module:$name: exists before the extension is loaded"
  else
    echo "FAIL functions:module:$name: not registered"
  fi
done <"$tmp/m-listed"
unlisted=0
while read -r name; do
  if ! grep -qxF "$name" "$tmp/m-listed"; then
    echo "FAIL functions:unlisted-module:$name: registered but not in $list"
    unlisted=1
  fi
done <"$tmp/m-added"
[ "$unlisted" = 0 ] && echo "PASS functions:no-unlisted-module"

# Every listed function is exercised by some SQL test file.
cut -d' ' -f1 "$tmp/f-listed" | sort -u | while read -r name; do
  if grep -lqE "(^|[^A-Za-z0-9_])${name}[[:space:]]*[(]" tests/sql/[0-9]*.sql 2>/dev/null; then
    echo "PASS functions:tested:$name"
  else
    echo "FAIL functions:tested:$name: no tests/sql/NN-*.sql file calls $name()"
  fi
done
