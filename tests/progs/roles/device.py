"""device.py: the simulated device of tests/progs/roles/train.py.

Each allocation is written inline where it happens (ctypes is C: the
calling Python function is the innermost frame, as a PyTorch op's is), and
checked after it by ok(), whose frame is gone by then."""
import ctypes
import sys

MiB = 1 << 20
BLOCK = 32 * MiB  # far above the sampling mean: every allocation is sampled
runtime = ctypes.CDLL(sys.argv[1])


def ok(err):
    if err != 0:
        sys.exit("cudaMalloc failed: %d" % err)


def free(ptr):
    if runtime.cudaFree(ptr) != 0:
        sys.exit("cudaFree failed")
