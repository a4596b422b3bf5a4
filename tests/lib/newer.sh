# shellcheck shell=bash
# tests/lib/newer.sh: shared by the suites that also run on the newer SQLite
# that tests/suites/60-newer-sqlite.sh builds into build/compat
# (64-plain-sql.sh, 65-upgrade.sh). Sourced.

# newer_ready PREFIX: returns 0 when build/compat holds the newer runner and
# extension and this is the plain build; else prints "SKIP PREFIX:newer"
# with the reason and returns 1.
newer_ready() {
  if [ "${BUILD:-build}" != build ]; then
    echo "SKIP $1:newer: runs in the plain build only (this is BUILD=$BUILD); the newer SQLite is not rebuilt with sanitizers"
  elif [ ! -x build/compat/sqltest ] || [ ! -f build/compat/idempotency.so ]; then
    echo "SKIP $1:newer: build/compat is not built (tests/suites/60-newer-sqlite.sh, which runs before this suite, builds it and says why when it cannot)"
  else
    return 0
  fi
  return 1
}
