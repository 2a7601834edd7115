"""py_sites.py: a Python job whose device memory comes from known lines.

Run under liboomlens.so on the simulated CUDA (ctypes calls cudaMalloc of
the simulated libcudart; ctypes releases the GIL around the call, as
PyTorch does around its CUDA work). Lines tagged "# site:" are the ones a
report must name; tests/test_pyframes.c finds them by their tag.

usage: py_sites.py LIBCUDART [two_sites | threads | deep]
"""
import ctypes
import sys
import threading

MiB = 1 << 20
runtime = ctypes.CDLL(sys.argv[1])


def device_alloc(size):
    ptr = ctypes.c_void_p()
    err = runtime.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))  # site: device_alloc
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)
    return ptr


def free(ptr):
    if runtime.cudaFree(ptr) != 0:
        sys.exit("cudaFree failed")


def build_weights():
    return [device_alloc(32 * MiB) for _ in range(3)]  # site: weights


def forward(count):
    return [device_alloc(8 * MiB) for _ in range(count)]  # site: forward


def two_sites():
    weights = build_weights()  # site: main_weights
    activations = forward(2)  # site: main_forward
    for ptr in activations:
        free(ptr)
    return weights


def worker(rounds):
    for _ in range(rounds):
        free(device_alloc(MiB))  # site: worker


def threads():
    pool = [threading.Thread(target=worker, args=(200,)) for _ in range(4)]
    for t in pool:
        t.start()
    held = device_alloc(4 * MiB)  # site: main_held
    for t in pool:
        t.join()
    return held


# A library's op below DEEP library frames, as PyTorch's below a
# transformers forward: the code objects carry a site-packages path (the
# capture reads the path from the code object; no file needs to exist).
DEEP = 60
LIBRARY = ("def op(size):\n"
           "    ptr = ctypes.c_void_p()\n"
           "    check(runtime.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)))\n"
           "    return ptr\n" +
           "".join("def level_%d(size):\n    return level_%d(size)\n" % (i, i + 1)
                   for i in range(DEEP)) +
           "def level_%d(size):\n    return op(size)\n" % DEEP)


def check(err):
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)


def deep():
    lib = {"ctypes": ctypes, "runtime": runtime, "check": check}
    exec(compile(LIBRARY, "/usr/lib/python3/site-packages/deeplib/ops.py", "exec"), lib)
    held = []
    for _ in range(3):
        held.append(lib["level_0"](16 * MiB))  # site: deep
    return held


if __name__ == "__main__":
    kept = {"two_sites": two_sites, "threads": threads, "deep": deep}[sys.argv[2]]()
