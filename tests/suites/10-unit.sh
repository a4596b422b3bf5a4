#!/usr/bin/env bash
# C unit tests of the pure helpers (canonicaliser, key grammar, digest),
# linked without SQLite. Built by `make test-programs` into $BUILD.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
rc=0
# test_canonical checks the numbers under a locale with a decimal comma:
# made with localedef into $BUILD/locale when none is installed (it skips,
# saying why, when neither works).
if [ ! -d "$BUILD/locale/de_DE.UTF-8" ] && command -v localedef >/dev/null 2>&1 &&
  ! locale -a 2>/dev/null | grep -qiE '^(de_DE|fr_FR)\.utf-?8$'; then
  mkdir -p "$BUILD/locale"
  localedef -i de_DE -f UTF-8 "$BUILD/locale/de_DE.UTF-8" >/dev/null 2>&1 ||
    rm -rf "$BUILD/locale/de_DE.UTF-8"
fi
if [ -d "$BUILD/locale/de_DE.UTF-8" ]; then
  export LOCPATH="$PWD/$BUILD/locale"
  case $BUILD in /*) export LOCPATH="$BUILD/locale" ;; esac
fi
for prog in test_canonical test_grammar; do
  if [ ! -x "$BUILD/$prog" ]; then
    echo "FAIL unit.$prog: $BUILD/$prog is not built (run: make test-programs)"
    rc=1
    continue
  fi
  ${TEST_WRAP:-} "$BUILD/$prog" || rc=1
done
exit $rc
