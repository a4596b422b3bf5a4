# shellcheck shell=bash
# tests/lib/stress.sh: shared by the suites that run one program of
# tests/c (30-race.sh, 31-crash.sh, 32-oom.sh, 33-wait.sh). Sourced;
# sets globals.

# stress_prog NAME: sets BUILD, EXT, prog=$BUILD/NAME and tmp (a directory
# removed on exit). A missing program or extension is a FAIL (exit 1).
stress_prog() {
  BUILD=${BUILD:-build}
  EXT=${EXT:-$BUILD/idempotency.so}
  prog=$BUILD/$1
  if [ ! -x "$prog" ] || [ ! -f "$EXT" ]; then
    echo "FAIL $1:setup: $prog or $EXT is missing (make test-programs)"
    exit 1
  fi
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064  # $tmp is expanded now, on purpose
  trap "rm -rf '$tmp'" EXIT
}
