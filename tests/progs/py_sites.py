"""py_sites.py: a Python job whose device memory comes from known lines.

Run under liboomlens.so on the simulated CUDA (ctypes calls cudaMalloc of
the simulated libcudart; ctypes releases the GIL around the call, as
PyTorch does around its CUDA work). Lines tagged "# site:" are the ones a
report must name; tests/test_pyframes.c finds them by their tag.

usage: py_sites.py LIBCUDART [two_sites | threads]
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


if __name__ == "__main__":
    kept = {"two_sites": two_sites, "threads": threads}[sys.argv[2]]()
