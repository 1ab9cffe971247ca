#!/usr/bin/env bash
# `make fuzz`: build the libFuzzer targets (tests/fuzz, clang, ASan + UBSan)
# in their own build directory and run each for a while on the seed corpus.
#   scripts/fuzz_inputs.sh [BUILD_DIR] [SECONDS] [TARGET...]
# BUILD_DIR defaults to build-fuzz, SECONDS to $FUZZ_SECONDS or 60, the
# targets to all seven.  FUZZ_RUNS=N runs each N inputs instead of for SECONDS
# (the long run), FUZZ_PARALLEL targets run at once (default: the CPUs, at
# most 2: CI's two cores fuzz two targets at a time), FUZZ_FLAGS adds
# libFuzzer flags.  A crash, leak, sanitizer report, timeout (> 20 s on one
# input) or out-of-memory (> 2 GB) fails the run; the input is kept in
# BUILD_DIR/findings/<target>/ (add the minimised one to
# tests/fuzz/regress/<target>/, docs/reliability.md "Fuzzing").
# Prints one line per target: executions, executions per second, corpus size.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-fuzz}
S=${2:-${FUZZ_SECONDS:-60}}
shift 2 2>/dev/null || shift $#
TARGETS=${*:-onnx tiny dsl plan_json plan_dsl npy calib}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
PAR=${FUZZ_PARALLEL:-$((JOBS < 2 ? JOBS : 2))}

# CMAKE_FLAGS (make's; CI's -DHARP_WERROR=ON: a warning fails the build)
# configure it, again on a build directory made before
if [ ! -f "$B/Makefile" ] || [ -n "${CMAKE_FLAGS:-}" ]; then
  # shellcheck disable=SC2086
  CC=clang cmake -S . -B "$B" -DHARP_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_FLAGS:-} >/dev/null || exit 1
fi
# shellcheck disable=SC2046
cmake --build "$B" -j "$JOBS" --target $(printf 'fuzz_%s ' $TARGETS) >"$B/build.log" 2>&1 || { tail -30 "$B/build.log"; exit 1; }
python3 tests/fuzz/make_corpus.py "$B/corpus" >/dev/null || exit 1

# One target; its exit status in $B/fuzz_<t>.rc.
fuzz_one() {
  local t=$1 limit
  mkdir -p "$B/findings/$t"
  if [ -n "${FUZZ_RUNS:-}" ]; then limit="-runs=$FUZZ_RUNS"; else limit="-max_total_time=$S"; fi
  # shellcheck disable=SC2086
  "$B/tests/fuzz/fuzz_$t" "$B/corpus/$t" -dict="tests/fuzz/dict/$t.dict" $limit -timeout=20 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$B/findings/$t/" ${FUZZ_FLAGS:-} >"$B/fuzz_$t.log" 2>&1
  echo $? >"$B/fuzz_$t.rc"
}

running=0
for t in $TARGETS; do
  if [ "$running" -ge "$PAR" ]; then wait -n; running=$((running - 1)); fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

fail=0
printf '%-10s %12s %9s %8s  %s\n' target executions exec/s corpus result
for t in $TARGETS; do
  rc=$(cat "$B/fuzz_$t.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/fuzz_$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$B/fuzz_$t.log" | tail -1)
  units=$(find "$B/corpus/$t" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then res=ok; else res="FAILED (rc $rc, $B/fuzz_$t.log, $B/findings/$t/)"; fail=1; fi
  printf '%-10s %12s %9s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$units" "$res"
  if [ "$rc" -ne 0 ]; then grep -m5 -E 'ERROR|SUMMARY|oracle|runtime error' "$B/fuzz_$t.log"; fi
done
exit $fail
