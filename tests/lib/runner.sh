# shellcheck shell=bash
# tests/lib/runner.sh: shared by the suites that run the SQL runner
# (tests/c/sqltest.c) on files they copy or write (64-plain-sql.sh,
# 65-upgrade.sh, 66-defensive-files.sh). Sourced.

# runner_failed LABEL FILE STATUS OUT: returns 0 when a run of the runner
# on FILE that exited with STATUS and printed OUT (its lines shown by the
# caller) failed: a FAIL line in OUT, or one printed here as "FAIL LABEL:"
# naming FILE and STATUS: 99, a finding of $TEST_WRAP (make valgrind);
# another non-zero status without a FAIL line (a crash, or a sanitizer's
# report such as LeakSanitizer's at exit); or a run that reported no check.
runner_failed() {
  local label=$1 file=$2 status=$3 out=$4
  if [ "$status" -eq 99 ]; then
    echo "FAIL $label: memory errors or leaks reported under TEST_WRAP (status 99) running $file"
  elif grep -q '^FAIL ' <<<"$out"; then
    :
  elif [ "$status" -ne 0 ]; then
    echo "FAIL $label: the runner exited with status $status running $file without reporting a failed check"
  elif ! grep -q '^PASS ' <<<"$out"; then
    echo "FAIL $label: the runner reported no check running $file"
  else
    return 1
  fi
}

# runner_path PATH: PATH made absolute (from the top of the tree, the
# suites' working directory), for a runner started in a directory of its
# own.
runner_path() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$PWD/$1" ;;
  esac
}
