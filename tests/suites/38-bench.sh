#!/usr/bin/env bash
# The bench program's own behaviour, not its figures (speed is measured by
# make bench only): a racing process that fails ends the race section
# with its error instead of leaving the others waiting, before the start
# (BENCH_RACE_FAIL=setup) and in the middle of its claims (=claim); a run
# that passes its deadline (BENCH_RACE_TIMEOUT) is stopped; no racer is
# left running afterwards; and the race and memory sections run to their
# end on tiny sizes. The program is $BUILD/bench/bench (bench/bench.c),
# built by make test; its fixtures here are small documents made in a
# temporary directory. Each run is bounded by timeout(1): a hang is a FAIL.
set -u
cd "$(dirname "$0")/../.." || exit 1
if [ -n "${SANITIZE:-}" ]; then
  # the bench program measures speed, so it is built without the
  # sanitizers, and an unsanitized program cannot load the sanitized
  # extension; make test and make valgrind run this suite
  echo "SKIP bench: runs in make test and make valgrind only: the bench program is built without the sanitizers"
  exit 0
fi
# shellcheck source=tests/lib/stress.sh
. tests/lib/stress.sh
stress_prog bench/bench
mkdir -p "$tmp/fx" "$tmp/db"
echo '{"to":"a@example.com","subject":"hi"}' >"$tmp/fx/small.json"
echo '{"items":[1,2,3],"note":"medium"}' >"$tmp/fx/medium.json"
echo '{"rows":[{"a":1},{"b":2}],"note":"large"}' >"$tmp/fx/large.json"
rc=0

# bench_run NAME ENV...: run the bench with the environment given; sets
# out (stdout and stderr) and st (its exit status; 124 when timeout ended it)
bench_run() {
  local name=$1
  shift
  # shellcheck disable=SC2086  # TEST_WRAP is a command line
  out=$(env TMPDIR="$tmp/db" "$@" timeout 60 ${TEST_WRAP:-} "$prog" "$EXT" "$tmp/fx" 2>&1)
  st=$?
  printf '%s\n' "$out" >"$tmp/$name.out"
}

# racers_left: is a racing process still running? The bench reaps every
# racer before it exits, so any process still holding a file of this
# test's database directory open is a leftover.
racers_left() {
  local f
  for f in /proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "$tmp/db/"*) return 0 ;; esac
  done
  return 1
}

check_fail() {
  local name=$1 want_child=$2 want_parent=$3
  if [ "$st" -eq 124 ]; then
    echo "FAIL $name: the bench hung (stopped by timeout after 60 s)"
    rc=1
  elif [ "$st" -ne 1 ]; then
    echo "FAIL $name: exit status $st, expected 1; output in $tmp/$name.out:"
    printf '%s\n' "$out" | tail -5
    rc=1
  elif [ -n "$want_child" ] && ! grep -qxF "$want_child" <<<"$out"; then
    echo "FAIL $name: the racer's error is missing: $want_child"
    printf '%s\n' "$out" | tail -5
    rc=1
  elif ! grep -qxF "$want_parent" <<<"$out"; then
    echo "FAIL $name: the section's error is missing: $want_parent"
    printf '%s\n' "$out" | tail -5
    rc=1
  elif racers_left; then
    echo "FAIL $name: a racing process is still running after the bench ended"
    rc=1
  else
    echo "PASS $name"
  fi
}

small=(BENCH_SECTIONS=race BENCH_RACE_KEYS=100 BENCH_RACE_ROUNDS=1)

bench_run race-fail-setup "${small[@]}" BENCH_RACE_FAIL=setup
check_fail bench:race-fail-setup \
  "bench: race setup: BENCH_RACE_FAIL=setup: this racer fails on purpose" \
  "bench: race: racing process 2 of 2 (ledger, run 2) exited with status 1 before the start; the other racers were stopped"

bench_run race-fail-claim "${small[@]}" BENCH_RACE_FAIL=claim
check_fail bench:race-fail-claim \
  "bench: race claim: BENCH_RACE_FAIL=claim: this racer fails on purpose" \
  "bench: race: racing process 2 of 2 (ledger, run 2) exited with status 1; the other racers were stopped"

if [ -n "${TEST_WRAP:-}" ]; then
  # under valgrind the racers' start alone can take longer than the deadline
  echo "SKIP bench:race-deadline: a 1-second deadline means nothing under TEST_WRAP"
else
  bench_run race-deadline BENCH_SECTIONS=race BENCH_RACE_KEYS=1000000 BENCH_RACE_ROUNDS=1 \
    BENCH_RACE_TIMEOUT=1
  check_fail bench:race-deadline "" "bench: race: racers (ledger, run 0) still running after 1 s"
fi

bench_run race-bad-mode "${small[@]}" BENCH_RACE_FAIL=sometimes
check_fail bench:race-fail-refused "" \
  "bench: BENCH_RACE_FAIL must be 'setup' or 'claim', got: sometimes"

# the sections run to their end: every run's keys admitted once (the bench
# checks it and exits 1 otherwise), and the memory series printed
bench_run race-ok "${small[@]}"
if [ "$st" -eq 0 ] && grep -q '^4  *[0-9]' <<<"$out"; then
  echo "PASS bench:race-runs"
else
  echo "FAIL bench:race-runs: exit status $st; output in $tmp/race-ok.out:"
  printf '%s\n' "$out" | tail -5
  rc=1
fi
claims=20000
if [ -n "${TEST_WRAP:-}" ]; then claims=1000; fi
bench_run memory-ok BENCH_SECTIONS=memory BENCH_MEMORY_CLAIMS=$claims
if [ "$st" -eq 0 ] && grep -q '^after the first claim  *[0-9]' <<<"$out" &&
  grep -q "^after $claims claims  *[0-9]" <<<"$out" &&
  grep -q '^memory outside the page cache, end / 1st claim .* met$' <<<"$out"; then
  echo "PASS bench:memory-runs"
else
  echo "FAIL bench:memory-runs: exit status $st; output in $tmp/memory-ok.out:"
  printf '%s\n' "$out" | tail -8
  rc=1
fi
exit $rc
