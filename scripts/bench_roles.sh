#!/bin/sh
# bench_roles.sh: what the role capture (OOMLENS_ROLES, on by default in
# manage mode) adds to each cudaMalloc+cudaFree pair of a Python job, in
# instructions (valgrind's callgrind, repeatable on a shared machine), on
# the simulated CUDA: scripts/bench_pairs.py under manage mode with the
# default capture, with OOMLENS_ROLES=0, and with OOMLENS_STACKS=1 (Python
# and native frames, every allocation) for comparison. SIZE picks the
# allocation's size (default 1M: about the sampling mean, so about two in
# three pairs are sampled; 64M: nearly every one). The difference of two
# run lengths per pair, as scripts/bench_hooks.sh counts.
set -eu
cd "$(dirname "$0")/.."
scripts/setup.sh src/liboomlens.so tests/sim/libcuda.so.1 tests/sim/libcudart.so.13 >/dev/null
python=$(${PYTHON:-python3} -c 'import sys; print(sys.executable)')
sim="$PWD/build/tests/sim"
lib="$PWD/build/src/liboomlens.so"
export OOMLENS_REPORT_AT_EXIT=0 OOMLENS_MANAGE=1 PYTHONHASHSEED=0
export BENCH_PAIR_SIZE="${SIZE:-1048576}"
count_py() { # PAIRS [env...] -> instructions of the Python job
  pairs=$1; shift
  out=$(mktemp -p build)
  env LD_LIBRARY_PATH="$sim" LD_PRELOAD="$lib" "$@" valgrind --tool=callgrind \
    --callgrind-out-file="$out" "$python" scripts/bench_pairs.py "$sim/libcudart.so.13" \
    "$pairs" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}
for mode in roles_off roles stacks; do
  case $mode in
    roles_off) e="OOMLENS_ROLES=0" ;;
    roles) e="OOMLENS_UNUSED=1" ;;
    stacks) e="OOMLENS_STACKS=1" ;;
  esac
  a=$(count_py 1000 $e); b=$(count_py 3000 $e)
  echo "manage, Python job, $mode: $(( (b - a) / 2000 )) instructions per pair"
done
