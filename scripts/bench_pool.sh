#!/bin/sh
# bench_pool.sh: builds and runs the pool benchmark (tests/progs/bench_pool.c)
# on one core: replay speed, peak reserved / peak allocated and device
# traffic per recorded trace for every replay policy, and the median cost of
# an allocate+free pair. Figures to read, not a pass/fail test.
# Usage: scripts/bench_pool.sh [TRACE...]   (default: every trace in tests/data)
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || scripts/setup.sh >/dev/null
ninja -C build tests/progs/bench_pool >/dev/null
pin=""
command -v taskset >/dev/null 2>&1 && pin="taskset -c 0"
echo "bench_pool: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
exec $pin build/tests/progs/bench_pool tests/data "$@"
