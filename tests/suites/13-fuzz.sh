#!/usr/bin/env bash
# libFuzzer runs of tests/fuzz/fuzz_*.c (canonicaliser, key grammar), each
# bounded by FUZZ_SECONDS (default 15; `make fuzz FUZZ_SECONDS=60` for a
# longer run). Needs clang with libFuzzer; skips, saying why, without it.
# Targets are built with ASan+UBSan into $BUILD/fuzz; the committed seed
# corpus (tests/fuzz/corpus/<target>) is read, never written: new inputs
# go to a scratch directory, crash artifacts to $BUILD/fuzz/.
# TEST_WRAP is not used: ASan binaries do not run under valgrind.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
SECONDS_EACH=${FUZZ_SECONDS:-15}
CLANG=${FUZZ_CC:-clang}
OUT="$BUILD/fuzz"
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iext -Wall -Wextra"
TARGETS="canonical grammar"

if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "SKIP fuzz: $CLANG is not installed (libFuzzer needs clang)"
  exit 0
fi
mkdir -p "$OUT"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return (int)(n & 0); }\n' \
  >"$scratch/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined -o "$scratch/probe" "$scratch/probe.c" \
     >"$scratch/probe.log" 2>&1; then
  echo "SKIP fuzz: $CLANG cannot build with -fsanitize=fuzzer ($(head -n 1 "$scratch/probe.log"))"
  exit 0
fi

rc=0
for t in $TARGETS; do
  bin="$OUT/fuzz_$t"
  # shellcheck disable=SC2086
  if ! "$CLANG" $FLAGS -o "$bin" "tests/fuzz/fuzz_$t.c" ext/canonical.c ext/grammar.c ext/shortest.c -lm \
       >"$scratch/build_$t.log" 2>&1; then
    echo "FAIL fuzz.$t.build: $(head -n 5 "$scratch/build_$t.log" | tr '\n' ' ')"
    rc=1
    continue
  fi
  if grep -q 'warning:' "$scratch/build_$t.log"; then
    echo "FAIL fuzz.$t.build: compiler warnings: $(grep -m 3 'warning:' "$scratch/build_$t.log" | tr '\n' ' ')"
    rc=1
  else
    echo "PASS fuzz.$t.build"
  fi
  mkdir -p "$scratch/corpus_$t"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  if "$bin" ${dict[@]+"${dict[@]}"} -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
       -print_final_stats=1 -artifact_prefix="$OUT/crash_${t}_" \
       "$scratch/corpus_$t" "tests/fuzz/corpus/$t" >"$scratch/run_$t.log" 2>&1; then
    runs=$(grep -m 1 'stat::number_of_executed_units' "$scratch/run_$t.log" | awk '{print $2}')
    echo "PASS fuzz.$t.run"
    echo "   fuzz_$t: ${runs:-?} inputs in ${SECONDS_EACH}s"
  else
    echo "FAIL fuzz.$t.run: $(grep -m 1 -E 'ERROR|check failed|runtime error|SUMMARY' "$scratch/run_$t.log") (artifact under $OUT/crash_${t}_*)"
    tail -n 30 "$scratch/run_$t.log"
    rc=1
  fi
done
exit $rc
