#!/bin/sh
# bench_hooks.sh: what oomlens adds to each cudaMalloc+cudaFree pair, in
# instructions (valgrind's callgrind: repeatable on a shared machine), on
# the simulated CUDA: the same program with and without the library, and
# the difference per pair. Observe mode, with call stacks (OOMLENS_STACKS=1),
# with the trace file (OOMLENS_TRACE, its writer thread's formatting
# included), and pass-through (OOMLENS_ENABLE=0).
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh src/liboomlens.so tests/progs/cuda_prog tests/sim/libcuda.so.1 \
  tests/sim/libcudart.so.13 >/dev/null
export LD_LIBRARY_PATH="$PWD/build/tests/sim"
export OOMLENS_REPORT=/tmp/oomlens-bench-%p.txt OOMLENS_REPORT_AT_EXIT=0
count() { # PAIRS [preload] [env...] -> total instructions
  pairs=$1; shift
  out=$(mktemp)
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$out" \
    build/tests/progs/cuda_prog pairs "$pairs" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}
lib="$PWD/build/src/liboomlens.so"
trace=/tmp/oomlens-bench-$$.trace
for mode in plain observe stacks trace passthrough; do
  case $mode in
    plain) a=$(count 1000); b=$(count 3000) ;;
    observe) a=$(count 1000 LD_PRELOAD="$lib"); b=$(count 3000 LD_PRELOAD="$lib") ;;
    stacks) a=$(count 1000 LD_PRELOAD="$lib" OOMLENS_STACKS=1)
            b=$(count 3000 LD_PRELOAD="$lib" OOMLENS_STACKS=1) ;;
    trace) a=$(count 1000 LD_PRELOAD="$lib" OOMLENS_TRACE="$trace")
           b=$(count 3000 LD_PRELOAD="$lib" OOMLENS_TRACE="$trace"); rm -f "$trace" ;;
    passthrough) a=$(count 1000 LD_PRELOAD="$lib" OOMLENS_ENABLE=0)
                 b=$(count 3000 LD_PRELOAD="$lib" OOMLENS_ENABLE=0) ;;
  esac
  echo "$mode $(( (b - a) / 2000 ))"
done | awk '{per[$1]=$2; print "instructions per pair, " $1 ": " $2}
  END {print "oomlens adds per pair: observe " per["observe"]-per["plain"] \
             ", with stacks " per["stacks"]-per["plain"] \
             ", with the trace file " per["trace"]-per["plain"] \
             ", pass-through " per["passthrough"]-per["plain"]}'
