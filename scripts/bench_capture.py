"""bench_capture.py LIBCUDART STEPS [--time]: what the role capture costs a
job shaped like a Hugging Face model under gradient checkpointing, for
scripts/bench_capture.sh.

Each step goes down BENCH_DEPTH nested Python calls (default 60: a
transformers forward under checkpointing has 40 to 80), each a function of
its own, of code whose file is a library's (".../site-packages/benchlib/..."), so the capture's walk
must pass them all to reach the job's own frame (this file's step loop),
and there runs BENCH_OPS ops (default 24 allocations, each from one of 40
distinct library functions, like the many ops of a forward), each a
cudaMalloc of 1 to 64 MiB (a fixed draw, log-uniform) through ctypes,
freed at the step's end. The allocations per step are the same each step,
so the difference of two run lengths, divided by the allocations, is the
cost of one allocation and its free. With --time: the wall-clock ns per
allocation and free (median of 20 batches of steps)."""
import ctypes
import os
import random
import sys
import time

runtime = ctypes.CDLL(sys.argv[1])
steps = int(sys.argv[2])
DEPTH = int(os.environ.get("BENCH_DEPTH", "60"))
OPS = int(os.environ.get("BENCH_OPS", "24"))
FUNCTIONS = 40
MiB = 1 << 20

rng = random.Random(12)
sizes = [ctypes.c_size_t(int(MiB * 2 ** rng.uniform(0, 6))) for _ in range(OPS)]
which = [rng.randrange(FUNCTIONS) for _ in range(OPS)]

# The library: one module whose code objects carry a site-packages path,
# as transformers' and torch's do (the capture reads the path from the code
# object; no file needs to exist). An op's cudaMalloc is called from its
# own line, as a PyTorch op's is from the library's Python frame.
LIBRARY = "\n".join(
    ["def op_%d(ptr, size):\n    check(cudaMalloc(byref(ptr), size))\n" % i
     for i in range(FUNCTIONS)] +
    ["OPS = [%s]\n" % ", ".join("op_%d" % i for i in range(FUNCTIONS)),
     "def forward(ptrs, sizes, which):\n"
     "    for i in range(len(ptrs)):\n"
     "        OPS[which[i]](ptrs[i], sizes[i])\n",
     "def layer_%d(ptrs, sizes, which):\n"
     "    return forward(ptrs, sizes, which)\n" % DEPTH] +
    ["def layer_%d(ptrs, sizes, which):\n"
     "    return layer_%d(ptrs, sizes, which)\n" % (i, i + 1) for i in range(DEPTH)])


def check(err):
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)


lib = {"cudaMalloc": runtime.cudaMalloc, "byref": ctypes.byref, "check": check}
exec(compile(LIBRARY, "/opt/venv/lib/python3/site-packages/benchlib/modeling.py", "exec"), lib)
layer = lib["layer_0"]


def step(ptrs):
    layer(ptrs, sizes, which)
    for p in ptrs:
        runtime.cudaFree(p)


def run(count):
    ptrs = [ctypes.c_void_p() for _ in range(OPS)]
    for _ in range(count):
        step(ptrs)


if "--time" in sys.argv:
    run(20)  # warm: the site tables, the caches
    times = []
    for _ in range(20):
        start = time.perf_counter_ns()
        run(steps)
        times.append((time.perf_counter_ns() - start) / (steps * OPS))
    print("%.0f" % sorted(times)[len(times) // 2])
else:
    run(steps)
