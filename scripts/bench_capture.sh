#!/bin/sh
# bench_capture.sh: what the role capture (OOMLENS_ROLES, on by default in
# manage mode) costs a job shaped like a Hugging Face model under gradient
# checkpointing, in instructions per allocation and its free (valgrind's
# callgrind, repeatable on a shared machine), on the simulated CUDA:
# scripts/bench_capture.py (a stack of BENCH_DEPTH library frames, default
# 60, above allocations of 1 to 64 MiB from 40 library functions) under
# manage mode with OOMLENS_ROLES=0 and with the default capture. The
# difference of two run lengths per allocation, as scripts/bench_roles.sh
# counts. PROFILE=1 also keeps the longer run's callgrind file of each mode
# under build/ (build/bench_capture.MODE.out) for callgrind_annotate.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh src/liboomlens.so tests/sim/libcuda.so.1 tests/sim/libcudart.so.13 >/dev/null
python=$(${PYTHON:-python3} -c 'import sys; print(sys.executable)')
sim="$PWD/build/tests/sim"
lib="$PWD/build/src/liboomlens.so"
ops=${BENCH_OPS:-24}
export OOMLENS_REPORT_AT_EXIT=0 OOMLENS_MANAGE=1 PYTHONHASHSEED=0 BENCH_OPS="$ops"
count_py() { # STEPS MODE [env...] -> instructions of the Python job
  steps=$1 mode=$2; shift 2
  out=$(mktemp -p build)
  env LD_LIBRARY_PATH="$sim" LD_PRELOAD="$lib" "$@" valgrind --tool=callgrind \
    --callgrind-out-file="$out" "$python" scripts/bench_capture.py "$sim/libcudart.so.13" \
    "$steps" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$out"
  if [ "${PROFILE:-0}" = 1 ] && [ "$steps" -gt 100 ]; then
    mv "$out" "build/bench_capture.$mode.out"
  else
    rm -f "$out"
  fi
}
for mode in roles_off roles; do
  case $mode in
    roles_off) e="OOMLENS_ROLES=0" ;;
    roles) e="OOMLENS_UNUSED=1" ;;
  esac
  a=$(count_py 50 $mode $e); b=$(count_py 150 $mode $e)
  echo "manage, deep Python stack, $mode: $(( (b - a) / (100 * ops) )) instructions per allocation"
done
