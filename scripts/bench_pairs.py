"""bench_pairs.py LIBCUDART PAIRS [--time]: cudaMalloc(1 MiB) + cudaFree
pairs from a Python line, through ctypes, for scripts/bench_hooks.sh (the
instructions oomlens adds when the job is Python: call sites with Python
frames) and, with --time, the wall-clock ns per pair (median of batches).
BENCH_PAIR_SIZE: the size of each allocation (default 1 MiB)."""
import ctypes
import os
import sys
import time

runtime = ctypes.CDLL(sys.argv[1])
pairs = int(sys.argv[2])
size = ctypes.c_size_t(int(os.environ.get("BENCH_PAIR_SIZE", 1 << 20)))


def model_step(ptr):
    runtime.cudaMalloc(ctypes.byref(ptr), size)
    runtime.cudaFree(ptr)


def run(count):
    ptr = ctypes.c_void_p()
    for _ in range(count):
        model_step(ptr)


if "--time" in sys.argv:
    run(1000)  # warm: libunwind's caches, the site tables
    batch = max(pairs // 20, 1)
    times = []
    for _ in range(20):
        start = time.perf_counter_ns()
        run(batch)
        times.append((time.perf_counter_ns() - start) / batch)
    print("%.0f" % sorted(times)[len(times) // 2])
else:
    run(pairs)
