#!/bin/sh
# bench_hooks.sh: what oomlens adds to each cudaMalloc+cudaFree pair.
#
# 1. Instructions (valgrind's callgrind: repeatable on a shared machine), on
#    the simulated CUDA: the same program with and without the library, the
#    difference of two run lengths per pair. Modes: pass-through
#    (OOMLENS_ENABLE=0), observe, native stacks (OOMLENS_STACKS=1); then a
#    Python job (scripts/bench_pairs.py, ctypes) without the library,
#    observe, native stacks only (OOMLENS_PYTHON_FRAMES=0), and stacks with
#    Python frames; and the C job with the trace file (OOMLENS_TRACE, its
#    writer thread's formatting included).
# 2. Wall-clock ns per pair (median of 20 batches) on tests/progs/null, a
#    runtime whose calls cost next to nothing, so what remains is ours; a
#    C program and the Python job, the same modes.
# PYTHON (default python3) runs the Python job.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh src/liboomlens.so tests/progs/cuda_prog tests/sim/libcuda.so.1 \
  tests/sim/libcudart.so.13 tests/progs/null/null_pairs tests/progs/null/libcudart.so.13 >/dev/null
python=$(${PYTHON:-python3} -c 'import sys; print(sys.executable)')
sim="$PWD/build/tests/sim"
null="$PWD/build/tests/progs/null"
lib="$PWD/build/src/liboomlens.so"
export OOMLENS_REPORT=/tmp/oomlens-bench-%p.txt OOMLENS_REPORT_AT_EXIT=0
export PYTHONHASHSEED=0 # the Python job's instruction counts repeat

count() { # PAIRS [env...] -> instructions of the C program
  pairs=$1; shift
  out=$(mktemp)
  env LD_LIBRARY_PATH="$sim" "$@" valgrind --tool=callgrind --callgrind-out-file="$out" \
    build/tests/progs/cuda_prog pairs "$pairs" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}
count_py() { # PAIRS [env...] -> instructions of the Python job
  pairs=$1; shift
  out=$(mktemp)
  env LD_LIBRARY_PATH="$sim" "$@" valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$python" scripts/bench_pairs.py "$sim/libcudart.so.13" "$pairs" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}
mode_env() { # MODE -> its environment
  case $1 in
    plain) echo "OOMLENS_UNUSED=1" ;;
    passthrough) echo "LD_PRELOAD=$lib OOMLENS_ENABLE=0" ;;
    observe) echo "LD_PRELOAD=$lib" ;;
    stacks) echo "LD_PRELOAD=$lib OOMLENS_STACKS=1 OOMLENS_PYTHON_FRAMES=0" ;;
    python) echo "LD_PRELOAD=$lib OOMLENS_STACKS=1" ;;
    trace) echo "LD_PRELOAD=$lib OOMLENS_TRACE=/tmp/oomlens-bench-$$.trace" ;;
  esac
}

echo "== instructions per pair (callgrind, simulated CUDA)"
{
for mode in plain passthrough observe stacks trace; do
  # shellcheck disable=SC2046
  a=$(count 1000 $(mode_env $mode)); b=$(count 3000 $(mode_env $mode))
  echo "C $mode $(( (b - a) / 2000 ))"
done
for mode in plain observe stacks python; do
  # shellcheck disable=SC2046
  a=$(count_py 1000 $(mode_env $mode)); b=$(count_py 3000 $(mode_env $mode))
  echo "Python $mode $(( (b - a) / 2000 ))"
done
} | awk '{per[$1 " " $2]=$3; print "  " $1 " job, " $2 ": " $3}
  END {print "  oomlens adds, C job: pass-through " per["C passthrough"]-per["C plain"] \
             ", observe " per["C observe"]-per["C plain"] \
             ", native stacks " per["C stacks"]-per["C plain"] \
             ", trace file " per["C trace"]-per["C plain"];
       print "  oomlens adds, Python job: observe " per["Python observe"]-per["Python plain"] \
             ", native stacks " per["Python stacks"]-per["Python plain"] \
             ", stacks with Python frames " per["Python python"]-per["Python plain"]}'

echo "== wall-clock ns per pair (median of 20 batches, null runtime)"
{
for mode in plain passthrough observe stacks trace; do
  # shellcheck disable=SC2046
  echo "C $mode $(env LD_LIBRARY_PATH="$null" $(mode_env $mode) build/tests/progs/null/null_pairs 200000)"
done
for mode in plain observe stacks python; do
  # shellcheck disable=SC2046
  echo "Python $mode $(env $(mode_env $mode) "$python" scripts/bench_pairs.py \
    "$null/libcudart.so.13" 100000 --time)"
done
} | awk '{per[$1 " " $2]=$3; print "  " $1 " job, " $2 ": " $3 " ns"}
  END {print "  oomlens adds, C job: pass-through " per["C passthrough"]-per["C plain"] \
             " ns, observe " per["C observe"]-per["C plain"] \
             " ns, native stacks " per["C stacks"]-per["C plain"] " ns";
       print "  oomlens adds, Python job: observe " per["Python observe"]-per["Python plain"] \
             " ns, native stacks " per["Python stacks"]-per["Python plain"] \
             " ns, stacks with Python frames " per["Python python"]-per["Python plain"] " ns"}'
rm -f /tmp/oomlens-bench-*.trace
